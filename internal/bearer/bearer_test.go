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
			assert.False(t, NotBearer(header), "a value a token is read from is a Bearer credential")
		}
	})
}

func TestNotBearer(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		want         bool
	}{
		{"bearer token", "Bearer tok", false},
		{"lower case", "bearer tok", false},
		{"no token", "Bearer", false},
		{"blank token", "Bearer   ", false},
		{"empty", "", false},
		{"blank", "  ", false},
		{"token alone", "sk-tok", true},
		{"other scheme", "Basic Zm9vOmJhcg==", true},
		{"glued to the token", "Bearertok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NotBearer(tc.header))
		})
	}
}
