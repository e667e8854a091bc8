package tokenrefresh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstream"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// GrantTimeout bounds one call to a token endpoint. It is long: a provider
// that rotates refresh tokens (OpenAI's) completes a grant its client gave
// up on, and answers the next one with the spent refresh token by revoking
// the login, and such endpoints have been seen to take 16 s to answer.
const GrantTimeout = 60 * time.Second

// maxAnswer caps the size of a token endpoint's answer.
const maxAnswer = 1 << 20

// Tokens are a token endpoint's successful answer.
type Tokens struct {
	AccessToken string
	// RefreshToken is the rotated refresh token; empty when the endpoint
	// did not send one (the old one stays valid).
	RefreshToken string
	// ExpiresIn is the access token's lifetime; zero when not given.
	ExpiresIn time.Duration
	// ExpiresAt is the access token's expiry when the endpoint names the
	// instant (Copilot); it wins over ExpiresIn.
	ExpiresAt time.Time
}

// Error is a token endpoint's refusal: its HTTP status and OAuth error code.
// Its text never holds a token.
type Error struct {
	Status int
	// Code is the OAuth "error" code (RFC 6749 section 5.2), e.g.
	// "invalid_grant"; empty when the answer named none.
	Code string
	// Reason says what was wrong with an answer that is not an OAuth error.
	Reason string
	// Refused is set when the refresh material was refused for good by an
	// endpoint that names no OAuth error code (a Copilot exchange's 401 or
	// 403).
	Refused bool
	// Wait is how long a temporary refusal asked to be left alone
	// (Retry-After, at most jobs.MaxRetryAfter, the longest the job
	// consumer waits); zero when it named no wait.
	Wait time.Duration
}

// RetryAfter is how long the endpoint asked to wait before it is asked
// again: the job consumer redelivers the job no sooner.
func (e *Error) RetryAfter() time.Duration { return e.Wait }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("token endpoint answered ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" (")
		b.WriteString(e.Code)
		b.WriteString(")")
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// reloginCodes are the OAuth error codes that mean the refresh token is gone
// for good: only a new login helps. invalid_grant is RFC 6749's; the
// refresh_token_* codes are OpenAI's (Codex), which answers them in an error
// object.
var reloginCodes = map[string]bool{
	"invalid_grant":             true,
	"refresh_token_reused":      true,
	"refresh_token_expired":     true,
	"refresh_token_invalidated": true,
}

// Relogin reports whether the refresh token was refused for good.
func (e *Error) Relogin() bool {
	return (e.Refused || reloginCodes[e.Code]) && !e.Temporary()
}

// Temporary reports whether the same request may succeed later: rate limits,
// timeouts, server errors and garbled success answers.
func (e *Error) Temporary() bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusRequestTimeout, e.Status >= 500:
		return true
	case e.Status >= 200 && e.Status < 300:
		// A 2xx without tokens is a broken answer (a captive portal, a
		// proxy's page), unless it names an OAuth error as some
		// providers' 200s do.
		return e.Code == ""
	}
	return false
}

// Client is the OAuth client a grant is made as: its id, and the secret of
// a confidential client (RFC 6749 section 2.3.1), each sent when not empty,
// and how its token endpoint reads a request body (a form unless
// oauth.TokenJSON: Anthropic's).
type Client struct {
	ID     string
	Secret string
	Format oauth.TokenFormat
}

