package catalogrefresh

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseListingShapes(t *testing.T) {
	cases := []struct {
		name string
		body string
		ids  []string
	}{
		{"openai data", `{"object":"list","data":[{"id":"a","object":"model"},{"id":"b"}]}`, []string{"a", "b"}},
		{"models array", `{"models":[{"name":"llama3:8b","model":"llama3:8b"}]}`, []string{"llama3:8b"}},
		{"results with name", `{"results":[{"name":"x"}]}`, []string{"x"}},
		{"bare array of strings", `["m1","m2"]`, []string{"m1", "m2"}},
		{"bare array of objects", `[{"id":"m1"},{"model":"m2"}]`, []string{"m1", "m2"}},
		{"duplicates and blanks dropped", `{"data":[{"id":"a"},{"id":"a"},{"id":" "},{}]}`, []string{"a"}},
		{"empty", `{"data":[]}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			models, err := Parse([]byte(tc.body))
			require.NoError(t, err)
			var ids []string
			for _, m := range models {
				ids = append(ids, m.GetId())
			}
			assert.Equal(t, tc.ids, ids)
		})
	}
	_, err := Parse([]byte(`<html>`))
	assert.Error(t, err)
}

func TestParseKeepsKindAndType(t *testing.T) {
	models, err := Parse([]byte(`{"data":[{"id":"e","kind":"embedding"},{"id":"s","type":"tts"}]}`))
	require.NoError(t, err)
	require.Len(t, models, 2)
	assert.Equal(t, "embedding", models[0].GetKind())
	assert.Equal(t, "tts", models[1].GetType())
}

// An entry's created is kept when it is a time in Unix seconds, whole or
// with a fraction (cut off), or in milliseconds (some compatible servers
// give those); an entry whose created is anything else is listed all the
// same, with none.
func TestParseKeepsCreated(t *testing.T) {
	models, err := Parse([]byte(`{"data":[{"id":"a","created":1686935002},{"id":"b"},{"id":"c","created":"2024-01-01"},
		{"id":"d","created":-1},{"id":"e","created":1686935002000},{"id":"f","created":1.5},{"id":"g","created":1686935002.75},
		{"id":"h","created":1.686935002e9},{"id":"i","created":99999999999999999},{"id":"j","created":1e400}]}`))
	require.NoError(t, err)
	got := map[string]int64{}
	for _, m := range models {
		got[m.GetId()] = m.GetCreated()
	}
	assert.Equal(t, map[string]int64{"a": 1686935002, "b": 0, "c": 0, "d": 0, "e": 1686935002, "f": 1, "g": 1686935002,
		"h": 1686935002, "i": 0, "j": 0}, got)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"data":[{"id":"a"}]}`, `["a"]`, `{"models":[1,2]}`, `null`, `{"data":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		models, err := Parse(body)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range models {
			if m.GetId() == "" || seen[m.GetId()] {
				t.Fatalf("empty or duplicate id in %q", body)
			}
			seen[m.GetId()] = true
		}
	})
}
