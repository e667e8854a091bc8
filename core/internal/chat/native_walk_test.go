package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// nativeNames are the event names a pass-through stream's events come
// with (none: the type member names them).
var nativeNames = []string{"", "message_start", "message_delta", "content_block_delta", "response.created", "response.output_text.delta", "response.completed"}

var nativeSeeds = []string{
	`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":3}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello é\n"}}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
	`{"type":"message_stop"}`,
	`{"type":"ping"}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"type":"response.output_text.delta","item_id":"i","output_index":0,"content_index":0,"delta":"Hi \"you\""}`,
	`{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}}}}`,
	`{"type":"response.created","response":{"id":"r","usage":null}}`,
	`{"type":5}`, `{"type":null}`, `{"TYPE":"message_stop","Type":"x"}`, `{"typ\u0065":"message_stop"}`,
	`{"type":"a\u00e9"}`, "{\"type\":\"\xff\"}", `{"response":"no"}`, `{"response":{"usage":{"input_tokens":"1"}}}`,
	`{"message":{"usage":{"input_tokens":1}},"message":{"id":"x"}}`, `{"usage":[1]}`, `{"usage":{"input_tokens":-2}}`,
	`null`, `[]`, `"x"`, `1`, `{}`, `{`, ``, `{"message":null,"usage":null,"response":null}`,
	// a response read for its usage alone
	`{"type":"response.completed","response":{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":"usage: {\"usage\":1}"}]}],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}}`,
	`{"type":"response.completed","response":{"Usage":{"input_tokens":5},"usage":{"output_tokens":7}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":5},"usage":null}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":"5"},"usage":{"input_tokens":5}}}`,
	`{"type":"response.completed","response":{"us\u0061ge":{"input_tokens":5}}}`,
	`{"type":"response.completed","response":{"output":[1,{"a":[]}],"usage":{"input_tokens_details":{"cached_tokens":"x"}}}}`,
	`{"type":"response.completed","response":[{"usage":{"input_tokens":5}}]}`,
	`{"type":"response.completed","response":{"usage":5}}`,
	`{"type":"response.completed","response":{"usage":{}}}`,
}

// decodedResponses and decodedAnthropic are how the events were read
// before the walk: the reference.
func decodedResponses(data []byte) (responsesEvent, bool) {
	var ev responsesEvent
	return ev, json.Unmarshal(data, &ev) == nil
}

func decodedAnthropic(data []byte) (anthropicEvent, bool) {
	var ev anthropicEvent
	return ev, json.Unmarshal(data, &ev) == nil
}

func checkNative(t *testing.T, data []byte) {
	t.Helper()
	for _, name := range nativeNames {
		checkEvent(t, name, data, decodedResponses, readResponsesEvent, func(ev *responsesEvent) { ev.Type = "" })
		checkEvent(t, name, data, decodedAnthropic, readAnthropicEvent, func(ev *anthropicEvent) { ev.Type = "" })
	}
}

// checkEvent holds one reader of an event to its reference (decoded): the
// same event (its type only when the name is not known) and the delivered
// text deliveredChars counts.
func checkEvent[E any](t *testing.T, name string, data []byte, decoded func([]byte) (E, bool), read func(string, []byte) (E, bool, int64), untype func(*E)) {
	t.Helper()
	want, wantOK := decoded(data)
	got, ok, chars := read(name, data)
	require.Equal(t, wantOK, ok, "%s %q", name, data)
	if !ok {
		return
	}
	if name != "" {
		untype(&want) // read only when the name is not known
		untype(&got)
		require.Equal(t, deliveredChars(name, data), chars, "%s %q", name, data)
	}
	require.Equal(t, want, got, "%s %q", name, data)
}

// Pass-through Messages and Responses events are read as decoding them
// read them, and their delivered text counted as deliveredChars counts it.
func TestNativeEventsAgreeWithDecoding(t *testing.T) {
	for _, s := range append(nativeSeeds, validSeeds...) {
		checkNative(t, []byte(s))
	}
}

func FuzzNativeEvents(f *testing.F) {
	for _, s := range append(nativeSeeds, walkSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkNative(t, data)
	})
}

var wholeResponseSeeds = []string{
	`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi \"usage\": 3"}]}],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}}}`,
	`{"object":"response"}`, `{"object":"response","usage":null}`, `{"object":null,"usage":{}}`,
	`{"object":"respons\u0065","usage":{"input_tokens":1}}`, `{"Object":"response","USAGE":{"input_tokens":1}}`,
	`{"object":"response","object":"list"}`, `{"object":"response","usage":{"input_tokens":1},"usage":{"output_tokens":2}}`,
	`{"object":5}`, `{"object":"response","usage":{"input_tokens":"1"}}`, `{"object":"response","usage":[1]}`,
	"{\"object\":\"resp\xffonse\"}", `[]`, `null`, `"response"`, `{`, ``, `{"object":"response"} x`,
}

// wholeResponseReference is how a whole Responses answer was read before
// the walk.
func wholeResponseReference(raw []byte) (string, *responsesUsage, bool) {
	var r struct {
		Object string          `json:"object"`
		Usage  *responsesUsage `json:"usage"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return "", nil, false
	}
	return r.Object, r.Usage, true
}

func checkWholeResponse(t *testing.T, raw []byte) {
	t.Helper()
	wantObj, wantU, wantOK := wholeResponseReference(raw)
	obj, u, ok := readWholeResponse(raw)
	require.Equal(t, wantOK, ok, "%q", raw)
	if ok {
		require.Equal(t, wantObj, obj, "%q", raw)
		require.Equal(t, wantU, u, "%q", raw)
	}
}

// A whole Responses answer is read as decoding it read it.
func TestWholeResponseAgreesWithDecoding(t *testing.T) {
	for _, s := range append(wholeResponseSeeds, nativeSeeds...) {
		checkWholeResponse(t, []byte(s))
	}
}

func FuzzWholeResponse(f *testing.F) {
	for _, s := range append(wholeResponseSeeds, nativeSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkWholeResponse(t, raw) })
}
