// Package oauth holds the OAuth login definitions of subscription providers
// and the protocol calls of their logins: the device flow (RFC 8628), the
// authorization-code flow, both with optional PKCE (RFC 7636), and GitHub
// Copilot's token exchange. It has no state; callers pass the HTTP client.
//
//	providers.go  the provider table and its overrides
//	pkce.go       PKCE verifiers, challenges and random states
//	client.go     device authorization, token polling, code exchange
//	copilot.go    the Copilot token exchange
package oauth

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Flow is how a provider's login runs.
type Flow string

const (
	// FlowDevice is the device authorization grant (RFC 8628).
	FlowDevice Flow = "device"
	// FlowAuthorizationCode is the authorization-code grant with a redirect
	// to a loopback (or provider-hosted) callback.
	FlowAuthorizationCode Flow = "authorization_code"
)

// TokenFormat is how a token request body is encoded.
type TokenFormat string

const (
	TokenForm TokenFormat = "form"
	TokenJSON TokenFormat = "json"
)

// Provider is the login definition of one provider. Its id is also the id of
// the connections the login creates (internal/provider).
type Provider struct {
	ID   string
	Flow Flow
	// PKCE sends an S256 code challenge and later its verifier.
	PKCE         bool
	ClientID     string
	ClientSecret string
	Scope        string
	// DeviceURL is the device authorization endpoint (FlowDevice).
	DeviceURL string
	// TokenURL is the token endpoint: device-code polls, code exchange and
	// refresh.
	TokenURL string
	// AuthorizeURL and RedirectURI are the authorization-code flow's.
	AuthorizeURL string
	RedirectURI  string
	// AuthorizeParams are extra query parameters of the authorize URL.
	AuthorizeParams map[string]string
	TokenFormat     TokenFormat
	// CopilotTokenURL, when set, exchanges the login's token for a
	// short-lived Copilot token (GitHub Copilot).
	CopilotTokenURL string
	// ResourceURL reads the token answer's resource_url as the API host
	// (Qwen).
	ResourceURL bool
	// BaseURL is the connection's base URL; empty keeps the registry's
	// default. A resource_url or Copilot endpoint wins over it.
	BaseURL string
	// Claims are values the login keeps with its connection (in its
	// ProviderData.values), by name: the path of a JWT claim read from the
	// token answer's id_token, else from the access token (Codex: the
	// ChatGPT account id, which internal/provider's DataHeaders send).
	Claims map[string][]string
	// Account names the Claims that together tell the account a login
	// signed in (Codex: the ChatGPT workspace and its member): a new login
	// of the same account renews that account's connection rather than
	// adding another. Empty when the tokens name no account.
	Account []string
	// Refresh is how the connections of the login renew their access
	// token; empty means RefreshGrant.
	Refresh RefreshMethod
}

// RefreshMethod is how a connection's access token is renewed from its
// refresh material.
type RefreshMethod string

const (
	// RefreshGrant is the refresh-token grant (RFC 6749 section 6) at the
	// connection's token URL.
	RefreshGrant RefreshMethod = "grant"
	// RefreshCopilotExchange trades the stored GitHub token (the
	// connection's refresh token) for a new Copilot token at the
	// connection's token URL (GET copilot_internal/v2/token).
	RefreshCopilotExchange RefreshMethod = "copilot-exchange"
)

// RefreshMethod is how p's connections renew their access token.
func (p Provider) RefreshMethod() RefreshMethod {
	if p.Refresh == "" {
		return RefreshGrant
	}
	return p.Refresh
}

// RefreshMethodOf is how the connections of a provider id renew their
// access token: the built-in table's method (overrides change endpoints,
// never the method), RefreshGrant for ids without a login definition
// (connections created with tokens through the admin API).
func RefreshMethodOf(providerID string) RefreshMethod {
	return builtin(providerID).RefreshMethod()
}

// TokenFormatOf is how the token requests of a provider id's connections
// are encoded: the built-in table's format, TokenForm for ids without a
// login definition.
func TokenFormatOf(providerID string) TokenFormat {
	if f := builtin(providerID).TokenFormat; f != "" {
		return f
	}
	return TokenForm
}

// builtin is the built-in login definition of a provider id, the zero
// Provider when it has none.
func builtin(providerID string) Provider {
	for _, p := range defaults() {
		if p.ID == providerID {
			return p
		}
	}
	return Provider{}
}

// Fields are the overridable fields: the key of Overrides and, upper-cased,
// the suffix of the environment variable (SWITCHBOARD_OAUTH_<PROVIDER>_<FIELD>).
var fields = map[string]func(*Provider) *string{
	"client_id":         func(p *Provider) *string { return &p.ClientID },
	"client_secret":     func(p *Provider) *string { return &p.ClientSecret },
	"scope":             func(p *Provider) *string { return &p.Scope },
	"device_url":        func(p *Provider) *string { return &p.DeviceURL },
	"token_url":         func(p *Provider) *string { return &p.TokenURL },
	"authorize_url":     func(p *Provider) *string { return &p.AuthorizeURL },
	"redirect_uri":      func(p *Provider) *string { return &p.RedirectURI },
	"copilot_token_url": func(p *Provider) *string { return &p.CopilotTokenURL },
	"base_url":          func(p *Provider) *string { return &p.BaseURL },
}

// Fields lists the overridable field names, sorted.
func Fields() []string { return slices.Sorted(maps.Keys(fields)) }

