package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
)

// namedFieldError is protojson's error err for the body raw of a message
// md, told again naming the field it is about by its whole path
// (combos[1].models, providerSpecificData.prefix) and what that field must
// be, in the words openai.FromError reads (openai.FieldError); nil when err
// names no place in raw or the place is no field of md. protojson names a
// field whose value is of the wrong kind only by its own name, and a list,
// an object or a map given a value of another kind not at all.
func namedFieldError(raw []byte, md protoreflect.MessageDescriptor, err error) error {
	line, col, ok := errorPosition(err.Error())
	if !ok {
		return nil
	}
	off, ok := offsetOf(raw, line, col)
	if !ok {
		return nil
	}
	path, ok := pathAt(raw, off)
	if !ok {
		return nil
	}
	name, what, ok := fieldAt(md, path)
	if !ok {
		return nil
	}
	return openai.FieldError(line, col, name, what)
}

// errorPosition reads the "(line 1:12)" of a protojson error.
func errorPosition(msg string) (line, col int, ok bool) {
	_, rest, found := strings.Cut(msg, "(line ")
	if !found {
		return 0, 0, false
	}
	pos, _, found := strings.Cut(rest, ")")
	if !found {
		return 0, 0, false
	}
	l, c, found := strings.Cut(pos, ":")
	line, errL := strconv.Atoi(l)
	col, errC := strconv.Atoi(c)
	return line, col, found && errL == nil && errC == nil && line > 0 && col > 0
}

// offsetOf is the byte offset of a line and column as protojson counts
// them: from 1, the column in characters.
func offsetOf(raw []byte, line, col int) (int, bool) {
	off := 0
	for ; line > 1; line-- {
		i := bytes.IndexByte(raw[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for ; col > 1; col-- {
		if off >= len(raw) || raw[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(raw[off:])
		off += size
	}
	return off, off < len(raw)
}

// step is one key or index on the way to a value of a JSON text.
type step struct {
	key   string
	index int
	isKey bool
}

// pathAt returns the keys and indexes that lead to the value of raw, a JSON
// text, that begins at byte offset off; ok is false when none begins there
// (an object's key does, or the text itself).
func pathAt(raw []byte, off int) (path []step, ok bool) {
	type frame struct {
		object, wantKey bool
		key             string
		index           int
	}
	var stack []frame
	done := func() { // a value of the innermost container ended
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	for {
		start := int(d.InputOffset())
		tok, err := d.Token()
		if err != nil {
			return nil, false
		}
		closing := tok == json.Delim('}') || tok == json.Delim(']')
		isKey := !closing && len(stack) > 0 && stack[len(stack)-1].wantKey
		if start <= off && off < int(d.InputOffset()) {
			if isKey || closing || len(stack) == 0 {
				return nil, false
			}
			for _, f := range stack {
				path = append(path, step{key: f.key, index: f.index, isKey: f.object})
			}
			return path, true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: tok == json.Delim('{')})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			if isKey {
				stack[len(stack)-1].key, stack[len(stack)-1].wantKey = tok.(string), false
			} else {
				done()
			}
		}
	}
}

// fieldAt names the field of md that path leads to, with its JSON names
// and list indexes (combos[1].models), and says what its value must be. A
// map is named itself, its keys being the client's own words.
func fieldAt(md protoreflect.MessageDescriptor, path []step) (name, what string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		s := path[i]
		if !s.isKey || md == nil {
			return "", "", false
		}
		fd := md.Fields().ByJSONName(s.key)
		if fd == nil {
			fd = md.Fields().ByTextName(s.key)
		}
		if fd == nil {
			return "", "", false
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(fd.JSONName())
		rest := path[i+1:]
		switch {
		case fd.IsMap():
			what, ok := plural(fd.MapValue())
			return b.String(), "an object of " + what, ok
		case fd.IsList():
			if len(rest) == 0 {
				what, ok := plural(fd)
				return b.String(), "a list of " + what, ok
			}
			if rest[0].isKey {
				return "", "", false
			}
			fmt.Fprintf(&b, "[%d]", rest[0].index)
			i++
			rest = rest[1:]
		}
		if len(rest) == 0 {
			what, ok := single(fd)
			return b.String(), what, ok
		}
		md = fd.Message()
		if md != nil && wellKnown(md) {
			return "", "", false
		}
	}
	return "", "", false
}

// wellKnown reports a google.protobuf message, which protojson reads as a
// JSON value of its own (a Timestamp as a string, a ListValue as a list).
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

// single is what one value of a field must be.
func single(fd protoreflect.FieldDescriptor) (string, bool) {
	if md := fd.Message(); md != nil {
		switch md.FullName() {
		case "google.protobuf.ListValue":
			return "a list", true
		case "google.protobuf.Struct":
			return "an object", true
		case "google.protobuf.Timestamp":
			return "an RFC 3339 time", true
		}
		return "an object", !wellKnown(md)
	}
	what := openai.FieldKind(fd.Kind().String())
	return what, what != ""
}

// plural is what the values of a list or map field must be.
func plural(fd protoreflect.FieldDescriptor) (string, bool) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "objects", !wellKnown(fd.Message())
	case protoreflect.StringKind:
		return "strings", true
	case protoreflect.BoolKind:
		return "booleans", true
	case protoreflect.BytesKind:
		return "base64-encoded strings", true
	case protoreflect.EnumKind:
		return "named values", true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "numbers", true
	}
	return "integers", true
}
