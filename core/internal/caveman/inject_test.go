package caveman

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

type injector func(body []byte, level string) ([]byte, error)

var injectors = []struct {
	name   string
	inject injector
}{
	{"openai", InjectOpenAI},
	{"responses", InjectResponses},
	{"anthropic", InjectAnthropic},
}

// injectCase is one body shape. In want, {P} stands for the prompt as it
// appears inside a JSON string. Bodies are compact so that want can be
// compared byte for byte, which also checks that field order survives.
type injectCase struct {
	name string
	in   string
	want string
}

var injectCases = map[string][]injectCase{
	"openai": {
		{
			name: "no system message",
			in:   `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}],"stream":true}`,
			want: `{"model":"gpt-5","messages":[{"role":"system","content":"{P}"},{"role":"user","content":"hi"}],"stream":true}`,
		},
		{
			name: "empty messages",
			in:   `{"messages":[],"model":"m"}`,
			want: `{"messages":[{"role":"system","content":"{P}"}],"model":"m"}`,
		},
		{
			name: "string system",
			in:   `{"model":"m","messages":[{"role":"system","content":"Be nice."},{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"Be nice.\n\n{P}"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty string system",
			in:   `{"messages":[{"role":"system","content":""}]}`,
			want: `{"messages":[{"role":"system","content":"{P}"}]}`,
		},
		{
			name: "null content",
			in:   `{"messages":[{"role":"system","content":null,"name":"s"}]}`,
			want: `{"messages":[{"role":"system","content":"{P}","name":"s"}]}`,
		},
		{
			name: "missing content",
			in:   `{"messages":[{"role":"developer"}]}`,
			want: `{"messages":[{"role":"developer","content":"{P}"}]}`,
		},
		{
			name: "array content",
			in:   `{"messages":[{"role":"system","content":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"system","content":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"{P}"}]},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "multiple system messages, only the first gets it",
			in:   `{"messages":[{"role":"user","content":"u0"},{"role":"system","content":"one"},{"role":"user","content":"u1"},{"role":"system","content":"two"}]}`,
			want: `{"messages":[{"role":"user","content":"u0"},{"role":"system","content":"one\n\n{P}"},{"role":"user","content":"u1"},{"role":"system","content":"two"}]}`,
		},
		{
			name: "developer role first",
			in:   `{"messages":[{"role":"developer","content":"dev"},{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"developer","content":"dev\n\n{P}"},{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "assistant and tool messages untouched",
			in:   `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
			want: `{"messages":[{"role":"system","content":"{P}"},{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
		},
	},
	"responses": {
		{
			name: "no instructions",
			in:   `{"model":"gpt-5","input":"hi","store":false}`,
			want: `{"model":"gpt-5","input":"hi","store":false,"instructions":"{P}"}`,
		},
		{
			name: "null instructions",
			in:   `{"instructions":null,"input":[{"role":"user","content":"hi"}]}`,
			want: `{"instructions":"{P}","input":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "string instructions",
			in:   `{"model":"m","instructions":"Talk like a pirate.","input":"hi"}`,
			want: `{"model":"m","instructions":"Talk like a pirate.\n\n{P}","input":"hi"}`,
		},
		{
			name: "empty instructions",
			in:   `{"instructions":"","input":"hi"}`,
			want: `{"instructions":"{P}","input":"hi"}`,
		},
		{
			name: "developer input item untouched",
			in:   `{"input":[{"role":"developer","content":"dev"},{"role":"user","content":"hi"}],"previous_response_id":"resp_1"}`,
			want: `{"input":[{"role":"developer","content":"dev"},{"role":"user","content":"hi"}],"previous_response_id":"resp_1","instructions":"{P}"}`,
		},
	},
	"anthropic": {
		{
			name: "no system",
			in:   `{"model":"claude","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude","max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"system":"{P}"}`,
		},
		{
			name: "null system",
			in:   `{"system":null,"messages":[]}`,
			want: `{"system":"{P}","messages":[]}`,
		},
		{
			name: "string system",
			in:   `{"model":"claude","system":"You are helpful.","messages":[]}`,
			want: `{"model":"claude","system":"You are helpful.\n\n{P}","messages":[]}`,
		},
		{
			name: "empty array system",
			in:   `{"system":[],"messages":[]}`,
			want: `{"system":[{"type":"text","text":"{P}"}],"messages":[]}`,
		},
		{
			name: "array without cache_control appends",
			in:   `{"system":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}`,
			want: `{"system":[{"type":"text","text":"A"},{"type":"text","text":"B"},{"type":"text","text":"{P}"}]}`,
		},
		{
			name: "cache_control on the last block",
			in:   `{"system":[{"type":"text","text":"A"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}]}`,
			want: `{"system":[{"type":"text","text":"A"},{"type":"text","text":"{P}"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}]}`,
		},
		{
			name: "cache_control in the middle",
			in:   `{"system":[{"type":"text","text":"A"},{"type":"text","text":"B","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"C"}]}`,
			want: `{"system":[{"type":"text","text":"A"},{"type":"text","text":"{P}"},{"type":"text","text":"B","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"C"}]}`,
		},
		{
			name: "several cache_control blocks, before the last",
			in:   `{"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}},{"type":"text","text":"C"}]}`,
			want: `{"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"{P}"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}},{"type":"text","text":"C"}]}`,
		},
		{
			name: "cache_control on the first block",
			in:   `{"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}]}`,
			want: `{"system":[{"type":"text","text":"{P}"},{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}]}`,
		},
		{
			name: "null cache_control does not count",
			in:   `{"system":[{"type":"text","text":"A","cache_control":null}]}`,
			want: `{"system":[{"type":"text","text":"A","cache_control":null},{"type":"text","text":"{P}"}]}`,
		},
	},
}

// jsonText is prompt as it appears between the quotes of a JSON string.
func jsonText(t *testing.T, prompt string) string {
	t.Helper()
	s := string(encodeString(prompt))
	require.True(t, strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`))
	return s[1 : len(s)-1]
}

func TestInject(t *testing.T) {
	for _, inj := range injectors {
		for _, tc := range injectCases[inj.name] {
			for _, level := range Levels() {
				t.Run(inj.name+"/"+tc.name+"/"+level, func(t *testing.T) {
					require.True(t, json.Valid([]byte(tc.in)), "bad test input")
					prompt, ok := Prompt(level)
					require.True(t, ok)
					want := strings.ReplaceAll(tc.want, "{P}", jsonText(t, prompt))

					got, err := inj.inject([]byte(tc.in), level)
					require.NoError(t, err)
					if diff := cmp.Diff(want, string(got)); diff != "" {
						t.Fatalf("mismatch (-want +got):\n%s", diff)
					}
					require.Equal(t, 1, strings.Count(string(got), jsonText(t, prompt)), "prompt injected once")

					// Idempotent, for the same level and for any other.
					for _, again := range Levels() {
						twice, err := inj.inject(got, again)
						require.NoError(t, err)
						require.Equal(t, string(got), string(twice), "second injection with %s", again)
					}
				})
			}
		}
	}
}

// TestInjectPreservesUnknownFields checks that fields the injector does not
// touch keep their exact bytes: whitespace inside them, key order, number
// precision, escapes and HTML characters.
func TestInjectPreservesUnknownFields(t *testing.T) {
	const extras = `"zeta": {"b": 1, "a": [1, 2.50, 12345678901234567890123]},` +
		` "alpha": "<b>&amp;</b> \u00e9 \ud83d\ude00", "x_vendor": {"nested": {"keep": true}}`
	tests := []struct {
		name   string
		inject injector
		body   string
	}{
		{"openai", InjectOpenAI, `{` + extras + `, "messages": [{"role": "system", "content": "s", "x": {"y": 1}}, {"role": "user", "content": "<hi>"}]}`},
		{"responses", InjectResponses, `{` + extras + `, "instructions": "i", "input": "<hi>"}`},
		{"anthropic", InjectAnthropic, `{` + extras + `, "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}], "messages": []}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.inject([]byte(tt.body), LevelFull)
			require.NoError(t, err)
			s := string(got)
			for _, frag := range []string{
				`"zeta":{"b": 1, "a": [1, 2.50, 12345678901234567890123]}`,
				`"alpha":"<b>&amp;</b> \u00e9 \ud83d\ude00"`,
				`"x_vendor":{"nested": {"keep": true}}`,
			} {
				require.Contains(t, s, frag)
			}
			require.Less(t, strings.Index(s, `"zeta"`), strings.Index(s, `"alpha"`), "key order")
			require.Less(t, strings.Index(s, `"alpha"`), strings.Index(s, `"x_vendor"`), "key order")
			require.NotContains(t, s, `\u003c`, "no HTML escaping of client text")

			var before, after map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.body), &before))
			require.NoError(t, json.Unmarshal(got, &after))
			for k, v := range before {
				switch k {
				case "messages", "instructions", "system":
					continue
				}
				if diff := cmp.Diff(v, after[k]); diff != "" {
					t.Errorf("field %q changed (-before +after):\n%s", k, diff)
				}
			}
		})
	}
}

