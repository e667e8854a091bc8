package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		name, body, code string
	}{
		{"ok", `{"a":"é \ud83d\ude00"}`, ""},
		{"invalid utf-8", "{\"a\":\"\xff\"}", "invalid_encoding"},
		{"truncated", `{"a":"b`, "invalid_json"},
		{"not an object", `["a"]`, "invalid_json"},
		{"too deep", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), "invalid_json"},
		{"lone high surrogate", `{"a":"\ud800x"}`, "invalid_encoding"},
		{"lone low surrogate", `{"a":"\udc00"}`, "invalid_encoding"},
		{"escaped backslash before u", `{"a":"\\ud800"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := CheckJSON([]byte(tc.body))
			if tc.code == "" {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, http.StatusBadRequest, p.Status)
			assert.Equal(t, tc.code, *p.Body.Error.Code)
		})
	}
}

func TestCheckChatBounds(t *testing.T) {
	msgs := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"a,b]"},`, n), ",") + "]"
	}
	cases := []struct {
		name, body, code, param string
	}{
		{"ok", `{"messages":` + msgs(3) + `,"stop":"x","tools":[],"n":2}`, "", ""},
		{"no messages", `{"model":"m"}`, "missing_required_parameter", "messages"},
		{"empty messages", `{"messages":[]}`, "empty_array", "messages"},
		{"messages not a list", `{"messages":"hi"}`, "invalid_type", "messages"},
		{"too many messages", `{"messages":` + msgs(MaxChatMessages+1) + `}`, "array_above_max_length", "messages"},
		{"most messages", `{"messages":` + msgs(MaxChatMessages) + `}`, "", ""},
		{"too many stop", `{"messages":` + msgs(1) + `,"stop":["a","b","c","d","e"]}`, "array_above_max_length", "stop"},
		{"too many tools", `{"messages":` + msgs(1) + `,"tools":[` + strings.TrimSuffix(strings.Repeat(`{},`, MaxChatTools+1), ",") + `]}`, "array_above_max_length", "tools"},
		{"n too large", `{"messages":` + msgs(1) + `,"n":1000}`, "integer_above_max_value", "n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, p := checkChat([]byte(tc.body))
			if tc.code == "" {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, tc.code, *p.Body.Error.Code)
			assert.Equal(t, tc.param, *p.Body.Error.Param)
		})
	}
}

func TestEmbeddingsInputCap(t *testing.T) {
	items := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	_, p := checkAndParseEmbeddings([]byte(`{"model":"m","input":` + items(MaxEmbeddingInputs, `"a"`) + `}`))
	assert.Nil(t, p)
	_, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":` + items(MaxEmbeddingInputs+1, `"a"`) + `}`))
	require.NotNil(t, p)
	assert.Equal(t, "array_above_max_length", *p.Body.Error.Code)
	_, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":` + items(MaxEmbeddingTokens+1, `1`) + `}`))
	require.NotNil(t, p)
	assert.Equal(t, "array_above_max_length", *p.Body.Error.Code)
}

// FuzzCountItems checks the item counter against encoding/json on any
// valid JSON array.
func FuzzCountItems(f *testing.F) {
	for _, s := range []string{`[]`, `[1]`, `[ ]`, `["a,b",[1,2],{"x":[3]}]`, `["\"]",1]`, `[{},{}]`, `[null,true,"\\"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var items []json.RawMessage
		if json.Unmarshal([]byte(s), &items) != nil || items == nil {
			return // not an array (null decodes to a nil slice)
		}
		n, ok := countItems([]byte(s), len(items)+1)
		require.True(t, ok, s)
		require.Equal(t, len(items), n, s)
	})
}

func TestCheckMessagesAndResponsesBounds(t *testing.T) {
	list := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	msg := `{"role":"user","content":"a,b]"}`
	cases := []struct {
		name  string
		check func([]byte) (bool, *Problem)
		body  string
		code  string
		param string
	}{
		{"messages ok", checkMessages, `{"messages":` + list(msg, 3) + `,"system":"be brief","stop_sequences":["x"],"tools":[]}`, "", ""},
		{"messages at the bound", checkMessages, `{"messages":` + list(msg, MaxMessagesMessages) + `}`, "", ""},
		{"too many messages", checkMessages, `{"messages":` + list(msg, MaxMessagesMessages+1) + `}`, "array_above_max_length", "messages"},
		{"too many tools", checkMessages, `{"messages":[],"tools":` + list(`{}`, MaxMessagesTools+1) + `}`, "array_above_max_length", "tools"},
		{"too many stop sequences", checkMessages, `{"stop_sequences":` + list(`"s"`, MaxMessagesStop+1) + `}`, "array_above_max_length", "stop_sequences"},
		{"too many system blocks", checkMessages, `{"system":` + list(`{"type":"text","text":"x"}`, MaxMessagesSystem+1) + `}`, "array_above_max_length", "system"},
		{"stop sequences not a list", checkMessages, `{"stop_sequences":"x"}`, "invalid_type", "stop_sequences"},
		{"responses string input", checkResponses, `{"input":"hi","tools":[]}`, "", ""},
		{"too many input items", checkResponses, `{"input":` + list(msg, MaxResponsesInput+1) + `}`, "array_above_max_length", "input"},
		{"too many responses tools", checkResponses, `{"input":"x","tools":` + list(`{}`, MaxResponsesTools+1) + `}`, "array_above_max_length", "tools"},
		{"not an object", checkResponses, `[1]`, "invalid_json", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, p := tc.check([]byte(tc.body))
			if tc.code == "" {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, http.StatusBadRequest, p.Status)
			assert.Equal(t, tc.code, *p.Body.Error.Code)
			if tc.param != "" {
				assert.Equal(t, tc.param, *p.Body.Error.Param)
			}
		})
	}
}

// The bounds checks tell whether a body asks for a stream: only a stream
// member that is true does (the edge then calls core's stream RPC).
func TestChecksReadTheStreamFlag(t *testing.T) {
	for _, tc := range []struct {
		rest   string
		stream bool
	}{
		{``, false},
		{`,"stream":false`, false},
		{`,"stream":null`, false},
		{`,"stream":true`, true},
		{`,"stream":"true"`, false}, // core refuses it as not a boolean
	} {
		for name, check := range map[string]func([]byte) (bool, *Problem){
			"chat":      checkChat,
			"messages":  checkMessages,
			"responses": checkResponses,
		} {
			streamed, p := check([]byte(`{"messages":[{"role":"user","content":"hi"}],"input":"hi"` + tc.rest + `}`))
			require.Nil(t, p, "%s %s", name, tc.rest)
			assert.Equal(t, tc.stream, streamed, "%s %s", name, tc.rest)
		}
	}
}
