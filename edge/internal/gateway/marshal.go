package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// marshaler is protojson for every message but the model listing, which can
// hold thousands of entries and is written directly, in the same shape,
// without protojson's reflection.
type marshaler struct {
	runtime.JSONPb
	// listing is the last listing written, kept with the entries it was
	// written from: core answers a machine's listing with the same entries
	// while its catalog is unchanged (in process they reach here as they
	// are), so the next request for it is answered with these bytes.
	listing atomic.Pointer[writtenListing]
}

type writtenListing struct {
	data   []*corev1.ModelEntry
	object string
	body   []byte
}

func newMarshaler() *marshaler {
	return &marshaler{JSONPb: runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}}
}

// NewDecoder returns a decoder of a request body: protojson's, which reads
// one JSON value, refusing anything but whitespace after it, so that a
// body such as `{"code":"a"} x` is not taken as `{"code":"a"}`.
func (m *marshaler) NewDecoder(r io.Reader) runtime.Decoder {
	d := json.NewDecoder(r)
	value := runtime.DecoderWrapper{Decoder: d, UnmarshalOptions: m.UnmarshalOptions}
	return runtime.DecoderFunc(func(v any) error {
		if err := m.decode(d, value, v); err != nil {
			return err
		}
		return onlySpace(io.MultiReader(d.Buffered(), r))
	})
}

// decode reads one JSON value into v, as grpc-gateway's decoder does; a
// message whose field has a value of the wrong kind is refused naming the
// field by its whole path (namedFieldError).
func (m *marshaler) decode(d *json.Decoder, value runtime.DecoderWrapper, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return value.Decode(v)
	}
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		return err
	}
	err := m.UnmarshalOptions.Unmarshal(raw, msg)
	if err != nil {
		if named := namedFieldError(raw, msg.ProtoReflect().Descriptor(), err); named != nil {
			return named
		}
	}
	return err
}

// errTrailingData is in encoding/json's words for a body not valid JSON,
// which the edge answers as such (openai.FromError: invalid_json).
var errTrailingData = errors.New("invalid character after top-level value")

// onlySpace reads r to its end and reports errTrailingData at the first
// byte that is not JSON whitespace.
func onlySpace(r io.Reader) error {
	buf := make([]byte, 512)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return errTrailingData
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Marshal encodes v.
func (m *marshaler) Marshal(v any) ([]byte, error) {
	if l, ok := v.(*corev1.ListModelsResponse); ok {
		if w := m.listing.Load(); w != nil && sameEntries(w.data, l.GetData()) && w.object == l.GetObject() {
			return w.body, nil
		}
		b := appendListing(make([]byte, 0, 64+96*len(l.GetData())), l)
		b = b[:len(b):len(b)] // shared by the requests answered with it: an append copies
		m.listing.Store(&writtenListing{data: l.GetData(), object: l.GetObject(), body: b})
		return b, nil
	}
	return m.JSONPb.Marshal(v)
}

// sameEntries reports whether a and b are the same entries: the same slice,
// not merely equal contents (a kept listing holds its slice, so no other
// can take its place in memory). Entries are never changed once answered.
func sameEntries(a, b []*corev1.ModelEntry) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// appendListing writes {"object":"list","data":[{"id","object","created","owned_by","kind"}...]}:
// OpenAI's model objects, whose created the clients require (0: the
// upstream did not say when the model was made, as retrieving it says).
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
		b = append(b, `,"created":`...)
		b = strconv.AppendUint(b, uint64(e.GetCreated()), 10)
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
