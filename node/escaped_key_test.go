package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// escapedKey is the provider key the escaped-echo tests give their
// connections: its slashes are what PHP's JSON encoding writes as \/.
const escapedKey = "sk-FAKEPROVIDERKEY/Slash+Key/0123456789abcdef"

// unicodeEscaped is s with every byte written as a \u escape, as JSON
// allows any character to be.
func unicodeEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// decodedStrings is every string value and object key of the JSON in raw
// as a JSON parser reads it: of the body, or of each data line of a
// stream.
func decodedStrings(t *testing.T, raw []byte) []string {
	t.Helper()
	var docs [][]byte
	if json.Valid(raw) {
		docs = append(docs, raw)
	} else {
		for line := range strings.SplitSeq(string(raw), "\n") {
			data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:")
			data = strings.TrimSpace(data)
			if !ok || data == "[DONE]" {
				continue
			}
			require.True(t, json.Valid([]byte(data)), "a data line that is not JSON: %s", line)
			docs = append(docs, []byte(data))
		}
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out = append(out, k)
				walk(e)
			}
		}
	}
	for _, d := range docs {
		var v any
		require.NoError(t, json.Unmarshal(d, &v), "%s", d)
		walk(v)
	}
	return out
}

// An upstream's error that echoes the connection's key with JSON escapes
// (\u0073\u006b..., or \/ for its slashes as PHP writes them) reaches no
// client with the key in it, on any route: what a JSON parser reads of the
// answer says [redacted] where the key was, as it does for a key echoed as
// it is.
func TestUpstreamEscapedKeyEchoRedacted(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	compat := upstreamtest.New(t, upstreamtest.WithAPIKey(escapedKey))
	native := upstreamtest.New(t, upstreamtest.WithAPIKey(escapedKey))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-x", "name": "compat", "apiKey": escapedKey,
		"providerSpecificData": map[string]any{"baseUrl": compat.URL(), "prefix": "oc", "enabledModels": []string{"gpt-x"}}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "native", "apiKey": escapedKey,
		"providerSpecificData": map[string]any{"baseUrl": native.URL()}})
	key := gatewayKey(t, sb)

	const chunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`
	const created = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o-mini","output":[]}}`
	errorObject := func(echo string) string {
		return `{"message":"Incorrect API key provided: ` + echo + `. You can find your API key at https:\/\/platform.openai.com\/account\/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}`
	}
	sse := func(lines ...string) upstreamtest.Fault {
		return upstreamtest.Status(http.StatusOK, strings.Join(lines, "\n\n")+"\n\n", "Content-Type", "text/event-stream")
	}
	type route struct {
		name, path string
		up         *upstreamtest.Server
		upPath     string
		body       map[string]any
		fault      func(echo string) upstreamtest.Fault
	}
	chatBody := func(model string, stream bool) map[string]any {
		return map[string]any{"model": model, "stream": stream, "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	}
	responsesBody := func(model string, stream bool) map[string]any {
		return map[string]any{"model": model, "stream": stream, "input": "hi"}
	}
	wholeError := func(echo string) upstreamtest.Fault {
		return upstreamtest.Status(http.StatusBadRequest, `{"error":`+errorObject(echo)+`}`)
	}
	chunkError := func(echo string) upstreamtest.Fault {
		return sse("data: "+chunk, `data: {"error":`+errorObject(echo)+`}`)
	}
	routes := []route{
		{"chat whole", pathChat, compat, pathChat, chatBody("oc/gpt-x", false), wholeError},
		{"chat streamed", pathChat, compat, pathChat, chatBody("oc/gpt-x", true), chunkError},
		{"messages translated whole", pathMessages, compat, pathChat, messagesBody("oc/gpt-x", "hi", false), wholeError},
		{"messages translated streamed", pathMessages, compat, pathChat, messagesBody("oc/gpt-x", "hi", true), chunkError},
		{"responses translated whole", pathResponses, compat, pathChat, responsesBody("oc/gpt-x", false), wholeError},
		{"responses translated streamed", pathResponses, compat, pathChat, responsesBody("oc/gpt-x", true), chunkError},
		{"responses whole", pathResponses, native, pathResponses, responsesBody(chatModel, false), wholeError},
		{"responses streamed", pathResponses, native, pathResponses, responsesBody(chatModel, true), func(echo string) upstreamtest.Fault {
			return sse("event: response.created\ndata: "+created,
				`event: error`+"\n"+`data: {"type":"error","sequence_number":1,"code":"invalid_request_error","param":null,"message":"Incorrect API key provided: `+echo+`."}`)
		}},
	}
	echoes := map[string]string{
		`\u escapes`: unicodeEscaped(escapedKey),
		`\/ escapes`: strings.ReplaceAll(escapedKey, "/", `\/`),
		`one escape`: `\u0073` + escapedKey[1:],
	}
	for _, r := range routes {
		for name, echo := range echoes {
			t.Run(r.name+", "+name, func(t *testing.T) {
				r.up.Enqueue(r.upPath, r.fault(echo))
				status, raw := postJSON(t, sb, key, r.path, r.body)
				assert.NotContains(t, string(raw), escapedKey, "status %d: %s", status, raw)
				redacted := false
				for _, s := range decodedStrings(t, raw) {
					assert.NotContains(t, s, escapedKey, "status %d: %s", status, raw)
					redacted = redacted || strings.Contains(s, "Incorrect API key provided: [redacted]")
				}
				assert.True(t, redacted, "the upstream's message, the key redacted: status %d: %s", status, raw)
			})
		}
	}
}
