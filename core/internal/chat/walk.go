package chat

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A stream event is read once: walk checks that its data is valid JSON,
// judged exactly as encoding/json.Valid judges it, and on the way gathers
// what the gateway reads from it (a few top-level members, a chat chunk's
// finish reasons, the characters of the text a client is sent), instead of
// a validation pass followed by searches and a partial decode.

// maxNesting is encoding/json's limit on nested arrays and objects: data
// nested deeper is not valid to json.Valid.
const maxNesting = 10000

// span is where a value lies in the walked data; start < 0: absent.
type span struct{ start, end int }

// role is what a value is to the walk: most are only checked.
type role uint8

const (
	roleNone    role = iota
	roleTop          // the top-level value: its members are looked for
	roleChoices      // a chat chunk's choices array
	roleChoice       // an element of it: its finish reason is read
)

// finish reason of one choice, as inspectMembers judges it.
const (
	frNone      = iota // absent or null
	frEmpty            // ""
	frSet              // a non-empty string
	frWrongType        // neither string nor null
)

// walk is one pass over an event's data. Set names, text and choices, then
// run.
type walk struct {
	b     []byte
	i     int
	depth int

	// names are the top-level members looked for (at most four,
	// lower-case ASCII); found[k] is the value of the last member named
	// names[k], names matched as encoding/json matches them
	// (case-insensitively).
	names []string
	found [4]span
	// lens has bit n%64 set when a name is n bytes long: most member
	// names are told apart from names by their length alone.
	lens uint64
	// object: the data is an object.
	object bool
	// odd: a member name the facts depend on has escapes or non-ASCII
	// bytes: matching it as encoding/json does is left to the slower
	// readers (scan.go). dup: a member looked for is there twice.
	odd, dup bool

	// text are the ends of the member names (quotes included, as delivered
	// matches them) whose string values count as delivered text; chars is
	// the count.
	text  [][]byte
	chars int64
	// ends has bit c%64 set when a name of text ends with the letter c,
	// likewise.
	ends uint64

	// choices: names[0] is a chat chunk's "choices", whose elements and
	// finish reasons are read (of the last such member): n elements,
	// finished when one has a finish reason, bad when it is not an array
	// of objects and nulls whose finish reasons are strings or null.
	choices  bool
	n        int
	finished bool
	bad      bool
	fr       int // the finish reason of the choice being walked
}

// plain reports whether encoding/json, decoding the walked data into a
// struct, would read the members looked for as the walk found them: the
// data is an object, and no name was left to the slower readers or
// repeated (encoding/json would merge the values).
func (w *walk) plain() bool { return w.object && !w.odd && !w.dup }

// event walks a passed-through Messages or Responses event (names[0] is
// "type"), counting its delivered text when its name is known; ok is false
// when data is not valid JSON. plain says whether the members found can be
// read as they are, the type among them (given only when name is empty:
// the type names the event then); else the caller decodes the whole event.
func (w *walk) event(name string, data []byte) (typ []byte, plain, ok bool) {
	if name != "" {
		w.text = deliveredMembers(name)
	}
	if !w.run(data) {
		return nil, false, false
	}
	typ, plain = plainString(w.member(0))
	if name != "" {
		typ = nil
	}
	return typ, plain && w.plain(), true
}

// readEvent reads a passed-through Messages or Responses event (names[0]
// is "type", at most two more members) into an E, walking it once
// (walk.event): when the walk is sure of what encoding/json would read,
// fill stores its type and decodes only the members found (nil when
// absent), else encoding/json decodes the whole event. ok is false for a
// malformed event; chars is its delivered text (as an event of that name,
// or -1 when name is not yet known, when its type is read).
func readEvent[E any](names []string, name string, data []byte, fill func(ev *E, typ, a, b []byte) bool) (ev E, ok bool, chars int64) {
	w := walk{names: names}
	typ, plain, ok := w.event(name, data)
	switch {
	case !ok:
		return ev, false, 0
	case !plain:
		if json.Unmarshal(data, &ev) != nil {
			return *new(E), false, 0
		}
		return ev, true, w.eventChars(name)
	}
	var b []byte
	if len(names) > 2 {
		b = w.member(2)
	}
	if !fill(&ev, typ, w.member(1), b) {
		return *new(E), false, 0
	}
	return ev, true, w.eventChars(name)
}

