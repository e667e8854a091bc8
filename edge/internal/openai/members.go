package openai

import "strings"

// foldsTo reports whether key matches one of names only without regard to
// case, as encoding/json matches a struct's fields: such a body is left to
// encoding/json, so that it reads the same either way.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		// Not only ASCII: encoding/json matches "ſ" to "s" and "K" to "k".
		if strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}