func TestInjectOpenAIKeepsOtherMessageFields(t *testing.T) {
	in := `{"messages":[{"name":"ops","role":"system","content":"s","x_extra":[1,{"a":null}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`
	got, err := InjectOpenAI([]byte(in), LevelLite)
	require.NoError(t, err)
	p, _ := Prompt(LevelLite)
	want := `{"messages":[{"name":"ops","role":"system","content":"s\n\n` + jsonText(t, p) + `","x_extra":[1,{"a":null}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`
	require.Equal(t, want, string(got))
}

func TestInjectDuplicateKeysUseLast(t *testing.T) {
	got, err := InjectResponses([]byte(`{"instructions":"first","instructions":"last"}`), LevelFull)
	require.NoError(t, err)
	var v struct{ Instructions string }
	require.NoError(t, json.Unmarshal(got, &v)) // Go, like most decoders, keeps the last
	p, _ := Prompt(LevelFull)
	require.Equal(t, "last\n\n"+p, v.Instructions)
}

func TestInjectErrors(t *testing.T) {
	tests := []struct {
		name   string
		inject injector
		body   string
		level  string
		want   error
	}{
		{"openai invalid JSON", InjectOpenAI, `{"messages":[`, LevelFull, ErrMalformedBody},
		{"responses invalid JSON", InjectResponses, `{"instructions":"x"`, LevelFull, ErrMalformedBody},
		{"anthropic invalid JSON", InjectAnthropic, `not json`, LevelFull, ErrMalformedBody},
		{"empty body", InjectOpenAI, ``, LevelFull, ErrMalformedBody},
		{"trailing data", InjectAnthropic, `{} {}`, LevelFull, ErrMalformedBody},
		{"stray closer", InjectResponses, `{"a":1}]`, LevelFull, ErrMalformedBody},
		{"trailing garbage", InjectOpenAI, `{"messages":[]}x`, LevelFull, ErrMalformedBody},
		{"bad nested value", InjectOpenAI, `{"messages":[{"role":"system","content":tru}]}`, LevelFull, ErrMalformedBody},
		{"bad unrelated value", InjectAnthropic, `{"x":[1,],"system":"s"}`, LevelFull, ErrMalformedBody},
		{"top-level array", InjectOpenAI, `[]`, LevelFull, ErrMalformedBody},
		{"top-level string", InjectResponses, `"x"`, LevelFull, ErrMalformedBody},
		{"top-level null", InjectAnthropic, `null`, LevelFull, ErrMalformedBody},
		{"openai no messages", InjectOpenAI, `{"model":"m"}`, LevelFull, ErrMalformedBody},
		{"openai messages not array", InjectOpenAI, `{"messages":"hi"}`, LevelFull, ErrMalformedBody},
		{"openai system content number", InjectOpenAI, `{"messages":[{"role":"system","content":3}]}`, LevelFull, ErrMalformedBody},
		{"openai system content object", InjectOpenAI, `{"messages":[{"role":"system","content":{"text":"x"}}]}`, LevelFull, ErrMalformedBody},
		{"responses instructions array", InjectResponses, `{"instructions":[{"role":"developer"}]}`, LevelFull, ErrMalformedBody},
		{"anthropic system number", InjectAnthropic, `{"system":1}`, LevelFull, ErrMalformedBody},
		{"unknown level", InjectOpenAI, `{"messages":[]}`, "medium", ErrUnknownLevel},
		{"empty level", InjectResponses, `{}`, "", ErrUnknownLevel},
		{"level case", InjectAnthropic, `{}`, "Full", ErrUnknownLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.inject([]byte(tt.body), tt.level)
			require.Error(t, err)
			require.True(t, errors.Is(err, tt.want), "got %v, want %v", err, tt.want)
			require.Nil(t, got)
		})
	}
}

