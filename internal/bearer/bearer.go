// Package bearer reads the token of an "Authorization: Bearer <token>"
// credential (RFC 6750). The scheme is matched in any case, as RFC 9110
// (11.1) has every authentication scheme; space or a tab may follow it.
package bearer

import "strings"

// Token returns the token of a Bearer credential, surrounding whitespace
// trimmed, or "" when the value holds another scheme or no token.
func Token(authorization string) string {
	auth := strings.TrimSpace(authorization)
	i := strings.IndexAny(auth, " \t")
	if i < 0 || !strings.EqualFold(auth[:i], "bearer") {
		return ""
	}
	return strings.TrimSpace(auth[i+1:])
}
