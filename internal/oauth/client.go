package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CallTimeout bounds one call to a provider's OAuth endpoint.
const CallTimeout = 15 * time.Second

// maxAnswer caps the size of an OAuth endpoint's answer.
const maxAnswer = 1 << 20

// Device-flow poll outcomes (RFC 8628 section 3.5).
const (
	CodePending      = "authorization_pending"
	CodeSlowDown     = "slow_down"
	CodeExpiredToken = "expired_token"
	CodeAccessDenied = "access_denied"
)

// DeviceGrantType is the grant_type of device-code token requests.
const DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// Error is an OAuth endpoint's refusal: its HTTP status and OAuth error
// code. Its text never holds a token or a code.
type Error struct {
	Status int
	// Code is the OAuth "error" code, e.g. "authorization_pending"; empty
	// when the answer named none.
	Code string
	// Reason says what was wrong with an answer that is not an OAuth error.
	Reason string
	// Header is the answer's header, for a caller that reads its
	// Retry-After (upstream.RetryAfter); nil when it is not kept.
	Header http.Header
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("oauth endpoint answered ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// ErrorCode is the OAuth error code of err, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// DeviceCode is a device authorization answer (RFC 8628 section 3.2).
type DeviceCode struct {
	DeviceCode              string
	UserCode                string
	VerificationURI         string
	VerificationURIComplete string
	// ExpiresIn and Interval are in seconds; Interval defaults to 5.
	ExpiresIn int
	Interval  int
}

// Token is a token endpoint's successful answer.
type Token struct {
	AccessToken  string
	RefreshToken string
	// ExpiresIn is the access token's lifetime in seconds; zero when not
	// given.
	ExpiresIn int64
	// ResourceURL is the API host some providers name (Qwen).
	ResourceURL string
	// IDToken is the OpenID Connect id_token, when the answer has one
	// (Codex: it names the ChatGPT account).
	IDToken string
}

// DeviceAuthorize asks p's device authorization endpoint for a user code.
// challenge is the PKCE S256 challenge, sent when not empty.
func DeviceAuthorize(ctx context.Context, client *http.Client, p Provider, challenge string) (DeviceCode, error) {
	form := url.Values{"client_id": {p.ClientID}}
	if p.ClientSecret != "" {
		// A confidential client authenticates here too (RFC 8628
		// section 3.1), as on its token requests.
		form.Set("client_secret", p.ClientSecret)
	}
	if p.Scope != "" {
		form.Set("scope", p.Scope)
	}
	if challenge != "" {
		form.Set("code_challenge", challenge)
		form.Set("code_challenge_method", "S256")
	}
	status, ctype, body, err := post(ctx, client, p.DeviceURL, TokenForm, form)
	if err != nil {
		return DeviceCode{}, err
	}
	var a struct {
		DeviceCode              string     `json:"device_code"`
		UserCode                string     `json:"user_code"`
		VerificationURI         string     `json:"verification_uri"`
		VerificationURL         string     `json:"verification_url"`
		VerificationURIComplete string     `json:"verification_uri_complete"`
		ExpiresIn               number     `json:"expires_in"`
		Interval                number     `json:"interval"`
		Error                   ErrorField `json:"error"`
	}
	if err := decode(ctype, body, &a); err != nil || a.Error != "" || status/100 != 2 {
		return DeviceCode{}, &Error{Status: status, Code: CleanCode(string(a.Error))}
	}
	d := DeviceCode{
		DeviceCode: a.DeviceCode, UserCode: a.UserCode,
		VerificationURI: a.VerificationURI, VerificationURIComplete: a.VerificationURIComplete,
		ExpiresIn: int(a.ExpiresIn), Interval: int(a.Interval),
	}
	if d.VerificationURI == "" {
		d.VerificationURI = a.VerificationURL
	}
	if d.DeviceCode == "" || d.UserCode == "" || d.VerificationURI == "" {
		return DeviceCode{}, &Error{Status: status, Reason: "not a device authorization answer"}
	}
	if d.Interval <= 0 {
		d.Interval = 5
	}
	if d.ExpiresIn <= 0 {
		d.ExpiresIn = 600
	}
	return d, nil
}

// PollToken asks p's token endpoint whether the device login finished. An
// unfinished login is an [*Error] whose Code is one of the Code* constants.
func PollToken(ctx context.Context, client *http.Client, p Provider, deviceCode, verifier string) (Token, error) {
	form := url.Values{"grant_type": {DeviceGrantType}, "device_code": {deviceCode}, "client_id": {p.ClientID}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	if p.ClientSecret != "" {
		form.Set("client_secret", p.ClientSecret)
	}
	return tokenCall(ctx, client, p.TokenURL, p.TokenFormat, form)
}

// AuthorizeURL is the URL a browser opens for an authorization-code login.
func AuthorizeURL(p Provider, state, challenge, redirectURI string) string {
	q := url.Values{
		"response_type": {"code"},
		"client_id":     {p.ClientID},
		"redirect_uri":  {redirectURI},
		"state":         {state},
	}
	if p.Scope != "" {
		q.Set("scope", p.Scope)
	}
	if challenge != "" {
		q.Set("code_challenge", challenge)
		q.Set("code_challenge_method", "S256")
	}
	for k, v := range p.AuthorizeParams {
		q.Set(k, v)
	}
	sep := "?"
	if strings.Contains(p.AuthorizeURL, "?") {
		sep = "&"
	}
	return p.AuthorizeURL + sep + q.Encode()
}

// ExchangeCode trades an authorization code for tokens (RFC 6749 section
// 4.1.3), with the PKCE verifier when not empty.
func ExchangeCode(ctx context.Context, client *http.Client, p Provider, code, verifier, redirectURI, state string) (Token, error) {
	form := url.Values{
		"grant_type":   {"authorization_code"},
		"code":         {code},
		"redirect_uri": {redirectURI},
		"client_id":    {p.ClientID},
	}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	if p.ClientSecret != "" {
		form.Set("client_secret", p.ClientSecret)
	}
	if p.TokenFormat == TokenJSON && state != "" {
		form.Set("state", state) // Anthropic's JSON token endpoint wants it
	}
	return tokenCall(ctx, client, p.TokenURL, p.TokenFormat, form)
}

func tokenCall(ctx context.Context, client *http.Client, tokenURL string, format TokenFormat, form url.Values) (Token, error) {
	status, ctype, body, err := post(ctx, client, tokenURL, format, form)
	if err != nil {
		return Token{}, err
	}
	var a struct {
		AccessToken  string     `json:"access_token"`
		RefreshToken string     `json:"refresh_token"`
		ExpiresIn    number     `json:"expires_in"`
		ResourceURL  string     `json:"resource_url"`
		IDToken      string     `json:"id_token"`
		Error        ErrorField `json:"error"`
	}
	derr := decode(ctype, body, &a)
	if code := CleanCode(string(a.Error)); code != "" {
		return Token{}, &Error{Status: status, Code: code}
	}
	switch {
	case status/100 != 2:
		return Token{}, &Error{Status: status}
	case derr != nil:
		return Token{}, &Error{Status: status, Reason: "not a token answer"}
	case a.AccessToken == "":
		return Token{}, &Error{Status: status, Reason: "no access_token in the answer"}
	}
	return Token{AccessToken: a.AccessToken, RefreshToken: a.RefreshToken, ExpiresIn: int64(a.ExpiresIn), ResourceURL: a.ResourceURL, IDToken: a.IDToken}, nil
}

// Encode is form as the body of a token request in format f (a JSON
// object of its first values for TokenJSON, else a form), and its content
// type.
func (f TokenFormat) Encode(form url.Values) (body []byte, contentType string) {
	if f != TokenJSON {
		return []byte(form.Encode()), "application/x-www-form-urlencoded"
	}
	m := make(map[string]string, len(form))
	for k := range form {
		m[k] = form.Get(k)
	}
	body, _ = json.Marshal(m)
	return body, "application/json"
}

// post sends form to endpoint as a form or JSON body and reads the answer.
func post(ctx context.Context, client *http.Client, endpoint string, format TokenFormat, form url.Values) (status int, ctype string, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	body, contentType := format.Encode(form)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, errors.New("invalid OAuth endpoint URL")
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	status, header, body, err := do(ctx, client, req)
	return status, header.Get("Content-Type"), body, err
}

// do sends req and reads the answer: its status, header and body.
func do(ctx context.Context, client *http.Client, req *http.Request) (int, http.Header, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, unreachable(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, nil, unreachable(ctx, err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// unreachable describes a failed call without its URL.
func unreachable(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("oauth endpoint did not answer within %s", CallTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("oauth endpoint unreachable: %w", err)
}

// decode reads a JSON answer, or a form-encoded one (GitHub without an
// Accept header) into the same fields.
func decode(contentType string, body []byte, v any) error {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" || mt == "text/plain" {
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return err
		}
		m := map[string]string{}
		for k := range q {
			m[k] = q.Get(k)
		}
		body, _ = json.Marshal(m)
	}
	return json.Unmarshal(body, v)
}

// number reads a JSON number or a string of digits.
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f > 1e12 {
		*n = 0
		return nil
	}
	*n = number(f)
	return nil
}

// ErrorField is a token endpoint's "error" member: RFC 6749's string, or the
// object some providers send instead ({"code": ..., "type": ...}).
type ErrorField string

// UnmarshalJSON reads either shape; any other shape reads as no code.
func (e *ErrorField) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = ErrorField(s)
		return nil
	}
	var o struct {
		Code any    `json:"code"`
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &o) == nil {
		if c, ok := o.Code.(string); ok && c != "" {
			*e = ErrorField(c)
		} else {
			*e = ErrorField(o.Type)
		}
	}
	return nil
}

// CleanCode keeps an OAuth error code only when it looks like one (at most
// 64 letters, digits, '_', '-', '.'), else "", so an answer or a redirect
// cannot smuggle text into logs, pages and errors.
func CleanCode(c string) string {
	if c == "" || len(c) > 64 {
		return ""
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return ""
		}
	}
	return c
}
