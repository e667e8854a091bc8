package node_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// BenchmarkGateway measures one request through the whole service in one
// process (edge, core, the usage event) beside the same request sent
// straight to the fake upstream and through a bare httputil.ReverseProxy,
// in the same run: the difference is what the gateway costs beyond the hop
// any proxy pays, in time and in allocations per request. cmd/bench measures the real binary as its own process; this is
// the quick loop for profiling one change:
//
//	go test ./node/ -run '^$' -bench Gateway -benchmem -count 5
func BenchmarkGateway(b *testing.B) {
	up := upstreamtest.New(b, upstreamtest.WithoutRecording())
	sb := nodetest.Serve(b, b.TempDir())
	sb.CreateConnection(b, map[string]any{"provider": "openai-compatible-local", "name": "local",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	r := sb.Admin(b, http.MethodPost, "/api/keys", map[string]any{"name": "bench"})
	require.Equal(b, http.StatusCreated, r.Status, "%s", r.Body)
	key := r.JSON["key"].(string)

	upstream := strings.TrimSuffix(up.URL(), "/v1")
	target, err := url.Parse(upstream)
	require.NoError(b, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	proxy := httptest.NewServer(rp)
	b.Cleanup(proxy.Close)
	for _, w := range []struct{ name, path, model, body string }{
		{"chat", "/v1/chat/completions", "gpt-4o-mini", `{"model":%q,"messages":[{"role":"user","content":"Say hello in one short sentence."}]}`},
		{"chat-stream", "/v1/chat/completions", "gpt-4o-mini", `{"model":%q,"stream":true,"messages":[{"role":"user","content":"Say hello in one short sentence."}]}`},
		{"embeddings", "/v1/embeddings", "text-embedding-3-small", `{"model":%q,"input":"The quick brown fox","encoding_format":"base64"}`},
	} {
		b.Run(w.name+"/direct", func(b *testing.B) {
			benchPost(b, upstream+w.path, strings.Replace(w.body, "%q", `"`+w.model+`"`, 1), "")
		})
		b.Run(w.name+"/proxy", func(b *testing.B) {
			benchPost(b, proxy.URL+w.path, strings.Replace(w.body, "%q", `"`+w.model+`"`, 1), "")
		})
		b.Run(w.name+"/serve", func(b *testing.B) {
			benchPost(b, sb.BaseURL+w.path, strings.Replace(w.body, "%q", `"local/`+w.model+`"`, 1), key)
		})
	}
}

func benchPost(b *testing.B, url, body, key string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Errorf("%s: %d %v", url, resp.StatusCode, err)
				return
			}
		}
	})
}
