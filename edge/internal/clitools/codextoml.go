package clitools

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A line-level editor of Codex's config.toml: it sets top-level keys and
// replaces or removes one table, and leaves every other line of the user's
// file as it was (comments, order, other providers, profiles and trusted
// projects). No TOML library is needed for that, and none rewrites a file
// it did not fully understand.
//
// Lines are classified by a scanner that follows TOML's lexical rules far
// enough to know where statements begin: a line that starts inside a
// multi-line string or a value spanning lines (an array, an inline table)
// is part of the value, never a header or a key, whatever it holds. A line
// that begins a statement with '[' is a table or array-of-tables header;
// its name is read as a dotted key (bare, "basic" or 'literal' parts, with
// any characters, ']' included, inside quotes).

// errBadValue is a value the editor refuses to write.
var errBadValue = errors.New("value holds control characters")

// errBadTOML is a file whose statements the scanner cannot delimit (a
// string or a value left open at its end): editing it could land our lines
// inside the user's value.
var errBadTOML = errors.New("config.toml is not valid TOML")

// lineKind is what a line of the file is.
type lineKind int

const (
	lineBlank lineKind = iota
	lineComment
	lineHeader
	// lineKey begins a "key = value" statement.
	lineKey
	// lineValue continues the value of the statement above.
	lineValue
	// lineOther is a statement the scanner does not read (not TOML).
	lineOther
)

// lineInfo is what the scanner knows of one line.
type lineInfo struct {
	kind lineKind
	// path is a header's table name or a key's dotted key, unquoted; nil
	// when it could not be read.
	path []string
	// array marks an array-of-tables header ([[...]]).
	array bool
	// end is, on a key line, the index after the statement's last line.
	end int
	// valueAt is, on a key line, the offset of the value (after '=').
	valueAt int
	// comment is the offset of the comment ending the line, -1 if none.
	comment int
}

type tomlDoc struct {
	lines []string
	// crlf keeps a file written with CRLF line endings so.
	crlf bool
	// bom keeps the UTF-8 byte-order mark a file began with (Windows
	// editors write one; Codex's TOML reader skips it).
	bom bool
}

// utf8BOM is the byte-order mark some editors begin a UTF-8 file with.
const utf8BOM = "\ufeff"

func parseTOML(data []byte) tomlDoc {
	s, bom := strings.CutPrefix(string(data), utf8BOM)
	crlf := strings.Contains(s, "\r\n")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return tomlDoc{crlf: crlf, bom: bom}
	}
	return tomlDoc{lines: strings.Split(s, "\n"), crlf: crlf, bom: bom}
}

func (d tomlDoc) bytes() []byte {
	nl := "\n"
	if d.crlf {
		nl = "\r\n"
	}
	var b strings.Builder
	if d.bom {
		b.WriteString(utf8BOM)
	}
	b.WriteString(strings.Join(d.lines, nl))
	b.WriteString(nl)
	return []byte(b.String())
}

// check reports a file the editor cannot delimit, or one TOML refuses
// whatever its statements: a carriage return outside a CRLF line ending.
func (d tomlDoc) check() error {
	if _, ok := scanTOML(d.lines); !ok {
		return errBadTOML
	}
	for _, l := range d.lines {
		if strings.ContainsRune(l, '\r') {
			return errBadTOML
		}
	}
	return nil
}

// info classifies the lines as they are now.
func (d tomlDoc) info() []lineInfo {
	info, _ := scanTOML(d.lines)
	return info
}

// topEnd is the index of the first table header (the end of the top-level
// keys).
func topEnd(info []lineInfo) int {
	for i, l := range info {
		if l.kind == lineHeader {
			return i
		}
	}
	return len(info)
}

// tableRange is the range of the table named path: its header and the
// lines up to the next header.
func tableRange(info []lineInfo, path []string) (start, end int, ok bool) {
	for i, l := range info {
		if l.kind == lineHeader && !l.array && slices.Equal(l.path, path) {
			end = len(info)
			for j := i + 1; j < len(info); j++ {
				if info[j].kind == lineHeader {
					end = j
					break
				}
			}
			return i, end, true
		}
	}
	return 0, 0, false
}