// Grant performs the refresh-token grant (RFC 6749 section 6) at tokenURL
// with client, as oc. The error is an [*Error] when the endpoint answered,
// another error when it could not be reached; neither names the secret.
func Grant(ctx context.Context, client *http.Client, tokenURL, refreshToken string, oc Client) (Tokens, error) {
	ctx, cancel := context.WithTimeout(ctx, GrantTimeout)
	defer cancel()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}
	if oc.ID != "" {
		form.Set("client_id", oc.ID)
	}
	if oc.Secret != "" {
		form.Set("client_secret", oc.Secret)
	}
	sendBody, ctype := oc.Format.Encode(form)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, bytes.NewReader(sendBody))
	if err != nil {
		return Tokens{}, errors.New("invalid token URL")
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json")
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil {
				sent.Store(true)
			}
		},
	}))
	resp, err := client.Do(req)
	if err != nil {
		return Tokens{}, lost(sent.Load(), unreachable(ctx, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Tokens{}, lost(true, unreachable(ctx, err))
	}
	tokens, err := ParseAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), body)
	if e := (*Error)(nil); errors.As(err, &e) && e.Temporary() {
		e.Wait, _ = upstream.RetryAfter(resp.Header, time.Now(), jobs.MaxRetryAfter)
	}
	return tokens, err
}

// Unanswered is a grant the token endpoint was sent but did not answer
// (its time ran out, the connection broke): whether the endpoint spent the
// refresh token is unknown, and it may still be working on it.
type Unanswered struct{ Err error }

func (u *Unanswered) Error() string { return u.Err.Error() }
func (u *Unanswered) Unwrap() error { return u.Err }

// lost is err, as an [*Unanswered] when the request had been sent.
func lost(sent bool, err error) error {
	if sent {
		return &Unanswered{Err: err}
	}
	return err
}

// unreachable describes a failed exchange without its URL.
func unreachable(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("token endpoint did not answer within %s", GrantTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("token endpoint unreachable: %w", err)
}

// answer is a token endpoint's JSON answer, success and error fields alike.
type answer struct {
	AccessToken  string           `json:"access_token"`
	RefreshToken string           `json:"refresh_token"`
	ExpiresIn    seconds          `json:"expires_in"`
	Error        oauth.ErrorField `json:"error"`
}

// seconds reads a lifetime sent as a number or as a string of digits.
type seconds int64

func (s *seconds) UnmarshalJSON(b []byte) error {
	var n json.Number
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		n = json.Number(strings.TrimSpace(str))
	} else if err := json.Unmarshal(b, &n); err != nil {
		return nil // null, or a shape we do not read: no lifetime
	}
	f, err := n.Float64()
	if err != nil || f <= 0 || f > float64(10*365*24*3600) {
		*s = 0
		return nil
	}
	*s = seconds(f)
	return nil
}

// ParseAnswer reads a token endpoint's answer: its status, Content-Type and
// body. Errors never quote the body, which may echo a token.
func ParseAnswer(status int, contentType string, body []byte) (Tokens, error) {
	a, ok := decode(contentType, body)
	code := cleanCode(string(a.Error))
	switch {
	case code != "":
		return Tokens{}, &Error{Status: status, Code: code}
	case status < 200 || status > 299:
		return Tokens{}, &Error{Status: status}
	case !ok:
		return Tokens{}, &Error{Status: status, Reason: "not a token answer"}
	case a.AccessToken == "":
		return Tokens{}, &Error{Status: status, Reason: "no access_token in the answer"}
	}
	return Tokens{
		AccessToken:  a.AccessToken,
		RefreshToken: a.RefreshToken,
		ExpiresIn:    time.Duration(a.ExpiresIn) * time.Second,
	}, nil
}

// decode reads a JSON answer, or a form-encoded one (some endpoints ignore
// Accept: application/json).
func decode(contentType string, body []byte) (answer, bool) {
	var a answer
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '{' {
		if json.Unmarshal(body, &a) == nil {
			return a, true
		}
		return answer{}, false
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return answer{}, false
		}
		a.AccessToken, a.RefreshToken, a.Error = v.Get("access_token"), v.Get("refresh_token"), oauth.ErrorField(v.Get("error"))
		if s := v.Get("expires_in"); s != "" {
			_ = a.ExpiresIn.UnmarshalJSON([]byte(strconv.Quote(s)))
		}
		return a, true
	}
	return answer{}, false
}

// cleanCode keeps an error code fit to store and log: short, and made of the
// characters RFC 6749 allows in codes that identifiers use.
func cleanCode(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 64 {
		s = s[:64]
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return "unknown_error"
		}
	}
	return s
}
