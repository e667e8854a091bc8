package chat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
