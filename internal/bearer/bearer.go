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

// NotBearer reports whether a value holds a credential that is not a
// Bearer one, so Token reads nothing of it: another scheme (Basic ...),
// or a token sent without a scheme. A blank value is not, nor is the
// Bearer scheme with no token (an HTTP server trims "Bearer " to
// "Bearer").
func NotBearer(authorization string) bool {
	auth := strings.TrimSpace(authorization)
	if auth == "" {
		return false
	}
	scheme := auth
	if i := strings.IndexAny(auth, " \t"); i >= 0 {
		scheme = auth[:i]
	}
	return !strings.EqualFold(scheme, "bearer")
}
