package chat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// FuzzParse: every dialect's parser either reads a body (a model, a list
// of messages or an input) or refuses it with a RequestError; it never
// panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","input":"hi","instructions":"be brief"}`,
		`{"model":"m","input":[{"role":"user","content":"hi"}]}`,
		`{"model":"","messages":null}`, `[]`, `null`,
	} {
		for d := DialectChat; d <= DialectResponses; d++ {
			f.Add(int(d), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, d int, body []byte) {
		dialect := Dialect(((d % 3) + 3) % 3)
		in, err := parse(dialect, body)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Message == "" {
				t.Fatalf("parse error %v is not a RequestError with a message", err)
			}
			return
		}
		if in.model == "" {
			t.Fatal("a parsed body has a model")
		}
	})
}

func TestWithoutUnsignedThinking(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		changed        bool
	}{
		{"no thinking", `[{"role":"user","content":"hi"}]`, ``, false},
		{"signed kept", `[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"text","text":"a"}]}]`, ``, false},
		{"empty signature dropped", `[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"a"}]}]`,
			`[{"role":"assistant","content":[{"type":"text","text":"a"}]}]`, true},
		{"missing signature dropped", `[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"}]},{"role":"user","content":"r"}]`,
			`[{"role":"user","content":"q"},{"role":"user","content":"r"}]`, true},
		{"text mentioning thinking", `[{"role":"user","content":"\"thinking\""}]`, ``, false},
		{"unreadable", `{"thinking"`, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := withoutUnsignedThinking(json.RawMessage(tc.in))
			require.Equal(t, tc.changed, changed)
			if tc.changed {
				assert.JSONEq(t, tc.want, string(got))
			}
		})
	}
}

func TestWithAnthropicToolIDs(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		changed        bool
	}{
		{"no tools", `[{"role":"user","content":"hi"}]`, ``, false},
		{"ids Anthropic takes", `[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01-A","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01-A","content":"x"}]}]`, ``, false},
		{"another upstream's ids", `[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"functions.f:0","name":"f","input":{"id":"a.b"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"functions.f:0","content":"x"},{"type":"text","text":"y"}]}]`,
			`[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"functions_f_0","name":"f","input":{"id":"a.b"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"functions_f_0","content":"x"},{"type":"text","text":"y"}]}]`, true},
		{"spaced JSON", `[{"role": "assistant", "content": [{"type": "tool_use", "id" : "call 1", "name": "f", "input": {}}]}]`,
			`[{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"f","input":{}}]}]`, true},
		{"an odd id in a tool's input only", `[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"id":"a.b"}}]}]`, ``, false},
		{"unreadable", `[{"id":"a.b"`, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := withAnthropicToolIDs(json.RawMessage(tc.in))
			require.Equal(t, tc.changed, changed)
			if tc.changed {
				assert.JSONEq(t, tc.want, string(got))
			}
		})
	}
}

// withFields writes the bytes json.Marshal makes of the merged fields.
func FuzzWithFieldsMatchesMarshal(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"Say hello in one short sentence."}]}`,
		`{ "model" : "m" , "stream" : true, "messages" : [ {"role": "user", "content": "a < b && c > d"} ] }`,
		"{\"model\":\"m\",\"messages\":[{\"content\":\"line\u2028sep\u2029para \\\"q\\\" \\\\ \\u2028\"}]}",
		`{"mo\u0064el":"x","<k>":1,"&":{"a" : [1, 2 ,3]},"\n":null,"model":"y"}`,
		`{"b":1,"a":2,"A":3,"é":"ü","z\"q":"\\"}`,
		"{\"k\":\"\xff\xfe\",\"\xc3\x28\":1}",
		`{"stream_options":{"include_usage":false},"n":1e10,"f":-0.5,"t":true}`,
		`{}`,
	} {
		f.Add([]byte(s), "gpt-4o-mini", true)
	}
	f.Fuzz(func(t *testing.T, body []byte, model string, stream bool) {
		if !json.Valid(body) {
			return
		}
		in := inbound{body: body, fields: map[string]json.RawMessage{}}
		if !jsonscan.Members(body, func(k, v []byte) bool {
			in.fields[string(k)] = v
			return true
		}) {
			return
		}
		m, _ := json.Marshal(model)
		set := map[string]json.RawMessage{"model": m}
		if stream {
			set["stream_options"] = json.RawMessage(`{"include_usage":true}`)
		}
		merged := map[string]json.RawMessage{}
		for k, v := range in.fields {
			merged[k] = v
		}
		for k, v := range set {
			merged[k] = v
		}
		want, wantErr := json.Marshal(merged)
		got, err := in.withFields(set)
		require.Equal(t, wantErr, err)
		require.Equal(t, string(want), string(got))
	})
}

func TestWithFieldsRefusesAReplacementThatIsNotJSON(t *testing.T) {
	in := inbound{body: []byte(`{"a":1}`), fields: map[string]json.RawMessage{"a": json.RawMessage("1")}}
	_, err := in.withFields(map[string]json.RawMessage{"model": json.RawMessage("{")})
	require.Error(t, err)
	got, err := in.withFields(map[string]json.RawMessage{"model": nil})
	require.NoError(t, err)
	assert.Equal(t, `{"a":1,"model":null}`, string(got))
}

func BenchmarkWithFields(b *testing.B) {
	in, err := parse(DialectChat, []byte(`{"model":"local/gpt-4o-mini","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one short sentence."}],"temperature":0.2}`))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (chatOpenAI{}).request(in, "gpt-4o-mini"); err != nil {
			b.Fatal(err)
		}
	}
}

// unquote and readBool read a body's value as json.Unmarshal does.
func FuzzUnquoteAndReadBoolMatchUnmarshal(f *testing.F) {
	for _, s := range []string{`"gpt-4o-mini"`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", `""`, `true`, `false`, `1`, `null`, `{}`, `"true"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var want, got string
		wantOK := json.Unmarshal(raw, &want) == nil
		if gotOK := unquote(raw, &got); gotOK != wantOK || got != want {
			t.Fatalf("unquote(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, gotOK, want, wantOK)
		}
		var wantB, gotB bool
		wantOK = json.Unmarshal(raw, &wantB) == nil
		if gotOK := readBool(raw, &gotB); gotOK != wantOK || gotB != wantB {
			t.Fatalf("readBool(%q) = %v, %v; json.Unmarshal: %v, %v", raw, gotB, gotOK, wantB, wantOK)
		}
	})
}

