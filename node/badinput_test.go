package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/switchboardhq/switchboard/internal/config"
)

// errorShape is how a route answers errors.
type errorShape int

const (
	shapeOpenAI    errorShape = iota // {"error":{"message","type","code","param"}}
	shapeGraphQL                     // {"errors":[{"message","extensions":{"code","status"}}]}
	shapeWebhook                     // {"error":"..."}
	shapeAnthropic                   // {"type":"error","error":{"type","message"}}
)

// badRoute is one route of the bad-input table.
type badRoute struct {
	name, method, path string
	shape              errorShape
	// body says the route reads a JSON body; form a multipart one.
	body, form bool
	// needsType: the route needs its content type (multipart, or JSON for
	// GraphQL and browsers).
	needsType bool
	graphql   bool
	webhook   bool
	headers   []string
	// list is the member a list is sent in (default "input").
	list string
	// bound, when set, is the most items list takes, each like item, in a
	// request that would otherwise be answered by the upstream.
	bound int
	item  string
}

// badCase is one bad input: the request to send.
type badCase struct {
	name string
	// applies says which routes take this input.
	applies     func(badRoute) bool
	contentType string
	body        func(badRoute) io.Reader
	headers     []string
	// chunked sends the body without a Content-Length.
	chunked bool
}

const (
	badMaxBody  = 4 << 20 // the instance's JSON body limit
	badOverBody = 5 << 20 // above every route's limit (audio: 1 MiB + form slack)
)

