package bearer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestToken(t *testing.T) {
	for _, tc := range []struct{ name, header, want string }{
		{"canonical", "Bearer tok", "tok"},
		{"lower case", "bearer tok", "tok"},
		{"upper case", "BEARER tok", "tok"},
		{"mixed case", "bEaReR tok", "tok"},
		{"surrounding spaces", "  Bearer   tok  ", "tok"},
		{"tab", "Bearer\ttok", "tok"},
		{"no token", "Bearer", ""},
		{"blank token", "Bearer   ", ""},
		{"glued to the token", "Bearertok", ""},
		{"other scheme", "Basic tok", ""},
		{"token alone", "tok", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Token(tc.header))
		})
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"Bearer tok", "bearer\ttok", "Basic x", "", "Bearer"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok := Token(header)
		if tok != "" {
			assert.Contains(t, header, tok)
			assert.Equal(t, tok, Token("Bearer "+tok), "a token read is read again")
		}
	})
}
