// Package logincli is `switchboard login <provider>`: it drives an OAuth
// login through a running service's admin HTTP API. Device-flow providers
// print a code and a URL and are polled until the user finishes;
// authorization-code providers get a loopback callback listener (or a pasted
// code when the provider redirects to its own page).
package logincli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/internal/oauth"
)

// Options configure one login.
type Options struct {
	// URL is the service's HTTP address, e.g. http://127.0.0.1:8080.
	URL        string
	AdminToken string
	Provider   string
	// Name, ProxyURL: of the new connection (optional).
	Name     string
	ProxyURL string
	// RedirectURI overrides an authorization-code provider's loopback
	// redirect; port 0 picks a free port.
	RedirectURI string
	Out         io.Writer
	// In is read for a pasted authorization code (non-loopback redirects).
	In   io.Reader
	HTTP *http.Client
	// Wait pauses between polls (default: a timer); tests pass a fake.
	Wait func(ctx context.Context, d time.Duration) error
	// Open is called with the URL to open in a browser (default: none; the
	// URL is printed).
	Open func(authorizeURL string)
}

// Connection is the login's connection, as the admin API shows it.
type Connection struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Name     string `json:"name"`
	BaseURL  string `json:"-"`
	// Renewed is set when the login renewed an existing connection (of its
	// account, or the one awaiting a new login), which keeps its id and
	// settings, rather than creating one.
	Renewed bool `json:"-"`
}

// Error is an admin API error answer.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Run performs the login and returns its connection, created or renewed.
func Run(ctx context.Context, o Options) (Connection, error) {
	if o.Provider == "" {
		return Connection{}, errors.New("a provider is required")
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Wait == nil {
		o.Wait = sleep
	}
	o.URL = strings.TrimRight(o.URL, "/")
	var start struct {
		FlowID                  string `json:"flowId"`
		UserCode                string `json:"userCode"`
		VerificationURI         string `json:"verificationUri"`
		VerificationURIComplete string `json:"verificationUriComplete"`
		ExpiresIn               int    `json:"expiresIn"`
		Interval                int    `json:"interval"`
	}
	err := o.call(ctx, "device-code", map[string]any{"name": o.Name, "proxyUrl": o.ProxyURL}, &start)
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Code == "unsupported_flow" {
		return o.authorizationCode(ctx)
	}
	if err != nil {
		return Connection{}, err
	}
	fmt.Fprintf(o.Out, "To sign in to %s, open %s and enter the code %s\n", o.Provider, start.VerificationURI, start.UserCode)
	if start.VerificationURIComplete != "" {
		fmt.Fprintf(o.Out, "(or open %s)\n", start.VerificationURIComplete)
	}
	if o.Open != nil {
		o.Open(firstNonEmpty(start.VerificationURIComplete, start.VerificationURI))
	}
	interval := time.Duration(max(start.Interval, 1)) * time.Second
	deadline := time.Now().Add(time.Duration(start.ExpiresIn)*time.Second + time.Minute)
	for {
		if err := o.Wait(ctx, interval); err != nil {
			return Connection{}, err
		}
		var poll struct {
			Status     string          `json:"status"`
			Interval   int             `json:"interval"`
			Error      string          `json:"error"`
			Connection json.RawMessage `json:"connection"`
			Renewed    bool            `json:"renewed"`
		}
		if err := o.call(ctx, "poll", map[string]any{"flowId": start.FlowID}, &poll); err != nil {
			return Connection{}, err
		}
		if poll.Interval > 0 {
			interval = time.Duration(poll.Interval) * time.Second
		}
		switch poll.Status {
		case "pending":
		case "slow_down":
			if poll.Interval <= 0 {
				interval += 5 * time.Second
			}
		case "complete":
			c, err := decodeConnection(poll.Connection)
			if err == nil {
				c.Renewed = poll.Renewed
				report(o.Out, c)
			}
			return c, err
		case "expired":
			return Connection{}, errors.New("the code expired before the sign-in finished; run the login again")
		case "denied":
			return Connection{}, fmt.Errorf("the sign-in was refused (%s)", firstNonEmpty(poll.Error, "access_denied"))
		default:
			return Connection{}, fmt.Errorf("unexpected poll status %q", poll.Status)
		}
		if time.Now().After(deadline) {
			return Connection{}, errors.New("the sign-in did not finish in time")
		}
	}
}

// authorizationCode runs an authorization-code login: a loopback listener
// catches the redirect, or the user pastes the code.
func (o Options) authorizationCode(ctx context.Context) (Connection, error) {
	redirect := o.RedirectURI
	var ln net.Listener
	if redirect != "" {
		u, err := url.Parse(redirect)
		if err != nil || u.Scheme != "http" {
			return Connection{}, errors.New("the redirect URI must be an http URL")
		}
		if ln, err = net.Listen("tcp", u.Host); err != nil {
			return Connection{}, fmt.Errorf("callback listener: %w", err)
		}
		defer ln.Close()
		// The port is the one listened on (0 picks one); the host stays
		// as named, since a provider that registered "localhost" refuses
		// "127.0.0.1".
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		u.Host = net.JoinHostPort(u.Hostname(), port)
		redirect = u.String()
	}
	var start struct {
		FlowID       string `json:"flowId"`
		AuthorizeURL string `json:"authorizeUrl"`
		State        string `json:"state"`
		RedirectURI  string `json:"redirectUri"`
	}
	if err := o.call(ctx, "authorize", map[string]any{"name": o.Name, "proxyUrl": o.ProxyURL, "redirectUri": redirect}, &start); err != nil {
		return Connection{}, err
	}
	ru, err := url.Parse(start.RedirectURI)
	if err != nil {
		return Connection{}, errors.New("the service answered an invalid redirect URI")
	}
	loopback := ru.Scheme == "http" && isLoopbackHost(ru.Hostname())
	if loopback && ln == nil {
		if ln, err = net.Listen("tcp", ru.Host); err != nil {
			return Connection{}, fmt.Errorf("callback listener on %s: %w", ru.Host, err)
		}
		defer ln.Close()
	}
	fmt.Fprintf(o.Out, "To sign in to %s, open:\n%s\n", o.Provider, start.AuthorizeURL)
	var code, state string
	if loopback {
		codes := make(chan url.Values, 1)
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != ru.Path {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if r.URL.Query().Get("state") != start.State {
				// Not this login's callback (any local page can call
				// it): refused, and the login keeps waiting for its own.
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, "This is not the callback of the sign-in in progress.\n")
				return
			}
			if e := r.URL.Query().Get("error"); e != "" {
				// The provider sent the user back without a code (they
				// declined, or it refused the request).
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, "The sign-in was refused (%s): return to the terminal.\n", errorCode(e))
			} else {
				_, _ = io.WriteString(w, "Sign-in received: you can close this window and return to the terminal.\n")
			}
			select {
			case codes <- r.URL.Query():
			default:
			}
		})}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		if o.Open != nil {
			go o.Open(start.AuthorizeURL)
		}
		fmt.Fprintf(o.Out, "Waiting for the browser to come back to %s ...\n", start.RedirectURI)
		select {
		case q := <-codes:
			if e := q.Get("error"); e != "" {
				return Connection{}, fmt.Errorf("the sign-in was refused (%s)", errorCode(e))
			}
			code, state = q.Get("code"), q.Get("state")
		case <-ctx.Done():
			return Connection{}, ctx.Err()
		}
	} else {
		if o.Open != nil {
			o.Open(start.AuthorizeURL)
		}
		fmt.Fprint(o.Out, "Paste the code shown after signing in: ")
		line, err := bufio.NewReader(orEmpty(o.In)).ReadString('\n')
		if err != nil && line == "" {
			return Connection{}, errors.New("no code was entered")
		}
		code = strings.TrimSpace(line)
	}
	var done struct {
		Connection json.RawMessage `json:"connection"`
		Renewed    bool            `json:"renewed"`
	}
	if err := o.call(ctx, "exchange", map[string]any{"flowId": start.FlowID, "code": code, "state": state}, &done); err != nil {
		return Connection{}, err
	}
	c, err := decodeConnection(done.Connection)
	if err == nil {
		c.Renewed = done.Renewed
		report(o.Out, c)
	}
	return c, err
}

