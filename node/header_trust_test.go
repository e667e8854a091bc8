package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// latin1Key is a key header's value as a page's fetch() sends "éééééééééé"
// (header values are byte strings: Latin-1, not UTF-8). No gRPC metadata
// can carry it.
const latin1Key = "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"

// TestKeyCoreCannotReadIsRefusedOnListings: the listings grpc-gateway
// serves (models, model info, voices) answer a key header holding no
// well-formed key (here not ASCII, which grpc-gateway would drop before
// core, running the request keyless as the default machine) with 401
// invalid_api_key: a foreign page is not granted "*" and reads nothing,
// curl gets the same 401, and an allowed origin's page can read the 401.
func TestKeyCoreCannotReadIsRefusedOnListings(t *testing.T) {
	g := newTrustGateway(t, nil)
	const evil = "https://evil.example"
	paths := []string{"/v1/models", "/v1/models/info?id=" + embedModel, "/v1/audio/voices?provider=openai"}
	for _, path := range paths {
		require.Equal(t, http.StatusOK, g.sb.Do(t, http.MethodGet, path, nil, "Authorization", "Bearer "+g.key).Status, path)
	}
	for _, path := range paths {
		for _, h := range []struct{ name, value string }{
			{"X-Api-Key", latin1Key},
			{"Authorization", "Bearer " + latin1Key},
			{"X-Goog-Api-Key", latin1Key},
			{"X-Api-Key", "short"}, // ASCII, not well-formed
		} {
			t.Run(path+"/"+h.name+"/"+h.value[:1], func(t *testing.T) {
				r := g.sb.Do(t, http.MethodGet, path, nil, "Origin", evil, "Sec-Fetch-Site", "cross-site", h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "a foreign page: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))
				assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"), "nothing a foreign page may read")

				r = g.sb.Do(t, http.MethodGet, path, nil, h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "curl: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))

				r = g.sb.Do(t, http.MethodGet, path, nil, "Origin", allowedOrigin, h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "an allowed page: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))
				assert.Equal(t, allowedOrigin, r.Header.Get("Access-Control-Allow-Origin"), "an allowed page reads why")
			})
		}
	}
}

// TestHeadersCoreCannotReceiveAreTheClientsError: a header the edge hands
// to core (as gRPC metadata, or in the request) whose value is not
// printable ASCII is the client's error in the route's own shape, in one
// process and with a separate edge (where every call crosses a network
// connection): 401 invalid_api_key for a key header, 400 invalid_header
// naming any other, never a 500 from the gRPC library; an admin call
// naming a machine it cannot pass on changes nothing.
func TestHeadersCoreCannotReceiveAreTheClientsError(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	one := nodetest.Serve(t, t.TempDir())
	natsURL := nodetest.StartNATS(t)
	cfg := nodetest.Config(t.TempDir())
	cfg.NATSURL = natsURL
	core := nodetest.Start(t, cfg, node.RoleCore)
	ecfg := nodetest.Config(t.TempDir())
	ecfg.CoreAddr = core.Node.GRPCAddr()
	split := nodetest.Start(t, ecfg, node.RoleEdge)

	formType, formBody := form(t, []byte("RIFF....WAVE audio bytes"), "model", sttModel)
	audio, err := io.ReadAll(formBody)
	require.NoError(t, err)
	type route struct {
		name, method, path, contentType string
		body                            []byte
		shape                           errorShape
	}
	jsonRoute := func(name, path, body string) route {
		return route{name: name, method: http.MethodPost, path: path, contentType: "application/json", body: []byte(body)}
	}
	for _, in := range []struct {
		name string
		sb   *nodetest.Instance
	}{{"one process", one}, {"separate edge", split}} {
		sb := in.sb
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		k := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "headers"})
		require.Equal(t, http.StatusCreated, k.Status, "%s", k.Body)
		key := k.JSON["key"].(string)
		machine := sb.Node.DefaultMachineID()
		chat := `{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}]}`
		routes := []route{
			jsonRoute("embeddings", pathEmbed, `{"model":"`+embedModel+`","input":"x"}`),
			jsonRoute("legacy embeddings", "/"+machine+pathEmbed, `{"model":"`+embedModel+`","input":"x"}`),
			jsonRoute("chat", pathChat, chat),
			jsonRoute("responses", pathResponses, `{"model":"`+chatModel+`","input":"hi"}`),
			{name: "messages", method: http.MethodPost, path: pathMessages, contentType: "application/json", shape: shapeAnthropic,
				body: []byte(`{"model":"` + chatModel + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)},
			{name: "transcriptions", method: http.MethodPost, path: "/v1/audio/transcriptions", contentType: formType, body: audio},
			{name: "models", method: http.MethodGet, path: "/v1/models"},
			{name: "retrieve model", method: http.MethodGet, path: "/v1/models/" + embedModel},
		}
		send := func(t *testing.T, rt route, headers ...string) (*http.Response, []byte) {
			t.Helper()
			req, err := http.NewRequest(rt.method, sb.BaseURL+rt.path, bytes.NewReader(rt.body))
			require.NoError(t, err)
			if rt.contentType != "" {
				req.Header.Set("Content-Type", rt.contentType)
			}
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header[http.CanonicalHeaderKey(headers[i])] = []string{headers[i+1]}
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp, raw
		}
		// code reads the error's code, or for Anthropic's shape its type.
		code := func(shape errorShape, raw []byte) string {
			var b struct {
				Error struct {
					Code *string `json:"code"`
					Type string  `json:"type"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &b)
			if shape == shapeAnthropic || b.Error.Code == nil {
				return b.Error.Type
			}
			return *b.Error.Code
		}
		for _, rt := range routes {
			t.Run(in.name+"/"+rt.name, func(t *testing.T) {
				resp, raw := send(t, rt, "Authorization", "Bearer "+key)
				require.Less(t, resp.StatusCode, 300, "the route serves a plain request: %s", clip(raw))
				for _, c := range []struct {
					header, value string
					status        int
					code          string
				}{
					{"X-Api-Key", "sk-\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", http.StatusUnauthorized, "invalid_api_key"},
					{"Authorization", "Bearer " + latin1Key, http.StatusUnauthorized, "invalid_api_key"},
					{"Idempotency-Key", "\xc3\xa9t\xc3\xa9", http.StatusBadRequest, "invalid_header"},
					{"X-Switchboard-Token-Saver", "\xe9", http.StatusBadRequest, "invalid_header"},
					{"X-Switchboard-Machine", "m\xe9", http.StatusBadRequest, "invalid_header"},
					{"X-Session-Id", "s\ti", http.StatusBadRequest, "invalid_header"},
					{"Anthropic-Beta", "b\xe9ta", http.StatusBadRequest, "invalid_header"},
				} {
					headers := []string{c.header, c.value}
					if c.header != "Authorization" {
						headers = append(headers, "Authorization", "Bearer "+key)
					}
					resp, raw := send(t, rt, headers...)
					assert.Equal(t, c.status, resp.StatusCode, "%s: %s", c.header, clip(raw))
					assertShape(t, rt.shape, raw)
					want := c.code
					if rt.shape == shapeAnthropic {
						want = map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusBadRequest: "invalid_request_error"}[c.status]
					}
					assert.Equal(t, want, code(rt.shape, raw), c.header)
				}
			})
		}
		t.Run(in.name+"/legacy path with a machine id that is not ASCII", func(t *testing.T) {
			resp, raw := send(t, route{method: http.MethodPost, path: "/%C3%A9" + pathEmbed, contentType: "application/json",
				body: []byte(`{"model":"` + embedModel + `","input":"x"}`)}, "Authorization", "Bearer "+key)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", clip(raw))
			assert.Equal(t, "invalid_machine_id", code(shapeOpenAI, raw))
		})
		t.Run(in.name+"/admin", func(t *testing.T) {
			before := sb.Admin(t, http.MethodGet, "/api/settings", nil)
			require.Equal(t, http.StatusOK, before.Status)
			r := sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"routingStrategy": "round-robin"},
				"X-Switchboard-Machine", "m\xe9")
			assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			assert.Equal(t, "invalid_header", errorCode(r))
			assert.Equal(t, string(before.Body), string(sb.Admin(t, http.MethodGet, "/api/settings", nil).Body),
				"the default machine's settings are unchanged")
			r = sb.Do(t, http.MethodGet, "/api/settings", nil, "Authorization", "Bearer \xe9"+nodetest.AdminToken)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.Equal(t, "invalid_admin_token", errorCode(r))
		})
	}
}
