package clitools

import (
	"errors"
	"regexp"
	"strings"
)

// A line-level editor of Codex's config.toml: it sets top-level keys and
// replaces one table, and leaves every other line of the user's file as it
// was (comments, order, other providers and profiles). No TOML library is
// needed for that, and none rewrites a file it did not fully understand.

// tomlHeader matches a table or array-of-tables header line.
var tomlHeader = regexp.MustCompile(`^\s*\[\[?\s*[A-Za-z0-9_.\-" ]+\s*\]\]?\s*(#.*)?$`)

// tomlKey matches a "key = value" line and captures the key.
var tomlKey = regexp.MustCompile(`^\s*([A-Za-z0-9_\-]+)\s*=`)

// errBadValue is a value the editor refuses to write.
var errBadValue = errors.New("value holds control characters")

type tomlDoc struct{ lines []string }

func parseTOML(data []byte) tomlDoc {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return tomlDoc{}
	}
	return tomlDoc{lines: strings.Split(s, "\n")}
}

func (d tomlDoc) bytes() []byte { return []byte(strings.Join(d.lines, "\n") + "\n") }

// topEnd is the index of the first table header (the end of the top-level
// keys).
func (d tomlDoc) topEnd() int {
	for i, l := range d.lines {
		if tomlHeader.MatchString(l) {
			return i
		}
	}
	return len(d.lines)
}

// topValue returns a top-level key's raw value.
func (d tomlDoc) topValue(key string) (string, bool) {
	for _, l := range d.lines[:d.topEnd()] {
		if m := tomlKey.FindStringSubmatch(l); m != nil && m[1] == key {
			return strings.TrimSpace(l[strings.Index(l, "=")+1:]), true
		}
	}
	return "", false
}

// setTop sets a top-level key to a raw value, in place or after the other
// top-level keys.
func (d *tomlDoc) setTop(key, raw string) {
	end := d.topEnd()
	for i, l := range d.lines[:end] {
		if m := tomlKey.FindStringSubmatch(l); m != nil && m[1] == key {
			d.lines[i] = key + " = " + raw
			return
		}
	}
	at := end
	for at > 0 && strings.TrimSpace(d.lines[at-1]) == "" {
		at--
	}
	d.lines = append(d.lines[:at], append([]string{key + " = " + raw}, d.lines[at:]...)...)
}

// removeTop removes a top-level key.
func (d *tomlDoc) removeTop(key string) bool {
	for i, l := range d.lines[:d.topEnd()] {
		if m := tomlKey.FindStringSubmatch(l); m != nil && m[1] == key {
			d.lines = append(d.lines[:i], d.lines[i+1:]...)
			return true
		}
	}
	return false
}

// table returns the line range of a table (header included).
func (d tomlDoc) table(name string) (start, end int, ok bool) {
	for i, l := range d.lines {
		if strings.TrimSpace(l) == "["+name+"]" {
			end = len(d.lines)
			for j := i + 1; j < len(d.lines); j++ {
				if tomlHeader.MatchString(d.lines[j]) {
					end = j
					break
				}
			}
			return i, end, true
		}
	}
	return 0, 0, false
}

// tableValue returns a key's raw value in a table.
func (d tomlDoc) tableValue(name, key string) (string, bool) {
	start, end, ok := d.table(name)
	if !ok {
		return "", false
	}
	for _, l := range d.lines[start+1 : end] {
		if m := tomlKey.FindStringSubmatch(l); m != nil && m[1] == key {
			return strings.TrimSpace(l[strings.Index(l, "=")+1:]), true
		}
	}
	return "", false
}

// removeTable removes a table (with the blank lines that end it).
func (d *tomlDoc) removeTable(name string) bool {
	start, end, ok := d.table(name)
	if !ok {
		return false
	}
	d.lines = append(d.lines[:start], d.lines[end:]...)
	d.trimEnd()
	return true
}

// trimEnd drops trailing blank lines.
func (d *tomlDoc) trimEnd() {
	for len(d.lines) > 0 && strings.TrimSpace(d.lines[len(d.lines)-1]) == "" {
		d.lines = d.lines[:len(d.lines)-1]
	}
}

// setTable replaces a table with the given "key = raw" lines, at the end.
func (d *tomlDoc) setTable(name string, kv [][2]string) {
	d.removeTable(name)
	d.trimEnd()
	if len(d.lines) > 0 {
		d.lines = append(d.lines, "")
	}
	d.lines = append(d.lines, "["+name+"]")
	for _, p := range kv {
		d.lines = append(d.lines, p[0]+" = "+p[1])
	}
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

// tomlUnquote reads a raw basic or literal string value ("" otherwise).
func tomlUnquote(raw string) string {
	if i := strings.Index(raw, " #"); i >= 0 {
		raw = strings.TrimSpace(raw[:i])
	}
	if len(raw) >= 2 && (raw[0] == '"' && raw[len(raw)-1] == '"' || raw[0] == '\'' && raw[len(raw)-1] == '\'') {
		inner := raw[1 : len(raw)-1]
		if raw[0] == '"' {
			inner = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(inner)
		}
		return inner
	}
	return ""
}
