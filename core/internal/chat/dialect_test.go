package chat

import (
	"errors"
	"testing"
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
