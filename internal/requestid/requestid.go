// Package requestid bounds and sanitises a client's X-Request-Id. The value
// is only ever a correlation field: echoed back and kept on the request's
// usage event, never an identity or a de-duplication key.
package requestid

import "github.com/google/uuid"

// MaxLen bounds a request id, in bytes.
const MaxLen = 128

// Sanitize keeps the printable ASCII characters of s (space to tilde), at
// most MaxLen of them. Anything else (control characters, bytes of invalid
// or non-ASCII UTF-8) is left out, so the result is valid UTF-8, fits an
// HTTP header and gRPC metadata, and is safe in a log line.
func Sanitize(s string) string {
	clean := true
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e {
			clean = false
			break
		}
	}
	if clean && len(s) <= MaxLen {
		return s
	}
	b := make([]byte, 0, min(len(s), MaxLen))
	for i := 0; i < len(s) && len(b) < MaxLen; i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e {
			b = append(b, c)
		}
	}
	return string(b)
}

// From returns the sanitised client id, or a new one when nothing is left
// of it.
func From(s string) string {
	if id := Sanitize(s); id != "" {
		return id
	}
	return uuid.NewString()
}
