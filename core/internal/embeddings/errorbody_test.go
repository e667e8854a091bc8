package embeddings

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// errorBody is an OpenAI error answer padded to n bytes with spaces after
// its JSON.
func errorBody(n int) []byte {
	b := []byte(`{"error":{"message":"the server had an error","type":"server_error"}}`)
	return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
}

// An upstream's error answer is read up to upstream.MaxErrorBody, whatever
// length it declares: an upstream declaring a body of hundreds of MiB makes
// the gateway allocate no more than that bound, and its error is still the
// upstream's (a 500 the next connection may answer), with the beginning of
// its body.
func TestUpstreamErrorBodyIsBounded(t *testing.T) {
	const declared = 200 << 20
	huge := errorBody(upstream.MaxErrorBody + 64<<10) // sent; far less than declared
	honest := errorBody(4 * upstream.MaxErrorBody)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := honest
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.URL.Path == "/declares/embeddings" {
			body = huge
			w.Header().Set("Content-Length", strconv.Itoa(declared))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	s := New(nil, Options{})
	req := Request{Texts: []string{"x"}}

	for _, tt := range []struct {
		name, base string
		sent       []byte
	}{
		{"declared", up.URL + "/declares", huge},
		{"honest", up.URL, honest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &dispatch.Conn{BaseURL: tt.base, Client: up.Client()}
			var out Response
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := s.attempt(context.Background(), c, appendRequest(nil, "m", &req, FormatFloat), FormatFloat, true, 1, &out)
			runtime.ReadMemStats(&after)

			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated for one error answer")
			var ue *credential.UpstreamError
			require.True(t, errors.As(err, &ue), "the upstream's error, not a failed read: %v", err)
			assert.Equal(t, http.StatusInternalServerError, ue.Status)
			assert.Equal(t, upstream.MaxErrorBody, len(ue.Body), "bytes of the error body kept")
			assert.True(t, bytes.Equal(tt.sent[:len(ue.Body)], ue.Body), "the error body is the beginning of the upstream's")
		})
	}
}

// A successful answer keeps its own bound: an embeddings list of several
// MiB is read whole.
func TestLargeAnswerIsReadWhole(t *testing.T) {
	vectors := make([][]float32, 2048)
	for i := range vectors {
		vectors[i] = make([]float32, 256)
		for j := range vectors[i] {
			vectors[i][j] = float32(i) + float32(j)/1024
		}
	}
	body := encode(decoded{model: "m", vectors: vectors, promptTokens: 2048, totalTokens: 2048}, FormatFloat)
	require.Greater(t, len(body), 4*upstream.MaxErrorBody)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	s := New(nil, Options{})
	req := Request{Texts: []string{"x"}}
	c := &dispatch.Conn{BaseURL: up.URL, Client: up.Client()}
	var out Response
	require.NoError(t, s.attempt(context.Background(), c, appendRequest(nil, "m", &req, FormatFloat), FormatFloat, false, len(vectors), &out))
	require.Len(t, out.Vectors, len(vectors))
	assert.Equal(t, vectors[2047], out.Vectors[2047])
}
