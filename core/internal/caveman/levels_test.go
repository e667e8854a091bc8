package caveman

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestLevels(t *testing.T) {
	want := []string{"lite", "full", "ultra", "wenyan-lite", "wenyan", "wenyan-ultra"}
	if diff := cmp.Diff(want, Levels()); diff != "" {
		t.Fatalf("Levels() mismatch (-want +got):\n%s", diff)
	}
	got := Levels()
	got[0] = "changed"
	require.Equal(t, "lite", Levels()[0], "Levels must return a fresh slice")
	require.True(t, Valid(DefaultLevel))
	require.Equal(t, "full", DefaultLevel)
}

func TestValid(t *testing.T) {
	for _, level := range Levels() {
		require.True(t, Valid(level), level)
	}
	for _, level := range []string{"", "Full", "FULL", " full", "full ", "wenyan_lite", "medium", "caveman"} {
		require.False(t, Valid(level), "%q", level)
		_, ok := Prompt(level)
		require.False(t, ok, "%q", level)
	}
}

func TestPrompts(t *testing.T) {
	const maxBytes = 600 // prompts cost input tokens on every request
	seen := map[string]string{}
	for _, level := range Levels() {
		t.Run(level, func(t *testing.T) {
			p, ok := Prompt(level)
			require.True(t, ok)
			require.NotEmpty(t, strings.TrimSpace(p))
			require.True(t, utf8.ValidString(p))
			require.LessOrEqual(t, len(p), maxBytes, "prompt too long: %d bytes", len(p))
			require.NotContains(t, strings.ToLower(p), "caveman")
			require.Equal(t, strings.TrimSpace(p), p)
			for other, q := range seen {
				require.NotEqual(t, q, p, "same prompt as %s", other)
				// Detection of an injected prompt must not confuse levels.
				require.NotContains(t, p, q, "contains the %s prompt", other)
				require.NotContains(t, q, p, "contained in the %s prompt", other)
			}
			seen[level] = p

			// The rules every level shares.
			for _, rule := range []string{"code", "file paths", "commands", "error messages", "URLs",
				"security warnings", "irreversible actions", "multi-step instructions", "Never mention"} {
				require.Contains(t, p, rule)
			}
			if strings.HasPrefix(level, "wenyan") {
				require.Contains(t, p, "classical Chinese")
				require.Contains(t, p, "whatever language the user writes in")
			} else {
				require.Contains(t, p, "Reply in the user's language.")
				require.NotContains(t, p, "Chinese")
			}
		})
	}
}