// defaults is the built-in table: the public clients of the providers' own
// command-line tools.
func defaults() []Provider {
	return []Provider{
		{
			ID: "github-copilot", Flow: FlowDevice, TokenFormat: TokenForm,
			ClientID:        "Iv1.b507a08c87ecfe98",
			Scope:           "read:user",
			DeviceURL:       "https://github.com/login/device/code",
			TokenURL:        "https://github.com/login/oauth/access_token",
			CopilotTokenURL: "https://api.github.com/copilot_internal/v2/token",
			Refresh:         RefreshCopilotExchange,
		},
		{
			ID: "qwen", Flow: FlowDevice, PKCE: true, TokenFormat: TokenForm, ResourceURL: true,
			ClientID:  "f0304373b74a44d2b584a3fb70ca9e56",
			Scope:     "openid profile email model.completion",
			DeviceURL: "https://chat.qwen.ai/api/v1/oauth2/device/code",
			TokenURL:  "https://chat.qwen.ai/api/v1/oauth2/token",
		},
		{
			ID: "kimi", Flow: FlowDevice, TokenFormat: TokenForm,
			ClientID:  "17e5f671-d194-4dfb-9706-5516cb48c098",
			DeviceURL: "https://auth.kimi.com/api/oauth/device_authorization",
			TokenURL:  "https://auth.kimi.com/api/oauth/token",
		},
		{
			ID: "codex", Flow: FlowAuthorizationCode, PKCE: true, TokenFormat: TokenForm,
			ClientID:     "app_EMoamEEZ73f0CkXaXp7hrann",
			Scope:        "openid profile email offline_access",
			AuthorizeURL: "https://auth.openai.com/oauth/authorize",
			TokenURL:     "https://auth.openai.com/oauth/token",
			RedirectURI:  "http://localhost:1455/auth/callback",
			AuthorizeParams: map[string]string{
				"id_token_add_organizations": "true",
				"codex_cli_simplified_flow":  "true",
			},
			Claims: map[string][]string{
				"chatgpt_account_id": {"https://api.openai.com/auth", "chatgpt_account_id"},
				"chatgpt_user_id":    {"https://api.openai.com/auth", "chatgpt_user_id"},
			},
			// The account id names a workspace, which a team's members
			// share: the user tells them apart.
			Account: []string{"chatgpt_account_id", "chatgpt_user_id"},
		},
		{
			// Claude Pro/Max: Claude Code's client. Its hosted callback
			// page shows "code#state" to paste; a loopback redirect
			// (http://localhost:<port>/callback) is also accepted. The
			// token endpoint reads JSON bodies only, for the code exchange
			// (with the state) and for refreshes.
			ID: "claude", Flow: FlowAuthorizationCode, PKCE: true, TokenFormat: TokenJSON,
			ClientID:        "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
			Scope:           "org:create_api_key user:profile user:inference",
			AuthorizeURL:    "https://claude.com/cai/oauth/authorize",
			TokenURL:        "https://platform.claude.com/v1/oauth/token",
			RedirectURI:     "https://platform.claude.com/oauth/code/callback",
			AuthorizeParams: map[string]string{"code": "true"},
		},
	}
}

// Overrides replace fields of the table: provider id, then field name
// (Fields), then value.
type Overrides map[string]map[string]string

// Providers is the login table in effect.
type Providers struct {
	byID map[string]Provider
	ids  []string
}

// NewProviders returns the built-in table with overrides applied. An
// unknown provider or field, or an endpoint that is not an http(s) URL, is
// an error.
func NewProviders(o Overrides) (*Providers, error) {
	ps := &Providers{byID: map[string]Provider{}}
	for _, p := range defaults() {
		ps.byID[p.ID] = p
		ps.ids = append(ps.ids, p.ID)
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(o)) {
		p, ok := ps.byID[id]
		if !ok {
			errs = append(errs, fmt.Errorf("oauth: unknown provider %q", id))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(o[id])) {
			field, ok := fields[name]
			if !ok {
				errs = append(errs, fmt.Errorf("oauth: %s: unknown field %q", id, name))
				continue
			}
			v := strings.TrimSpace(o[id][name])
			if v == "" {
				continue // empty means unset, as for environment variables
			}
			if strings.HasSuffix(name, "_url") || name == "redirect_uri" {
				if u, err := url.Parse(v); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
					errs = append(errs, fmt.Errorf("oauth: %s: %s must be an http(s) URL", id, name))
					continue
				}
			}
			*field(&p) = v
		}
		ps.byID[id] = p
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ps, nil
}

// Lookup returns a provider's login definition.
func (ps *Providers) Lookup(id string) (Provider, bool) {
	p, ok := ps.byID[id]
	return p, ok
}

// IDs lists the providers in table order.
func (ps *Providers) IDs() []string { return slices.Clone(ps.ids) }

// EnvName is the environment variable overriding a provider's field:
// SWITCHBOARD_OAUTH_<PROVIDER>_<FIELD>, '-' written '_'
// (SWITCHBOARD_OAUTH_GITHUB_COPILOT_TOKEN_URL).
func EnvName(providerID, field string) string {
	return "SWITCHBOARD_OAUTH_" + strings.ToUpper(strings.ReplaceAll(providerID, "-", "_")) + "_" + strings.ToUpper(field)
}

// OverridesFromEnv reads every SWITCHBOARD_OAUTH_<PROVIDER>_<FIELD> that is
// set.
func OverridesFromEnv(getenv func(string) string) Overrides {
	o := Overrides{}
	for _, p := range defaults() {
		for _, f := range Fields() {
			if v := strings.TrimSpace(getenv(EnvName(p.ID, f))); v != "" {
				if o[p.ID] == nil {
					o[p.ID] = map[string]string{}
				}
				o[p.ID][f] = v
			}
		}
	}
	return o
}
