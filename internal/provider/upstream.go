package provider

import (
	"net/http"
	"slices"
	"strings"
)

// BaseURL is the upstream address of a connection: its override, else the
// provider's default, normalised (no trailing slash; an Anthropic-style base
// loses a trailing /messages).
func (s Spec) BaseURL(override string) string {
	base := override
	if base == "" {
		base = s.DefaultBaseURL
	}
	base = strings.TrimRight(base, "/")
	if s.Format == FormatAnthropic {
		base = strings.TrimSuffix(base, "/messages")
	}
	return base
}

// Authorize sets the credential headers of the provider's auth style, and
// the provider's own request headers.
func (s Spec) Authorize(h http.Header, credential string) {
	s.AuthorizeWith(h, credential, nil)
}

// AuthorizeWith is Authorize for a connection with stored values: the
// provider's DataHeaders carry them.
func (s Spec) AuthorizeWith(h http.Header, credential string, values map[string]string) {
	for k, v := range s.Headers {
		if http.CanonicalHeaderKey(k) == "Anthropic-Beta" {
			mergeList(h, k, v)
			continue
		}
		h.Set(k, v)
	}
	for header, key := range s.DataHeaders {
		if v := values[key]; v != "" {
			h.Set(header, v)
		}
	}
	switch s.Auth {
	case AuthXIAPIKey:
		if credential != "" {
			h.Set("xi-api-key", credential)
		}
	case AuthXAPIKey:
		if credential != "" {
			h.Set("x-api-key", credential)
		}
		h.Set("anthropic-version", AnthropicVersion)
	default:
		if credential != "" {
			h.Set("Authorization", "Bearer "+credential)
		}
	}
}

// mergeList adds the comma-separated values of v that h's k does not hold
// yet to its list: the betas a client asked for stay beside the provider's.
func mergeList(h http.Header, k, v string) {
	have := strings.Split(h.Get(k), ",")
	for i := range have {
		have[i] = strings.TrimSpace(have[i])
	}
	list := slices.DeleteFunc(have, func(s string) bool { return s == "" })
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" && !slices.Contains(list, x) {
			list = append(list, x)
		}
	}
	h.Set(k, strings.Join(list, ","))
}