// findKey finds the statement setting key in lines [from, to).
func findKey(info []lineInfo, from, to int, key string) (int, bool) {
	for i := from; i < to; i++ {
		if info[i].kind == lineKey && len(info[i].path) == 1 && info[i].path[0] == key {
			return i, true
		}
	}
	return 0, false
}

// rawValue is the raw value of the key statement at i, without its
// comment or surrounding space.
func (d tomlDoc) rawValue(info []lineInfo, i int) string {
	l := info[i]
	last := l.end - 1
	var b strings.Builder
	for j := i; j <= last; j++ {
		s := d.lines[j]
		if j == last && info[j].comment >= 0 {
			s = s[:info[j].comment]
		}
		if j == i {
			s = s[l.valueAt:]
		}
		if j > i {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return strings.TrimSpace(b.String())
}

// topValue returns a top-level key's raw value.
func (d tomlDoc) topValue(key string) (string, bool) {
	info := d.info()
	i, ok := findKey(info, 0, topEnd(info), key)
	if !ok {
		return "", false
	}
	return d.rawValue(info, i), true
}

// tableValue returns a key's raw value in a table.
func (d tomlDoc) tableValue(name, key string) (string, bool) {
	info := d.info()
	start, end, ok := tableRange(info, tablePath(name))
	if !ok {
		return "", false
	}
	i, ok := findKey(info, start+1, end, key)
	if !ok {
		return "", false
	}
	return d.rawValue(info, i), true
}

// setTop sets a top-level key to a raw value: in place (keeping the line's
// indentation and comment), or after the other top-level keys.
func (d *tomlDoc) setTop(key, raw string) {
	info := d.info()
	end := topEnd(info)
	if i, ok := findKey(info, 0, end, key); ok {
		first := d.lines[i]
		line := first[:len(first)-len(strings.TrimLeft(first, " \t"))] + key + " = " + raw
		if last := info[i].end - 1; info[last].comment >= 0 {
			line += " " + d.lines[last][info[last].comment:]
		}
		d.lines = slices.Replace(d.lines, i, info[i].end, line)
		return
	}
	d.lines = slices.Insert(d.lines, topInsertAt(info, end), key+" = "+raw)
}

// topInsertAt is where a new top-level key goes: after the last top-level
// statement, else before the blank lines and the comment block that lead
// the first table.
func topInsertAt(info []lineInfo, end int) int {
	for i := end - 1; i >= 0; i-- {
		switch info[i].kind {
		case lineKey, lineValue, lineOther:
			// The last line of the last statement.
			return i + 1
		}
	}
	at := end
	for at > 0 && info[at-1].kind == lineComment {
		at--
	}
	if at == 0 {
		// A file of comments only, or one whose first table's comment
		// opens it: the key goes first, the comment stays by its table.
		return 0
	}
	for at > 0 && info[at-1].kind == lineBlank {
		at--
	}
	return at
}

// removeTop removes a top-level key's statement.
func (d *tomlDoc) removeTop(key string) bool {
	info := d.info()
	i, ok := findKey(info, 0, topEnd(info), key)
	if !ok {
		return false
	}
	d.lines = slices.Delete(d.lines, i, info[i].end)
	if i == 0 {
		// The file's first statement gone, it does not start blank.
		for len(d.lines) > 0 && strings.TrimSpace(d.lines[0]) == "" {
			d.lines = d.lines[1:]
		}
	}
	return true
}

// removeTable removes a table: its header and statements, with the blank
// lines that follow them. Comments that lead the next table, or end the
// file, stay. With sub, the tables under it ([name.x], [[name.y]]) go too.
func (d *tomlDoc) removeTable(name string, sub bool) bool {
	path := tablePath(name)
	removed := false
	for {
		info := d.info()
		start, ok := -1, false
		for i, l := range info {
			if l.kind != lineHeader || len(l.path) < len(path) || !slices.Equal(l.path[:len(path)], path) {
				continue
			}
			if len(l.path) == len(path) && !l.array || len(l.path) > len(path) && sub {
				start, ok = i, true
				break
			}
		}
		if !ok {
			break
		}
		end := start + 1
		for end < len(info) && info[end].kind != lineHeader {
			end++
		}
		// The comment block and blank lines just before the next header
		// (or the end of the file) are not the table's.
		for end > start+1 && (info[end-1].kind == lineBlank || info[end-1].kind == lineComment) {
			end--
		}
		for end < len(info) && info[end].kind == lineBlank {
			end++
		}
		d.lines = slices.Delete(d.lines, start, end)
		removed = true
	}
	if removed {
		d.trimEnd()
	}
	return removed
}

// trimEnd drops trailing blank lines.
func (d *tomlDoc) trimEnd() {
	for len(d.lines) > 0 && strings.TrimSpace(d.lines[len(d.lines)-1]) == "" {
		d.lines = d.lines[:len(d.lines)-1]
	}
}

// setTable replaces a table with the given "key = raw" lines, at the end,
// led by the given comment lines (each without its "# "). Tables under it
// stay.
func (d *tomlDoc) setTable(name string, comments []string, kv [][2]string) {
	d.removeTable(name, false)
	d.trimEnd()
	if len(d.lines) > 0 {
		d.lines = append(d.lines, "")
	}
	d.lines = append(d.lines, "["+name+"]")
	for _, c := range comments {
		d.lines = append(d.lines, "# "+c)
	}
	for _, p := range kv {
		d.lines = append(d.lines, p[0]+" = "+p[1])
	}
}

// tableComments returns the text (after "#" and its spaces) of the
// comment lines that stand alone inside a table, before the comment block
// that leads the next table.
func (d tomlDoc) tableComments(name string) []string {
	info := d.info()
	start, end, ok := tableRange(info, tablePath(name))
	if !ok {
		return nil
	}
	for end > start+1 && (info[end-1].kind == lineBlank || info[end-1].kind == lineComment) {
		end--
	}
	var out []string
	for i := start + 1; i < end; i++ {
		if info[i].kind == lineComment {
			out = append(out, strings.TrimLeft(strings.TrimSpace(d.lines[i])[1:], " \t"))
		}
	}
	return out
}

// tablePath splits a table name made of bare keys.
func tablePath(name string) []string { return strings.Split(name, ".") }

// scanTOML classifies lines. ok is false when a string or a value is still
// open at the end of the file.
func scanTOML(lines []string) (info []lineInfo, ok bool) {
	info = make([]lineInfo, len(lines))
	var st scanState
	stmt := -1 // the key line whose value is open
	ok = true
	for i, line := range lines {
		info[i].comment = -1
		if st.open() {
			info[i].kind = lineValue
			info[i].comment = st.scan(line, 0)
			ok = ok && !st.broken
			if !st.open() && stmt >= 0 {
				info[stmt].end = i + 1
				stmt = -1
			}
			continue
		}
		trimmed := strings.TrimLeft(line, " \t")
		at := len(line) - len(trimmed)
		switch {
		case trimmed == "":
			info[i].kind = lineBlank
		case trimmed[0] == '#':
			info[i].kind = lineComment
			info[i].comment = at
		case trimmed[0] == '[':
			info[i].kind = lineHeader
			info[i].path, info[i].array, info[i].comment = parseHeader(line, at)
		default:
			path, eq := parseKey(line, at, '=')
			if eq < 0 {
				info[i].kind = lineOther
				ok = false
				continue
			}
			info[i].kind, info[i].path, info[i].valueAt, info[i].end = lineKey, path, eq+1, i+1
			info[i].comment = st.scan(line, eq+1)
			ok = ok && !st.broken
			if st.open() {
				stmt = i
			}
		}
	}
	return info, ok && !st.open()
}

// scanState is where the scanner is inside a value that spans lines.
type scanState struct {
	// multi is the delimiter of the open multi-line string (`"""` or
	// `'''`), "" when none.
	multi string
	// depth counts the open arrays and inline tables.
	depth int
	// broken is set when a line holds a string left open.
	broken bool
}

func (s *scanState) open() bool { return s.multi != "" || s.depth > 0 }

// scan reads value text from line[i:], and returns the offset of the
// comment ending the line, or -1.
func (s *scanState) scan(line string, i int) int {
	for i < len(line) {
		if s.multi != "" {
			j := closingQuotes(line, i, s.multi)
			if j < 0 {
				return -1
			}
			s.multi, i = "", j
			continue
		}
		switch c := line[i]; c {
		case '#':
			return i
		case '"', '\'':
			q := string([]byte{c, c, c})
			if strings.HasPrefix(line[i:], q) {
				s.multi, i = q, i+3
				continue
			}
			j := stringEnd(line, i)
			if j < 0 {
				s.broken = true
				return -1
			}
			i = j
		case '[', '{':
			s.depth++
			i++
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
			i++
		default:
			i++
		}
	}
	return -1
}

// closingQuotes finds the end of a multi-line string in line[i:], after up
// to two quotes of the content that touch the delimiter; -1 when the string
// goes on.
func closingQuotes(line string, i int, delim string) int {
	for i < len(line) {
		if delim[0] == '"' && line[i] == '\\' {
			i += 2
			continue
		}
		if strings.HasPrefix(line[i:], delim) {
			i += 3
			for n := 0; n < 2 && i < len(line) && line[i] == delim[0]; n++ {
				i++
			}
			return i
		}
		i++
	}
	return -1
}

// stringEnd returns the offset after the one-line string opening at
// line[i], or -1 when the line ends first.
func stringEnd(line string, i int) int {
	q := line[i]
	for j := i + 1; j < len(line); j++ {
		switch {
		case q == '"' && line[j] == '\\':
			j++
		case line[j] == q:
			return j + 1
		}
	}
	return -1
}

// parseHeader reads the table header starting at line[at] ('['): its name,
// whether it is an array of tables, and the offset of its comment. The name
// is nil when it is not a valid header.
func parseHeader(line string, at int) (path []string, array bool, comment int) {
	i := at + 1
	if i < len(line) && line[i] == '[' {
		array, i = true, i+1
	}
	path, i = parseKey(line, i, ']')
	if i < 0 {
		return nil, array, -1
	}
	i++
	if array {
		if i >= len(line) || line[i] != ']' {
			return nil, array, -1
		}
		i++
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	switch {
	case i == len(line):
		return path, array, -1
	case line[i] == '#':
		return path, array, i
	}
	return nil, array, -1
}

// parseKey reads a dotted key from line[i:] up to the byte stop, and
// returns its parts and the offset of stop; -1 when it is not a key
// followed by stop.
func parseKey(line string, i int, stop byte) ([]string, int) {
	var path []string
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) {
			return nil, -1
		}
		var part string
		switch c := line[i]; {
		case c == '"':
			j := stringEnd(line, i)
			if j < 0 {
				return nil, -1
			}
			s, ok := unquoteBasic(line[i+1 : j-1])
			if !ok {
				return nil, -1
			}
			part, i = s, j
		case c == '\'':
			j := stringEnd(line, i)
			if j < 0 {
				return nil, -1
			}
			part, i = line[i+1:j-1], j
		default:
			j := i
			for j < len(line) && bareKeyByte(line[j]) {
				j++
			}
			if j == i {
				return nil, -1
			}
			part, i = line[i:j], j
		}
		path = append(path, part)
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		switch {
		case i < len(line) && line[i] == '.':
			i++
		case i < len(line) && line[i] == stop:
			return path, i
		default:
			return nil, -1
		}
	}
}

func bareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// unquoteBasic decodes the content of a basic string.
func unquoteBasic(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i >= len(s) {
			return "", false
		}
		switch c := s[i]; c {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"', '\\':
			b.WriteByte(c)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+n > len(s) {
				return "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", false
			}
			b.WriteRune(rune(v))
			i += n
		default:
			return "", false
		}
	}
	return b.String(), true
}

// tomlString is a TOML basic string.
func tomlString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			return "", errBadValue
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// tomlUnquote reads a raw one-line basic or literal string value ("" for
// any other value).
func tomlUnquote(raw string) string {
	if len(raw) < 2 || strings.HasPrefix(raw, `"""`) || strings.HasPrefix(raw, `'''`) {
		return ""
	}
	if raw[0] != '"' && raw[0] != '\'' || stringEnd(raw, 0) != len(raw) {
		return ""
	}
	inner := raw[1 : len(raw)-1]
	if raw[0] == '\'' {
		return inner
	}
	s, ok := unquoteBasic(inner)
	if !ok {
		return ""
	}
	return s
}