// TestParseBoundsStopSequences: a caller reaching core without the edge's
// checks (gRPC) cannot send more stop sequences than the HTTP routes take
// (the gateway-side stop filter does work per sequence for every byte of
// the answer): OpenAI's 4 for chat, 256 for Messages, refused as the edge
// refuses them.
func TestParseBoundsStopSequences(t *testing.T) {
	list := func(n int) string {
		b, _ := json.Marshal(func() []string {
			s := make([]string, n)
			for i := range s {
				s[i] = "s" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
			}
			return s
		}())
		return string(b)
	}
	for _, tc := range []struct {
		name    string
		d       Dialect
		body    string
		refused string
		message string
	}{
		{"chat, 4", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":` + list(4) + `}`, "", ""},
		{"chat, 5", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":` + list(5) + `}`, "stop",
			"Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead."},
		{"chat, one string", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":"x"}`, "", ""},
		{"Messages, 256", DialectMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stop_sequences":` + list(256) + `}`, "", ""},
		{"Messages, 257", DialectMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stop_sequences":` + list(257) + `}`, "stop_sequences",
			"Invalid 'stop_sequences': array too long. Expected an array with maximum length 256, but got an array with length 257 instead."},
		{"Messages, 50,000", DialectMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stop_sequences":` + list(50_000) + `}`, "stop_sequences",
			"Invalid 'stop_sequences': array too long. Expected an array with maximum length 256, but got an array with length 50000 instead."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.d, []byte(tc.body))
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.refused, re.Param)
			assert.Equal(t, "array_above_max_length", re.Code)
			assert.Equal(t, tc.message, re.Message)
		})
	}
}

// An empty messages list is refused in OpenAI's code and words, on the chat
// and the Messages dialect alike (the edge gives the latter Anthropic's
// shape, without the code).
func TestParseRefusesEmptyMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Dialect
		body string
	}{
		{"chat", DialectChat, `{"model":"m","messages":[]}`},
		{"Messages", DialectMessages, `{"model":"m","max_tokens":5,"messages":[ ]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.d, []byte(tc.body))
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, "messages", re.Param)
			assert.Equal(t, "empty_array", re.Code)
			assert.Equal(t, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", re.Message)
		})
	}
}

// A Messages request missing a required member is refused in Anthropic's
// words ("messages: Field required"), as its max_tokens is; a chat request
// keeps OpenAI's.
func TestParseMissingMembersInTheDialectsWords(t *testing.T) {
	for _, tc := range []struct {
		name           string
		d              Dialect
		body           string
		param, message string
	}{
		{"Messages without messages", DialectMessages, `{"model":"m","max_tokens":5}`, "messages", "messages: Field required"},
		{"Messages with null messages", DialectMessages, `{"model":"m","max_tokens":5,"messages":null}`, "messages", "messages: Field required"},
		{"Messages without model", DialectMessages, `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "model", "model: Field required"},
		{"Messages without max_tokens", DialectMessages, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens", "max_tokens: Field required"},
		{"chat without messages", DialectChat, `{"model":"m"}`, "messages", "you must provide a messages parameter"},
		{"chat without model", DialectChat, `{"messages":[{"role":"user","content":"x"}]}`, "model", "you must provide a model parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.d, []byte(tc.body))
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.param, re.Param)
			assert.Equal(t, "missing_required_parameter", re.Code)
			assert.Equal(t, tc.message, re.Message)
		})
	}
}