func (o Options) call(ctx context.Context, action string, body, out any) error {
	data, _ := json.Marshal(body)
	endpoint := o.URL + "/api/oauth/" + url.PathEscape(o.Provider) + "/" + action
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("invalid service URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+o.AdminToken)
	resp, err := o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("the service at %s is not reachable: %w", o.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		out := &Error{Status: resp.StatusCode, Message: e.Error.Message}
		if e.Error.Code != nil {
			out.Code = *e.Error.Code
		}
		return out
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("unexpected answer from the service: %w", err)
	}
	return nil
}

func decodeConnection(raw json.RawMessage) (Connection, error) {
	var c struct {
		Connection
		Data struct {
			BaseURL string `json:"baseUrl"`
		} `json:"providerSpecificData"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &c) != nil || c.ID == "" {
		return Connection{}, errors.New("the login finished but the service named no connection")
	}
	c.Connection.BaseURL = c.Data.BaseURL
	return c.Connection, nil
}

func report(w io.Writer, c Connection) {
	if c.Renewed {
		fmt.Fprintf(w, "Signed in again: connection %s (provider %s, name %q) renewed, its settings kept\n", c.ID, c.Provider, c.Name)
		return
	}
	fmt.Fprintf(w, "Signed in: connection %s (provider %s, name %q)\n", c.ID, c.Provider, c.Name)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// errorCode is an OAuth error code from a redirect, or "unknown_error"
// when it is not shaped like one (the redirect's query is anyone's to
// write).
func errorCode(c string) string { return cmp.Or(oauth.CleanCode(c), "unknown_error") }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}
