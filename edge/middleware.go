package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// OverheadHeader carries the time the gateway itself added to a response, in
// microseconds: the handler's time less the time spent waiting upstream.
const OverheadHeader = "X-Switchboard-Overhead-Us"

// requestState is what the middleware keeps for one request, in one
// allocation made by overhead (the outermost): the time core waited
// upstream, the response writers of overhead and of the metrics, and the
// slots the body guard and the route tracking fill (so neither copies the
// request to put its own in the context).
type requestState struct {
	upstream atomic.Int64
	ow       overheadWriter
	mw       metricsWriter
	body     openai.BodySlot
	route    telemetry.RouteSlot
}

type stateKey struct{}

// stateOf is the requestState of ctx's request, or nil.
func stateOf(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	return st
}

// addUpstream records time spent waiting on an upstream (reported by core) so
// it is not counted as overhead.
func addUpstream(ctx context.Context, us int64) {
	if st := stateOf(ctx); st != nil {
		st.upstream.Add(us)
	}
}

// overhead stamps every response with OverheadHeader.
func overhead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &requestState{}
		st.ow = overheadWriter{ResponseWriter: w, start: time.Now(), upstream: &st.upstream}
		ctx := context.WithValue(r.Context(), stateKey{}, st)
		ctx = openai.WithBodySlot(ctx, &st.body)
		ctx = telemetry.WithRouteSlot(ctx, &st.route)
		next.ServeHTTP(&st.ow, r.WithContext(ctx))
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
