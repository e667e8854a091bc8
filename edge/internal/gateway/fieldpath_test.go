package gateway

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// pathAt finds the value that begins at an offset, never a key, a closing
// bracket or the text itself.
func TestPathAt(t *testing.T) {
	const raw = `{"a": [1, {"b": "x", "c": [[], {}]}], "d": {"e": 2}}`
	for _, c := range []struct {
		at   string // the text the offset begins
		want string // "" when no value begins there
	}{
		{`1,`, "a[0]"},
		{`{"b"`, "a[1]"},
		{`"x"`, "a[1].b"},
		{`[[]`, "a[1].c"},
		{`[],`, "a[1].c[0]"},
		{`{}]`, "a[1].c[1]"},
		{`2}`, "d.e"},
		{`"b"`, ""},
		{`}]`, ""},
		{raw, ""},
	} {
		path, ok := pathAt([]byte(raw), strings.Index(raw, c.at))
		var b strings.Builder
		for _, s := range path {
			if s.isKey {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s.key)
			} else {
				b.WriteString("[" + string(rune('0'+s.index)) + "]")
			}
		}
		assert.Equal(t, c.want != "", ok, c.at)
		assert.Equal(t, c.want, b.String(), c.at)
	}
}