// eventChars is the delivered text an event walked counted: -1 when its
// name was not known.
func (w *walk) eventChars(name string) int64 {
	if name == "" {
		return -1
	}
	return w.chars
}

// member is the raw value of the member names[k], or nil.
func (w *walk) member(k int) []byte {
	if f := w.found[k]; f.start >= 0 {
		return w.b[f.start:f.end]
	}
	return nil
}

// plainString returns the bytes encoding/json decodes a raw value
// (absent, null or a string) into a Go string as; ok is false when that
// takes encoding/json: escapes, bytes that are not UTF-8, another type.
func plainString(raw []byte) (s []byte, ok bool) {
	switch {
	case raw == nil || isNull(raw):
		return nil, true
	case raw[0] != '"':
		return nil, false
	}
	s = raw[1 : len(raw)-1]
	return s, bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s)
}

// plainByte are the bytes a JSON string holds as they are: not a quote, a
// backslash or a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validJSON reports whether data is valid JSON, as encoding/json.Valid.
func validJSON(data []byte) bool {
	var w walk
	return w.run(data)
}

// run walks data and reports whether it is valid JSON.
func (w *walk) run(data []byte) bool {
	w.b, w.i = data, 0
	for k := range w.found {
		w.found[k] = span{-1, -1}
	}
	for _, n := range w.names {
		w.lens |= 1 << (len(n) % 64)
	}
	for _, t := range w.text {
		w.ends |= 1 << (t[len(t)-2] % 64) // the letter before the closing quote
	}
	w.skipSpace()
	w.object = w.i < len(data) && data[w.i] == '{'
	if !w.value(roleTop) {
		return false
	}
	w.skipSpace()
	return w.i == len(data)
}

func (w *walk) skipSpace() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value walks the value at w.i (not a space).
func (w *walk) value(r role) bool {
	if w.i >= len(w.b) {
		return false
	}
	switch c := w.b[w.i]; {
	case c == '"':
		return w.str()
	case c == '{':
		return w.obj(r)
	case c == '[':
		return w.arr(r)
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return w.num()
	}
	return false
}

func (w *walk) literal(lit string) bool {
	if !bytes.HasPrefix(w.b[w.i:], []byte(lit)) {
		return false
	}
	w.i += len(lit)
	return true
}

// num walks a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *walk) num() bool {
	b, i := w.b, w.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	w.i = i
	return true
}