// TestBadInputTable sends every kind of bad input to every route: each
// answers a clear 4xx in its own error shape, nothing is stored, no
// upstream is called, and the process stays up.
func TestBadInputTable(t *testing.T) {
	g := newTrustGateway(t, func(c *config.Config) {
		c.MaxBodyBytes = badMaxBody
		c.MaxAudioBytes = 1 << 20
		c.StripeSecretKey = "sk_test_badinput"
		c.StripeWebhookSecret = "whsec_badinput"
		c.StripeAPIBase = "http://127.0.0.1:1"
	})
	sb := g.sb
	machine := sb.Node.DefaultMachineID()
	key := []string{"Authorization", "Bearer " + g.key}
	admin := []string{"Authorization", "Bearer " + "test-admin-token-0123456789"}
	routes := []badRoute{
		{name: "embeddings", method: http.MethodPost, path: "/v1/embeddings", body: true, headers: key},
		{name: "legacy embeddings", method: http.MethodPost, path: "/" + machine + "/v1/embeddings", body: true, headers: key},
		{name: "chat", method: http.MethodPost, path: "/v1/chat/completions", body: true, headers: key, list: "messages"},
		{name: "legacy chat", method: http.MethodPost, path: "/" + machine + "/v1/chat/completions", body: true, headers: key, list: "stop"},
		{name: "messages", method: http.MethodPost, path: pathMessages, shape: shapeAnthropic, body: true, headers: key, list: "messages",
			bound: 10_000, item: `{"role":"user","content":"x"}`},
		{name: "messages tools", method: http.MethodPost, path: pathMessages, shape: shapeAnthropic, body: true, headers: key, list: "tools",
			bound: 1024, item: `{"name":"t","input_schema":{"type":"object"}}`},
		{name: "messages stop sequences", method: http.MethodPost, path: pathMessages, shape: shapeAnthropic, body: true, headers: key, list: "stop_sequences",
			bound: 256, item: `"s"`},
		{name: "messages system blocks", method: http.MethodPost, path: pathMessages, shape: shapeAnthropic, body: true, headers: key, list: "system",
			bound: 10_000, item: `{"type":"text","text":"x"}`},
		{name: "count tokens", method: http.MethodPost, path: "/v1/messages/count_tokens", shape: shapeAnthropic, body: true, headers: key, list: "messages"},
		{name: "responses", method: http.MethodPost, path: pathResponses, body: true, headers: key, list: "input",
			bound: 10_000, item: `{"role":"user","content":"x"}`},
		{name: "responses tools", method: http.MethodPost, path: pathResponses, body: true, headers: key, list: "tools",
			bound: 128, item: `{"type":"function","name":"t","parameters":{"type":"object"}}`},
		{name: "speech", method: http.MethodPost, path: "/v1/audio/speech", body: true, headers: key},
		{name: "transcriptions", method: http.MethodPost, path: "/v1/audio/transcriptions", form: true, needsType: true, headers: key},
		{name: "models", method: http.MethodGet, path: "/v1/models", headers: key},
		{name: "model info", method: http.MethodGet, path: "/v1/models/info?model=x", headers: key},
		{name: "admin create connection", method: http.MethodPost, path: "/api/providers", body: true, headers: admin, list: "name"},
		{name: "admin create key", method: http.MethodPost, path: "/api/keys", body: true, headers: admin, list: "name"},
		{name: "admin settings", method: http.MethodPatch, path: "/api/settings", body: true, headers: admin, list: "routingStrategy"},
		{name: "admin aliases", method: http.MethodPut, path: "/api/models/aliases", body: true, headers: admin, list: "aliases"},
		{name: "graphql", method: http.MethodPost, path: "/graphql", shape: shapeGraphQL, body: true, needsType: true, graphql: true, list: "variables"},
		{name: "stripe webhook", method: http.MethodPost, path: "/webhooks/stripe", shape: shapeWebhook, body: true, webhook: true},
	}
	str := func(s string) func(badRoute) io.Reader {
		return func(badRoute) io.Reader { return strings.NewReader(s) }
	}
	hasBody := func(r badRoute) bool { return r.body || r.form }
	jsonBody := func(r badRoute) bool { return r.body }
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	million := "[" + strings.Repeat("0,", 999_999) + "0]"
	signed := func(secret string, at time.Time) string {
		return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: []byte(`{"id":"evt_forged","type":"customer.subscription.deleted"}`), Secret: secret, Timestamp: at,
		}).Header
	}
	cases := []badCase{
		{name: "body over the limit", applies: hasBody, contentType: "application/json",
			body: func(badRoute) io.Reader { return bytes.NewReader(bytes.Repeat([]byte(" "), badOverBody)) }},
		{name: "body over the limit, chunked", applies: hasBody, contentType: "application/json", chunked: true,
			body: func(badRoute) io.Reader {
				return io.MultiReader(strings.NewReader(`{"model":"`), bytes.NewReader(bytes.Repeat([]byte("a"), badOverBody)))
			}},
		{name: "truncated JSON", applies: jsonBody, contentType: "application/json", body: str(`{"model":"openai/x","input":"abc`)},
		{name: "invalid UTF-8", applies: jsonBody, contentType: "application/json",
			body: str("{\"model\":\"openai/x\",\"name\":\"\xff\xfe\",\"input\":\"\xc3\x28\",\"query\":\"{ prices { plan } }\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}")},
		{name: "JSON nested 100,000 deep", applies: jsonBody, contentType: "application/json",
			body: str(`{"model":"openai/x","input":` + deep + `,"messages":` + deep + `,"variables":` + deep + `}`)},
		{name: "array of a million items", applies: jsonBody, contentType: "application/json",
			body: func(r badRoute) io.Reader {
				field := r.list
				if field == "" {
					field = "input"
				}
				return strings.NewReader(`{"model":"` + embedModel + `","query":"{ prices { plan } }","` + field + `":` + million + `}`)
			}},
		{name: "list one past its bound", applies: func(r badRoute) bool { return r.bound > 0 }, contentType: "application/json",
			body: func(r badRoute) io.Reader {
				var b strings.Builder
				if r.path == pathResponses {
					b.WriteString(`{"model":"` + chatModel + `","input":"x"`)
				} else {
					b.WriteString(`{"model":"` + chatModel + `","max_tokens":16,"messages":[{"role":"user","content":"x"}]`)
				}
				b.WriteString(`,"` + r.list + `":[` + strings.TrimSuffix(strings.Repeat(r.item+",", r.bound+1), ",") + `]}`)
				return strings.NewReader(b.String())
			}},
		{name: "JSON followed by more", applies: jsonBody, contentType: "application/json",
			body: str(`{"model":"` + chatModel + `","max_tokens":16,"messages":[{"role":"user","content":"x"}],"input":"x",` +
				`"provider":"openai","apiKey":"k","name":"trailing","routingStrategy":"round-robin","aliases":{"trailing":"openai/gpt-4o-mini"},` +
				`"query":"{ prices { plan } }"} x`)},
		{name: "wrong content type", applies: func(r badRoute) bool { return r.needsType }, contentType: "text/plain",
			body: str(`{"query":"{ prices { plan } }"}`)},
		{name: "wrong content type from a page", applies: func(r badRoute) bool { return r.body && !r.webhook && !strings.HasPrefix(r.path, "/api/") },
			contentType: "text/plain", headers: []string{"Origin", allowedOrigin},
			body: str(`{"model":"` + embedModel + `","input":"x","messages":[{"role":"user","content":"x"}],"query":"{ prices { plan } }"}`)},
		{name: "multipart without a file", applies: func(r badRoute) bool { return r.form }, body: nil},
		{name: "multipart with an empty file", applies: func(r badRoute) bool { return r.form }, body: nil},
		{name: "1 MB header", applies: func(badRoute) bool { return true }, contentType: "application/json",
			headers: []string{"X-Padding", strings.Repeat("p", 1_000_000)}, body: str(`{}`)},
		{name: "thousands of aliases", applies: func(r badRoute) bool { return r.graphql }, contentType: "application/json",
			body: func(badRoute) io.Reader {
				var q strings.Builder
				q.WriteString("{")
				for i := range 3000 {
					q.WriteString(" a" + strconv.Itoa(i) + ": prices { plan }")
				}
				q.WriteString("}")
				b, _ := json.Marshal(map[string]any{"query": q.String()})
				return bytes.NewReader(b)
			}},
		{name: "batch of a thousand operations", applies: func(r badRoute) bool { return r.graphql }, contentType: "application/json",
			body: str("[" + strings.Repeat(`{"query":"{ prices { plan } }"},`, 999) + `{"query":"{ prices { plan } }"}]`)},
		{name: "webhook without a signature", applies: func(r badRoute) bool { return r.webhook }, contentType: "application/json",
			body: str(`{"id":"evt_1","type":"customer.subscription.deleted"}`)},
		{name: "webhook with a forged signature", applies: func(r badRoute) bool { return r.webhook }, contentType: "application/json",
			headers: []string{"Stripe-Signature", signed("whsec_someone_else", time.Now())},
			body:    str(`{"id":"evt_forged","type":"customer.subscription.deleted"}`)},
		{name: "webhook with a stale signature", applies: func(r badRoute) bool { return r.webhook }, contentType: "application/json",
			headers: []string{"Stripe-Signature", signed("whsec_badinput", time.Now().Add(-time.Hour))},
			body:    str(`{"id":"evt_forged","type":"customer.subscription.deleted"}`)},
	}

	count := func(path string) int {
		r := sb.Admin(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		for _, v := range r.JSON {
			if l, ok := v.([]any); ok {
				return len(l)
			}
		}
		return 0
	}
	conns, keys := count("/api/providers"), count("/api/keys")
	settings := sb.Admin(t, http.MethodGet, "/api/settings", nil).Body
	aliases := sb.Admin(t, http.MethodGet, "/api/models/aliases", nil).Body
	calls := g.upstreamCalls()

	for _, route := range routes {
		for _, bc := range cases {
			if !bc.applies(route) {
				continue
			}
			t.Run(route.name+"/"+bc.name, func(t *testing.T) {
				var body io.Reader
				ct := bc.contentType
				switch {
				case bc.body != nil:
					body = bc.body(route)
				case bc.name == "multipart without a file":
					ct, body = form(t, nil, "model", sttModel)
				default:
					ct, body = form(t, []byte{}, "model", sttModel)
				}
				if route.method == http.MethodGet {
					body = nil
				}
				if !bc.chunked && body != nil {
					b, _ := io.ReadAll(body)
					body = bytes.NewReader(b)
				} else if body != nil {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
				req, err := http.NewRequest(route.method, sb.BaseURL+route.path, body)
				require.NoError(t, err)
				if ct != "" && body != nil {
					req.Header.Set("Content-Type", ct)
				}
				for _, hs := range [][]string{route.headers, bc.headers} {
					for i := 0; i+1 < len(hs); i += 2 {
						req.Header.Set(hs[i], hs[i+1])
					}
				}
				client := &http.Client{Timeout: 30 * time.Second}
				resp, err := client.Do(req)
				if err != nil && bc.chunked {
					// The server may close the connection while the
					// client still sends a body it refused.
					t.Logf("connection closed while sending: %v", err)
					return
				}
				require.NoError(t, err)
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				assert.GreaterOrEqual(t, resp.StatusCode, 400, "%s", clip(raw))
				assert.Less(t, resp.StatusCode, 500, "a client error: %s", clip(raw))
				assertShape(t, route.shape, raw)
			})
		}
	}

	// Nothing stored, no upstream called, still up.
	assert.Equal(t, conns, count("/api/providers"), "no connection stored")
	assert.Equal(t, keys, count("/api/keys"), "no key stored")
	assert.Equal(t, string(settings), string(sb.Admin(t, http.MethodGet, "/api/settings", nil).Body), "settings unchanged")
	assert.Equal(t, string(aliases), string(sb.Admin(t, http.MethodGet, "/api/models/aliases", nil).Body), "aliases unchanged")
	assert.Equal(t, calls, g.upstreamCalls(), "no bad input reached an upstream")
	assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodGet, "/healthz", nil).Status)
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "still up"}, key...)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