func TestInjectSurroundingWhitespace(t *testing.T) {
	got, err := InjectResponses([]byte(" \n{ \"input\" : \"hi\" }\n "), LevelLite)
	require.NoError(t, err)
	p, _ := Prompt(LevelLite)
	require.Equal(t, `{"input":"hi","instructions":`+string(encodeString(p))+`}`, string(got))
}

func TestInjectSkipsNonObjectMessages(t *testing.T) {
	got, err := InjectOpenAI([]byte(`{"messages":[1,"x",null,{"role":"system","content":"s"}]}`), LevelUltra)
	require.NoError(t, err)
	p, _ := Prompt(LevelUltra)
	require.Equal(t, `{"messages":[1,"x",null,{"role":"system","content":"s\n\n`+jsonText(t, p)+`"}]}`, string(got))
}

func TestInjectDetectsPromptInLaterSystemMessage(t *testing.T) {
	// A prompt already present anywhere a system prompt lives counts, so a
	// body that passed through another gateway is not injected again.
	p, _ := Prompt(LevelWenyan)
	in := `{"messages":[{"role":"system","content":"mine"},{"role":"developer","content":[{"type":"text","text":` + string(encodeString(p)) + `}]}]}`
	got, err := InjectOpenAI([]byte(in), LevelFull)
	require.NoError(t, err)
	require.Equal(t, in, string(got))
}

// BenchmarkInjectOpenAI measures injection into a long conversation with a
// large base64 image, the body shape where parsing cost matters.
func BenchmarkInjectOpenAI(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","messages":[{"role":"system","content":"s"}`)
	for range 200 {
		sb.WriteString(`,{"role":"user","content":"a question of moderate length"},{"role":"assistant","content":"an answer"}`)
	}
	sb.WriteString(`,{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		strings.Repeat("A", 1<<20) + `"}}]}]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := InjectOpenAI(body, LevelFull); err != nil {
			b.Fatal(err)
		}
	}
}
