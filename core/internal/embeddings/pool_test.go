package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
)

// answerFor is the fake upstream's answer to input id in format: a vector
// whose length and values are the id's own, so a byte of another answer
// shows.
func answerFor(id int, format string) []byte {
	v := make([]float32, 1+id%700)
	for j := range v {
		v[j] = float32(id) + float32(j)/1024
	}
	return encode(decoded{model: "m-" + strconv.Itoa(id), vectors: [][]float32{v}, promptTokens: int64(id), totalTokens: int64(id)}, format)
}

// Upstream bodies share buffers only where nothing reads them any more:
// many requests at once, passed through, normalised and decoded, each gets
// exactly its own answer, checked once every request is done (so a buffer
// reused too early would have been overwritten by then).
func TestConcurrentAnswersKeepTheirOwnBytes(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input          []string `json:"input"`
			EncodingFormat string   `json:"encoding_format"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &req) != nil || len(req.Input) != 1 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		id, _ := strconv.Atoi(req.Input[0])
		format := req.EncodingFormat
		if id%3 == 0 {
			format = FormatFloat // an upstream that ignores base64: normalised
		}
		body := answerFor(id, format)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	s := New(nil, Options{})
	c := &dispatch.Conn{BaseURL: up.URL, Client: up.Client()}

	const workers, each = 8, 60
	type result struct {
		id     int
		asJSON bool
		want   string
		out    Response
		err    error
	}
	results := make([][]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := w*each + i
				r := result{id: id, asJSON: id%2 == 0, want: FormatBase64}
				if id%4 == 0 {
					r.want = FormatFloat
				}
				ask := r.want
				if !r.asJSON {
					ask = FormatBase64
				}
				req := Request{Texts: []string{strconv.Itoa(id)}}
				r.err = s.attempt(context.Background(), c, appendRequest(nil, "m", &req, ask), r.want, r.asJSON, 1, &r.out)
				results[w] = append(results[w], r)
			}
		})
	}
	wg.Wait()

	for _, rs := range results {
		for _, r := range rs {
			require.NoError(t, r.err, "request %d", r.id)
			assert.Equal(t, "m-"+strconv.Itoa(r.id), r.out.Model, "request %d", r.id)
			assert.EqualValues(t, r.id, r.out.PromptTokens, "request %d", r.id)
			if r.asJSON {
				if r.id%3 == 0 && r.want == FormatBase64 {
					want := encode(mustDecode(t, answerFor(r.id, FormatFloat)), FormatBase64)
					require.Equal(t, string(want), string(r.out.Body), "request %d: normalised", r.id)
					continue
				}
				require.Equal(t, string(answerFor(r.id, r.want)), string(r.out.Body), "request %d: passed through", r.id)
				require.Equal(t, len(r.out.Body), cap(r.out.Body), "request %d: a pooled buffer's tail is out of reach", r.id)
				continue
			}
			require.Equal(t, mustDecode(t, answerFor(r.id, FormatBase64)).vectors, r.out.Vectors, "request %d: decoded", r.id)
		}
	}
}

func mustDecode(t *testing.T, raw []byte) decoded {
	t.Helper()
	d, err := decode(raw)
	require.NoError(t, err)
	return d
}

// BenchmarkReadDecoded reads and decodes a 1,536-dimension base64 answer
// for a gRPC caller, into a fresh buffer (before) and a pooled one (after).
func BenchmarkReadDecoded(b *testing.B) {
	raw := upstreamBody(FormatBase64, 1536)
	src := func() io.Reader { return bytes.NewReader(raw) }
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body, err := readBody(src(), int64(len(raw)), nil, maxResponse)
			require.NoError(b, err)
			var out Response
			_, err = out.fill(body, FormatFloat, false, 1)
			require.NoError(b, err)
		}
	})
	b.Run("after", func(b *testing.B) {
		s := New(nil, Options{})
		b.ReportAllocs()
		for b.Loop() {
			buf := s.buffer(len(raw))
			body, err := readBody(src(), int64(len(raw)), buf, maxResponse)
			require.NoError(b, err)
			var out Response
			kept, err := out.fill(body, FormatFloat, false, 1)
			require.NoError(b, err)
			if !kept {
				s.bodies.Put(buf)
			}
		}
	})
}