func form(t *testing.T, file []byte, fields ...string) (string, io.Reader) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		w, err := mw.CreateFormFile("file", "speech.wav")
		require.NoError(t, err)
		_, _ = w.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), &buf
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// assertShape checks an error body is in the route's own shape, with a
// stable code and a message.
func assertShape(t *testing.T, shape errorShape, raw []byte) {
	t.Helper()
	switch shape {
	case shapeOpenAI:
		var b struct {
			Error *struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &b), "OpenAI error shape: %s", clip(raw))
		require.NotNil(t, b.Error, "%s", clip(raw))
		assert.NotEmpty(t, b.Error.Message)
		assert.NotEmpty(t, b.Error.Type)
		if assert.NotNil(t, b.Error.Code, "a stable code, never null: %s", clip(raw)) {
			assert.NotEmpty(t, *b.Error.Code)
		}
		assert.NotContains(t, b.Error.Message, "proto:", "no library messages")
	case shapeGraphQL:
		var b struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(raw, &b), "GraphQL error shape: %s", clip(raw))
		require.NotEmpty(t, b.Errors, "%s", clip(raw))
		assert.NotEmpty(t, b.Errors[0].Extensions["code"], "%s", clip(raw))
		assert.NotEqual(t, "INTERNAL_SERVER_ERROR", b.Errors[0].Extensions["code"])
	case shapeAnthropic:
		var b struct {
			Type  string `json:"type"`
			Error *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &b), "Anthropic error shape: %s", clip(raw))
		assert.Equal(t, "error", b.Type, "%s", clip(raw))
		require.NotNil(t, b.Error, "%s", clip(raw))
		assert.NotEmpty(t, b.Error.Type)
		assert.NotEmpty(t, b.Error.Message)
		assert.NotContains(t, b.Error.Message, "proto:", "no library messages")
	case shapeWebhook:
		var b struct {
			Error string `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &b), "webhook error shape: %s", clip(raw))
		assert.NotEmpty(t, b.Error)
	}
}
