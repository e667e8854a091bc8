package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// The direct listing encoder writes exactly what protojson writes.
func TestListingMatchesProtojson(t *testing.T) {
	for _, l := range []*corev1.ListModelsResponse{
		{Object: "list"},
		{Object: "list", Data: []*corev1.ModelEntry{
			{Id: "openai/gpt-4o", Object: "model", OwnedBy: "openai", Kind: "llm", Created: 1715367049},
			{Id: `odd/"quoted"\u2028<&>`, Object: "model", OwnedBy: "a\tb", Kind: "embedding"},
		}},
	} {
		got, err := newMarshaler().Marshal(l)
		require.NoError(t, err)
		want, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(l)
		require.NoError(t, err)
		var g, w any
		require.NoError(t, json.Unmarshal(got, &g), "%s", got)
		require.NoError(t, json.Unmarshal(want, &w))
		if d := cmp.Diff(w, g); d != "" {
			t.Fatalf("listing differs from protojson (-want +got):\n%s", d)
		}
	}
}

func FuzzListing(f *testing.F) {
	f.Add("openai/gpt-4o", "openai", "llm")
	f.Add("\x00\xff", "\"", "\\")
	f.Fuzz(func(t *testing.T, id, owner, kind string) {
		l := &corev1.ListModelsResponse{Object: "list", Data: []*corev1.ModelEntry{{Id: id, Object: "model", OwnedBy: owner, Kind: kind}}}
		b, err := newMarshaler().Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %q", b)
		}
	})
}

// A string is written byte for byte as encoding/json writes it.
func FuzzAppendStringAsJSON(f *testing.F) {
	for _, s := range []string{"", "openai/gpt-4o", "a\"b", `a\b`, "<&>", "\x7f", "\x1f", "é", "\u2028", "\xff", "~ !#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendString(nil, s)))
	})
}

// A listing is written again from the bytes kept only for the very entries
// they were written from: another listing, even of the same length and
// object, is written afresh.
func TestListingBytesKeptForTheSameEntries(t *testing.T) {
	m := newMarshaler()
	entries := func(id string) []*corev1.ModelEntry {
		return []*corev1.ModelEntry{{Id: id, Object: "model", OwnedBy: "o", Kind: "llm"}}
	}
	first := &corev1.ListModelsResponse{Object: "list", Data: entries("a/one")}
	b1, err := m.Marshal(first)
	require.NoError(t, err)
	// In process the edge gets a new response holding core's entries.
	again, err := m.Marshal(&corev1.ListModelsResponse{Object: "list", Data: first.Data})
	require.NoError(t, err)
	require.Same(t, unsafe.SliceData(b1), unsafe.SliceData(again), "written again")
	require.Equal(t, len(again), cap(again), "an append to a shared body must copy it")

	other, err := m.Marshal(&corev1.ListModelsResponse{Object: "list", Data: entries("a/two")})
	require.NoError(t, err)
	require.Contains(t, string(other), `"a/two"`)
	empty, err := m.Marshal(&corev1.ListModelsResponse{Object: "list"})
	require.NoError(t, err)
	require.JSONEq(t, `{"object":"list","data":[]}`, string(empty))
}

// BenchmarkListing encodes a listing of 5,000 models (100 connections of
// 50), the size cmd/bench's listing workload asks for.
func BenchmarkListing(b *testing.B) {
	l := &corev1.ListModelsResponse{Object: "list"}
	for c := range 100 {
		for m := range 50 {
			l.Data = append(l.Data, &corev1.ModelEntry{Id: fmt.Sprintf("conn-%03d/model-%02d-preview-2026", c, m), Object: "model", OwnedBy: fmt.Sprintf("conn-%03d", c), Kind: "llm"})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		appendListing(make([]byte, 0, 64+96*len(l.Data)), l)
	}
}

// A request body is one JSON value: whitespace may follow it, anything
// else makes it not JSON; an empty body is io.EOF, an empty request.
func TestDecoderRefusesTrailingData(t *testing.T) {
	for _, c := range []struct {
		body string
		err  error
	}{
		{`{"code":"a"}`, nil},
		{"{\"code\":\"a\"} \r\n\t ", nil},
		{"", io.EOF},
		{`{"code":"a"} x`, errTrailingData},
		{`{"code":"a"}{}`, errTrailingData},
		{"{\"code\":\"a\"}\n" + strings.Repeat(" ", 2000) + "]", errTrailingData},
	} {
		var req corev1.RedeemSignInCodeRequest
		err := newMarshaler().NewDecoder(strings.NewReader(c.body)).Decode(&req)
		require.ErrorIs(t, err, c.err, "%q", c.body)
		if c.err == nil {
			require.Equal(t, "a", req.GetCode())
		}
	}
}
