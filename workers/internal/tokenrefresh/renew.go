package tokenrefresh

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstream"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// renewFunc obtains new tokens from a connection's refresh material at its
// token URL with client (which goes through the connection's proxy),
// authenticating as the connection's client with secret when it is not
// empty. Its error is an [*Error] when the endpoint answered, another error
// when it could not be reached.
type renewFunc func(ctx context.Context, client *http.Client, creds *corev1.GetConnectionCredentialsResponse, secret string) (Tokens, error)

// renewers are the refresh methods by name, picked by the connection's
// provider (oauth.RefreshMethodOf).
var renewers = map[oauth.RefreshMethod]renewFunc{
	oauth.RefreshGrant:           grant,
	oauth.RefreshCopilotExchange: copilotExchange,
}

// grant is the refresh-token grant (RFC 6749 section 6), its body encoded
// as the provider's token endpoint reads it (oauth.TokenFormatOf).
func grant(ctx context.Context, client *http.Client, creds *corev1.GetConnectionCredentialsResponse, secret string) (Tokens, error) {
	oc := Client{ID: creds.GetClientId(), Secret: secret, Format: oauth.TokenFormatOf(creds.GetConnection().GetProvider())}
	return Grant(ctx, client, creds.GetTokenUrl(), creds.GetRefreshToken(), oc)
}

// copilotExchange trades the stored GitHub token (the connection's refresh
// token) for a new Copilot token at the connection's token URL, the
// Copilot exchange URL its login stored. The GitHub token is kept: the
// answer carries no refresh token. A 401 or 403 means the GitHub token no
// longer gives Copilot access: only a new login helps; a temporary refusal
// keeps the wait it asked for, as a grant's does.
func copilotExchange(ctx context.Context, client *http.Client, creds *corev1.GetConnectionCredentialsResponse, _ string) (Tokens, error) {
	p := oauth.Provider{ID: creds.GetConnection().GetProvider(), CopilotTokenURL: creds.GetTokenUrl()}
	ct, err := oauth.ExchangeCopilotToken(ctx, client, p, creds.GetRefreshToken())
	if err != nil {
		var oe *oauth.Error
		if !errors.As(err, &oe) {
			return Tokens{}, err // unreachable; its text names no URL or token
		}
		e := &Error{Status: oe.Status, Code: oe.Code, Reason: "Copilot token exchange: " + oe.Reason}
		if oe.Status == http.StatusUnauthorized || oe.Status == http.StatusForbidden {
			e.Refused, e.Reason = true, "Copilot token exchange refused the GitHub token"
		}
		if e.Temporary() {
			e.Wait, _ = upstream.RetryAfter(oe.Header, time.Now(), jobs.MaxRetryAfter)
		}
		return Tokens{}, e
	}
	return Tokens{AccessToken: ct.Token, ExpiresAt: ct.ExpiresAt}, nil
}