// digits returns the end of the digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// str walks a string (w.i at its quote).
func (w *walk) str() bool {
	b, i := w.b, w.i+1
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			w.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default:
			return false // a control character
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// obj walks an object (w.i at its brace).
func (w *walk) obj(r role) bool {
	w.depth++
	if w.depth > maxNesting {
		return false
	}
	b := w.b
	w.i++
	w.skipSpace()
	if w.i < len(b) && b[w.i] == '}' {
		w.i++
		w.depth--
		return true
	}
	for {
		if w.i >= len(b) || b[w.i] != '"' {
			return false
		}
		kstart := w.i
		plainKey := w.key()
		if !plainKey && !w.str() {
			return false
		}
		kend := w.i
		w.skipSpace()
		if w.i >= len(b) || b[w.i] != ':' {
			return false
		}
		w.i++
		w.skipSpace()
		vstart := w.i
		child, k, fr := roleNone, -1, false
		switch r {
		case roleTop:
			if !plainKey {
				w.odd = true
			} else if k = w.name(b[kstart+1 : kend-1]); k == 0 && w.choices {
				child = roleChoices
				w.n, w.finished, w.bad = 0, false, false
			}
		case roleChoice:
			if !plainKey {
				w.odd = true
			} else {
				fr = is(b[kstart+1:kend-1], "finish_reason")
			}
		}
		if !w.value(child) {
			return false
		}
		if len(w.text) > 0 && b[vstart] == '"' && w.counts(b[kstart:kend], b[kend:vstart]) {
			n, _ := countString(b[vstart+1 : w.i])
			w.chars += n
		}
		switch {
		case k >= 0:
			w.dup = w.dup || w.found[k].start >= 0
			w.found[k] = span{vstart, w.i}
			if child == roleChoices && b[vstart] != '[' && b[vstart] != 'n' {
				w.bad = true // not an array, not null
			}
		case fr:
			switch {
			case b[vstart] == 'n':
				w.fr = frNone
			case b[vstart] != '"':
				w.fr = frWrongType
			case w.i-vstart > 2:
				w.fr = frSet
			default:
				w.fr = frEmpty
			}
		}
		w.skipSpace()
		if w.i >= len(b) {
			return false
		}
		switch b[w.i] {
		case ',':
			w.i++
			w.skipSpace()
		case '}':
			w.i++
			w.depth--
			return true
		default:
			return false
		}
	}
}

// arr walks an array (w.i at its bracket).
func (w *walk) arr(r role) bool {
	w.depth++
	if w.depth > maxNesting {
		return false
	}
	b := w.b
	w.i++
	w.skipSpace()
	if w.i < len(b) && b[w.i] == ']' {
		w.i++
		w.depth--
		return true
	}
	child := roleNone
	if r == roleChoices {
		child = roleChoice
	}
	for {
		if child == roleChoice {
			w.n++
			w.fr = frNone
			if w.i < len(b) && b[w.i] != '{' && b[w.i] != 'n' {
				w.bad = true // neither an object nor null
			}
		}
		if !w.value(child) {
			return false
		}
		if child == roleChoice {
			switch w.fr {
			case frSet:
				w.finished = true
			case frWrongType:
				w.bad = true
			}
		}
		w.skipSpace()
		if w.i >= len(b) {
			return false
		}
		switch b[w.i] {
		case ',':
			w.i++
			w.skipSpace()
		case ']':
			w.i++
			w.depth--
			return true
		default:
			return false
		}
	}
}

// key walks a member name (w.i at its quote) that is plain ASCII without
// escapes, as names usually are; false (w.i unmoved) for any other, which
// str walks. A name the facts depend on that is not plain is left to the
// slower readers (w.odd): matching it as encoding/json does takes
// unescaping and Unicode case folding.
func (w *walk) key() bool {
	b, i := w.b, w.i+1
	for i < len(b) && plainASCII[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		w.i = i + 1
		return true
	}
	return false
}

// plainASCII are the bytes of a plain name: ASCII, not a quote, a
// backslash or a control character.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// name returns the index in names of a plain top-level member name, or -1.
func (w *walk) name(raw []byte) int {
	if w.lens&(1<<(len(raw)%64)) == 0 {
		return -1
	}
	for k, n := range w.names {
		if is(raw, n) {
			return k
		}
	}
	return -1
}

// is reports whether a plain member name is name (lower-case ASCII) as
// encoding/json matches names: case-insensitively.
func is(raw []byte, name string) bool {
	if len(raw) != len(name) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// counts reports whether a member's string value is delivered text: its
// raw name (quotes included) ends as one of w.text does and only spaces,
// tabs and the colon lie between name and value, as delivered.count
// finds them.
func (w *walk) counts(name, between []byte) bool {
	if w.ends&(1<<(name[len(name)-2]%64)) == 0 {
		return false
	}
	for _, c := range between {
		if c != ' ' && c != ':' && c != '\t' {
			return false
		}
	}
	for _, t := range w.text {
		if bytes.HasSuffix(name, t) {
			return true
		}
	}
	return false
}
