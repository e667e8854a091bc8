package oauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Values reads p's Claims from tok: the id_token first, else the access
// token when it is a JWT. Nil when nothing is found. The signature is not
// checked: the tokens came from the provider's token endpoint over the
// gateway's own call, or from the operator (tokens of a login elsewhere),
// and the values only shape requests sent to that same provider with that
// same token. A value is kept only when it is short visible ASCII, fit for
// a header.
func (p Provider) Values(tok Token) map[string]string {
	if len(p.Claims) == 0 {
		return nil
	}
	var out map[string]string
	for name, path := range p.Claims {
		for _, jwt := range []string{tok.IDToken, tok.AccessToken} {
			if v := claim(jwt, path); v != "" {
				if out == nil {
					out = map[string]string{}
				}
				out[name] = v
				break
			}
		}
	}
	return out
}

// maxClaimValue bounds a value kept from a token.
const maxClaimValue = 256

// claim is the string at path in a JWT's payload, "" when the token is not
// a JWT or has no string there.
func claim(jwt string, path []string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 || len(path) == 0 || len(parts[1]) > 64<<10 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var v any
	if json.Unmarshal(payload, &v) != nil {
		return ""
	}
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	if len(s) > maxClaimValue {
		return ""
	}
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return "" // not a value a header can carry as it is
		}
	}
	return s
}
