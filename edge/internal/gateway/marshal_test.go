package gateway

import (
	"encoding/json"
	"testing"

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
			{Id: "openai/gpt-4o", Object: "model", OwnedBy: "openai", Kind: "llm"},
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
