package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql/errcode"
)

// Codes of requests refused before GraphQL runs them (transport errors):
// client errors, each with its own code.
const (
	CodeBadRequest        = "BAD_REQUEST"
	CodeRequestTooLarge   = "REQUEST_TOO_LARGE"
	CodeBatchNotSupported = "BATCH_NOT_SUPPORTED"
	CodeUnsupportedMedia  = "UNSUPPORTED_MEDIA_TYPE"
	CodeRequestTimeout    = "REQUEST_TIMEOUT"
	CodeServerBusy        = "SERVER_BUSY"
)

// Limits of a GraphQL request, besides MaxBodyBytes.
const (
	// MaxComplexity bounds an operation's complexity (each field 1, so it
	// also bounds aliases: a thousand aliased fields are refused).
	MaxComplexity = 500
	// MaxDepth bounds the JSON nesting of a request (its variables): our
	// schema's inputs are flat.
	MaxDepth = 32
	// MaxTokens bounds the tokens of a query document.
	MaxTokens = 5000
)

// An operation over the complexity limit is refused like an invalid one
// (422), not answered 200 with an error.
func init() { errcode.RegisterErrorType(codeComplexity, errcode.KindProtocol) }

// codeComplexity is gqlgen's code of an operation over the complexity limit.
const codeComplexity = "COMPLEXITY_LIMIT_EXCEEDED"

// Options tune the handler.
type Options struct {
	// OpenIntrospection lets anonymous callers introspect the schema (a
	// loopback listener); otherwise it needs a signed-in user.
	OpenIntrospection bool
	// SlowBody and BusyBody are the errors a body read fails with when the
	// body arrived too slowly or there was no memory for it (the edge's
	// body guard): answered 408 and 503.
	SlowBody, BusyBody error
}

// TransportError answers a request refused before GraphQL ran it, in
// GraphQL's error shape.
func TransportError(w http.ResponseWriter, httpStatus int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{
		"message": msg, "extensions": map[string]any{"code": code, "status": httpStatus},
	}}})
}

// checkTransport reads and checks a GraphQL request body: application/json,
// at most MaxBodyBytes, valid UTF-8 JSON, one operation (an object, not a
// batch array), nested at most MaxDepth. It answers the client error
// itself (never logging the body) and returns false, or puts the body back
// for gqlgen and returns true.
func checkTransport(w http.ResponseWriter, r *http.Request, opts Options, log *slog.Logger) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		TransportError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "A GraphQL request must be application/json.")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			TransportError(w, http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "The request body is larger than "+strconv.Itoa(MaxBodyBytes)+" bytes.")
		case opts.SlowBody != nil && errors.Is(err, opts.SlowBody):
			TransportError(w, http.StatusRequestTimeout, CodeRequestTimeout, "The request body arrived too slowly.")
		case opts.BusyBody != nil && errors.Is(err, opts.BusyBody):
			w.Header().Set("Retry-After", "1")
			TransportError(w, http.StatusServiceUnavailable, CodeServerBusy, "The server is busy, please try again.")
		default:
			TransportError(w, http.StatusBadRequest, CodeBadRequest, "The request body could not be read.")
		}
		return false
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case !utf8.Valid(body):
		TransportError(w, http.StatusBadRequest, CodeBadRequest, "The request body is not valid UTF-8.")
	case len(trimmed) > 0 && trimmed[0] == '[':
		TransportError(w, http.StatusBadRequest, CodeBatchNotSupported, "Batched operations are not supported: send one operation per request.")
	case !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{':
		TransportError(w, http.StatusBadRequest, CodeBadRequest, "The request body is not a JSON object.")
	case depth(body) > MaxDepth:
		TransportError(w, http.StatusBadRequest, CodeBadRequest, "The request is nested deeper than "+strconv.Itoa(MaxDepth)+" levels.")
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		return true
	}
	log.Debug("graphql request refused", "bytes", len(body))
	return false
}

// depth is the deepest nesting of arrays and objects in valid JSON.
func depth(b []byte) int {
	d, deepest, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		}
	}
	return deepest
}
