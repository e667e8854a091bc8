package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// CopilotToken is GitHub Copilot's short-lived API token, exchanged from a
// GitHub OAuth token.
type CopilotToken struct {
	Token     string
	ExpiresAt time.Time
	// APIURL is the API host Copilot names for the account
	// (endpoints.api), empty when it names none.
	APIURL string
}

// ExchangeCopilotToken trades a GitHub token for a Copilot token at
// p.CopilotTokenURL (GET copilot_internal/v2/token). A refusal is an
// [*Error] that keeps the answer's header (a 429's Retry-After).
func ExchangeCopilotToken(ctx context.Context, client *http.Client, p Provider, githubToken string) (CopilotToken, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.CopilotTokenURL, nil)
	if err != nil {
		return CopilotToken{}, errors.New("invalid Copilot token URL")
	}
	req.Header.Set("Authorization", "token "+githubToken)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "switchboard")
	status, header, body, err := do(ctx, client, req)
	if err != nil {
		return CopilotToken{}, err
	}
	var a struct {
		Token     string `json:"token"`
		ExpiresAt number `json:"expires_at"`
		Endpoints struct {
			API string `json:"api"`
		} `json:"endpoints"`
		ErrorDetails struct {
			Message string `json:"message"`
		} `json:"error_details"`
	}
	if status/100 != 2 {
		return CopilotToken{}, &Error{Status: status, Reason: "copilot token exchange refused", Header: header}
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Token == "" {
		return CopilotToken{}, &Error{Status: status, Reason: "not a Copilot token answer"}
	}
	t := CopilotToken{Token: a.Token, APIURL: a.Endpoints.API}
	if a.ExpiresAt > 0 {
		t.ExpiresAt = time.Unix(int64(a.ExpiresAt), 0)
	}
	return t, nil
}
