package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
)

// OverheadHeader carries the time the gateway itself added to a response, in
// microseconds: the handler's time less the time spent waiting upstream.
const OverheadHeader = "X-Switchboard-Overhead-Us"

type upstreamKey struct{}

// addUpstream records time spent waiting on an upstream (reported by core) so
// it is not counted as overhead.
func addUpstream(ctx context.Context, us int64) {
	if p, ok := ctx.Value(upstreamKey{}).(*atomic.Int64); ok {
		p.Add(us)
	}
}

// overhead stamps every response with OverheadHeader.
func overhead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		up := new(atomic.Int64)
		ow := &overheadWriter{ResponseWriter: w, start: start, upstream: up}
		next.ServeHTTP(ow, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, up)))
	})
}

type overheadWriter struct {
	http.ResponseWriter
	start    time.Time
	upstream *atomic.Int64
	wrote    bool
}

func (w *overheadWriter) stamp() {
	if w.wrote {
		return
	}
	w.wrote = true
	us := time.Since(w.start).Microseconds() - w.upstream.Load()
	if us < 0 {
		us = 0
	}
	w.Header().Set(OverheadHeader, strconv.FormatInt(us, 10))
}

func (w *overheadWriter) WriteHeader(code int) {
	w.stamp()
	w.ResponseWriter.WriteHeader(code)
}

func (w *overheadWriter) Write(b []byte) (int, error) {
	w.stamp()
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *overheadWriter) Flush() {
	w.stamp()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *overheadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isGatewayPath reports whether a path is an OpenAI-compatible route:
// /v1/... or the legacy /{machineId}/v1/....
func isGatewayPath(p string) bool {
	if strings.HasPrefix(p, "/v1/") || p == "/v1" {
		return true
	}
	rest := strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(rest, '/'); i > 0 {
		return strings.HasPrefix(rest[i:], "/v1/")
	}
	return false
}

// limitBody caps request bodies.
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tooLarge(w, r, limit)
			return
		}
		openai.Limit(w, r, limit)
		next.ServeHTTP(w, r)
	})
}
