package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var values = []string{
	`"a"`, `""`, `"\""`, `"\\"`, `"a\\\"b"`, `"\u00e9"`, `0`, `-1.5e3`, `true`, `false`, `null`,
	`{}`, `[]`, `{"a":[1,{"b":"}"}],"c":"]"}`, `[ 1 , "x" , { } ]`, `{"k":"v\"}"}`,
}

// Each valid value ends where it ends, whatever follows it.
func TestValueEnd(t *testing.T) {
	for _, v := range values {
		for _, after := range []string{"", ",", "}", "]", " ", "\n,"} {
			b := []byte(v + after)
			require.Equal(t, len(v), ValueEnd(b, 0), "%q", b)
			require.Equal(t, 2+len(v), ValueEnd(append([]byte(`[ `), b...), 2), "%q", b)
		}
	}
}

func TestSkipSpace(t *testing.T) {
	require.Equal(t, 4, SkipSpace([]byte(" \t\r\nx"), 0))
	require.Equal(t, 3, SkipSpace([]byte("   "), 0))
	require.Equal(t, 2, SkipSpace([]byte("x y"), 1))
	require.Zero(t, SkipSpace(nil, 0))
}

// On any valid JSON value ValueEnd finds its end; on anything else it
// stays within the input.
func FuzzValueEnd(f *testing.F) {
	for _, v := range values {
		f.Add([]byte(v))
	}
	f.Add([]byte(`"\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		end := ValueEnd(b, 0)
		require.LessOrEqual(t, end, len(b))
		v := bytes.TrimRight(b, " \t\r\n")
		if len(v) > 0 && SkipSpace(v, 0) == 0 && json.Valid(v) {
			require.Equal(t, len(v), ValueEnd(v, 0), "%q", v)
		}
	})
}

// Members reads each member of an object in place, its key as
// encoding/json reads it; it refuses what is not an object, and stops when
// told to.
func TestMembers(t *testing.T) {
	for _, s := range []string{`{}`, ` { } `, `{"a":1}`, `{"a":{"b":[1,"}"]},"c" : "d" ,"a":null}`, `{"x":"\"","y":[]}`, `{"\u0061\"":1,"b\n":2}`} {
		want := map[string]json.RawMessage{}
		require.NoError(t, json.Unmarshal([]byte(s), &want))
		got := map[string]json.RawMessage{}
		require.True(t, Members([]byte(s), func(k, v []byte) bool { got[string(k)] = v; return true }), s)
		require.Equal(t, len(want), len(got), s)
		for k, v := range want {
			require.JSONEq(t, string(v), string(got[k]), "%s: %s", s, k)
		}
	}
	for _, s := range []string{`[]`, `"x"`, ``, `1`} {
		require.False(t, Members([]byte(s), func(k, v []byte) bool { return true }), s)
	}
	n := 0
	require.True(t, Members([]byte(`{"a":1,"b":2,"c":3}`), func(k, v []byte) bool { n++; return string(k) != "b" }))
	require.Equal(t, 2, n, "stops after the member fn refuses")
}

func TestElements(t *testing.T) {
	var got []string
	require.True(t, Elements([]byte(` [ 1 , "]" ,{"a":[2]}, [] ] `), func(v []byte) bool { got = append(got, string(v)); return true }))
	require.Equal(t, []string{`1`, `"]"`, `{"a":[2]}`, `[]`}, got)
	require.False(t, Elements([]byte(`{}`), func([]byte) bool { return true }))
	n := 0
	require.True(t, Elements([]byte(`[1,2,3]`), func([]byte) bool { n++; return n < 2 }))
	require.Equal(t, 2, n)
}

// FoldsTo matches as encoding/json matches a struct's fields, beyond
// ASCII, and never an exact name.
func TestFoldsTo(t *testing.T) {
	require.True(t, FoldsTo([]byte("Messages"), "stream", "messages"))
	require.True(t, FoldsTo([]byte("meſſages"), "messages"))
	require.True(t, FoldsTo([]byte("Kind"), "kind"))
	require.False(t, FoldsTo([]byte("messages"), "messages"))
	require.False(t, FoldsTo([]byte("model"), "messages"))
}

// On bytes that are not valid JSON the walks end (the package's promise of
// bounded answers), where a closing brace in an array's place kept
// Elements from moving on.
func TestWalksEndOnInvalidJSON(t *testing.T) {
	for _, s := range []string{`[}`, `[1 }`, `[1,}`, `[ : ]`, `{"a":1 ]`, `{"a" }`, `{"a":}`, `[`, `{`} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			Elements([]byte(s), func([]byte) bool { return true })
			Members([]byte(s), func(_, _ []byte) bool { return true })
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("a walk of %q did not end", s)
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		json string
		lone bool
	}{
		{`{"a":"plain"}`, false},
		{`{"a":"\ud83d\ude00 pair"}`, false},
		{`{"a":"\ud800x"}`, true},
		{`{"a":"\udc00"}`, true},
		{`{"a":"\ud83d\u0041"}`, true}, // a high half followed by no low half
		{`{"a":"\\ud800"}`, false},     // an escaped backslash, then text
		{`{"a":"\\\ud800"}`, true},
		{`{"a":"\u00e9\"\ud800"}`, true},
		{`{"\ud800":1}`, true},
		{`"\ud83d\ude00"`, false},
		{`"\ud83d"`, true},
		{`"\u12"`, false},
	} {
		assert.Equal(t, tc.lone, LoneSurrogate([]byte(tc.json)), tc.json)
	}
}

func TestSetMember(t *testing.T) {
	for _, tc := range []struct{ obj, want string }{
		{`{"a":1,"p":null,"b":[{"p":2}]}`, `{"a":1,"p":"x","b":[{"p":2}]}`},
		{`{"b":[{"p":null}], "p" : null }`, `{"b":[{"p":null}], "p" : "x" }`},
		{`{"a":1}`, `{"p":"x","a":1}`},
		{` { } `, ` {"p":"x" } `},
		{`{}`, `{"p":"x"}`},
		{`{"a":"\"p\":null"}`, `{"p":"x","a":"\"p\":null"}`},
	} {
		obj := []byte(tc.obj)
		got := SetMember(obj, "p", []byte(`"x"`))
		assert.Equal(t, tc.want, string(got), tc.obj)
		assert.Equal(t, tc.obj, string(obj), "obj is left as it is")
		assert.True(t, json.Valid(got), tc.obj)
	}
	assert.Equal(t, `[1]`, string(SetMember([]byte(`[1]`), "p", []byte(`1`))), "not an object")
}
