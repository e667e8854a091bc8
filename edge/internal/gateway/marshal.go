package gateway

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// marshaler is protojson for every message but the model listing, which can
// hold thousands of entries and is written directly, in the same shape,
// without protojson's reflection.
type marshaler struct {
	runtime.JSONPb
}

func newMarshaler() *marshaler {
	return &marshaler{runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}}
}

// Marshal encodes v.
func (m *marshaler) Marshal(v any) ([]byte, error) {
	if l, ok := v.(*corev1.ListModelsResponse); ok {
		return appendListing(make([]byte, 0, 64+96*len(l.GetData())), l), nil
	}
	return m.JSONPb.Marshal(v)
}

// appendListing writes {"object":"list","data":[{"id","object","owned_by","kind"}...]}.
func appendListing(b []byte, l *corev1.ListModelsResponse) []byte {
	b = append(b, `{"object":`...)
	b = appendString(b, l.GetObject())
	b = append(b, `,"data":[`...)
	for i, e := range l.GetData() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, e.GetId())
		b = append(b, `,"object":`...)
		b = appendString(b, e.GetObject())
		b = append(b, `,"owned_by":`...)
		b = appendString(b, e.GetOwnedBy())
		b = append(b, `,"kind":`...)
		b = appendString(b, e.GetKind())
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendString appends s as a JSON string: as is when every byte is
// printable ASCII that encoding/json writes unescaped (model ids almost
// always are), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || !plainJSON[c] {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON marks the ASCII bytes encoding/json writes in a string as they
// are: printable, but not '"', '\\' or the HTML-sensitive '<', '>' and '&'.
var plainJSON = func() (t [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf-1; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
