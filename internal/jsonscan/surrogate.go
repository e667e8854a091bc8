package jsonscan

import (
	"bytes"
	"strconv"
)

// LoneSurrogate reports whether JSON text holds a \uD800-\uDFFF escape
// that is not part of a surrogate pair: valid JSON, but not text, and
// upstreams break on it.
func LoneSurrogate(b []byte) bool {
	i := 0
	for {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+5 >= len(b) {
			return false
		}
		if b[i+1] != 'u' {
			i += 2 // past the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(b[i+2 : i+6])
		if !ok {
			i++
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if lo, ok := hex4(b[i+8 : i+12]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 12
					continue
				}
			}
			return true
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		}
		i += 6
	}
}

func hex4(b []byte) (rune, bool) {
	v, err := strconv.ParseUint(string(b), 16, 32)
	return rune(v), err == nil
}
