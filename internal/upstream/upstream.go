// Package upstream holds the HTTP clients that call providers: one tuned
// transport per upstream origin and proxy, kept alive and reused, so a busy
// gateway keeps warm connections to each provider. Core and the workers
// share it.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/proxy"
)

// Options tune a set of clients.
type Options struct {
	// Connect bounds dialing and the TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait for the response headers, from the moment
	// the request is written, of a call that does not say otherwise.
	FirstByte time.Duration
	// WholeAnswer bounds it instead for a call made with a context from
	// [WholeAnswer] (zero: FirstByte): an upstream answering whole sends
	// its headers only once its answer is written.
	WholeAnswer time.Duration
	// IdlePerHost is how many idle connections are kept per origin.
	IdlePerHost int
	// NoRedirects answers a redirect instead of following it (a token
	// endpoint must not send a refresh token elsewhere). Without it a
	// redirect is followed within its origin only (ErrRedirectElsewhere).
	NoRedirects bool
	// Wrap decorates each client's transport (trace propagation); nil
	// leaves it as it is.
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Gateway suits model APIs: quick to connect, slow to think, many requests
// in flight to one origin.
var Gateway = Options{Connect: 10 * time.Second, FirstByte: 120 * time.Second, IdlePerHost: 256}

// MaxErrorBody bounds how much of an upstream's error answer is read. The
// message a client is shown fits in far less, and an error answer is read
// before anything is known of it: a body sized from the Content-Length an
// upstream declares would let a hostile upstream make the gateway allocate
// whatever it names, on every request.
const MaxErrorBody = 1 << 20

// maxClients bounds the clients kept; past it they are all dropped.
const maxClients = 1024

// Clients hands out one client per (origin, proxy). It is safe for
// concurrent use.
type Clients struct {
	opts    Options
	mu      sync.Mutex
	clients map[clientKey]*http.Client
}

type clientKey struct{ origin, proxy string }

// NewClients returns an empty set of clients.
func NewClients(o Options) *Clients {
	if o.Connect <= 0 {
		o.Connect = Gateway.Connect
	}
	if o.IdlePerHost <= 0 {
		o.IdlePerHost = 8
	}
	return &Clients{opts: o, clients: make(map[clientKey]*http.Client)}
}

// For returns the client for calls to baseURL through proxyURL: an http,
// https, socks5 or socks5h URL; empty means the standard proxy environment
// variables. Errors never hold the proxy URL, which may carry a password.
func (c *Clients) For(baseURL, proxyURL string) (*http.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("invalid upstream URL")
	}
	key := clientKey{origin: u.Scheme + "://" + u.Host, proxy: proxyURL}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	tr, err := c.transport(proxyURL)
	if err != nil {
		return nil, err
	}
	if len(c.clients) >= maxClients {
		for k, cl := range c.clients {
			cl.CloseIdleConnections()
			delete(c.clients, k)
		}
	}
	var rt http.RoundTripper = tr
	if c.splitBounds() {
		rt = headerBound{next: tr, firstByte: c.opts.FirstByte, wholeAnswer: c.opts.WholeAnswer}
	}
	if c.opts.Wrap != nil {
		rt = c.opts.Wrap(rt)
	}
	cl := &http.Client{Transport: rt, CheckRedirect: sameOrigin}
	if c.opts.NoRedirects {
		cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	c.clients[key] = cl
	return cl, nil
}

// ErrRedirectElsewhere is the error of a call the upstream redirected to
// another origin: the gateway does not follow it, because the request
// carries the connection's credential in headers of the provider's own
// (x-api-key, an account id) that net/http would send along to the new host.
var ErrRedirectElsewhere = errors.New("the upstream redirected to another origin")

// maxRedirects is net/http's own bound.
const maxRedirects = 10

// sameOrigin follows a redirect within the first request's origin (scheme
// and host) only.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || hostPort(req.URL) != hostPort(first) {
		return ErrRedirectElsewhere
	}
	return nil
}

// hostPort is a URL's host, lower-cased, and its port, the scheme's
// default when it names none: https://api.example and
// https://api.example:443 are one origin.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// splitBounds reports whether a whole answer's wait for its headers has a
// bound of its own (headerBound); otherwise every call has the first-byte
// bound, which the transport keeps.
func (c *Clients) splitBounds() bool {
	return c.opts.WholeAnswer > 0 && c.opts.WholeAnswer != c.opts.FirstByte
}

func (c *Clients) transport(proxyURL string) (*http.Transport, error) {
	dialer := &net.Dialer{Timeout: c.opts.Connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * c.opts.IdlePerHost,
		MaxIdleConnsPerHost:   c.opts.IdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.opts.Connect,
		ExpectContinueTimeout: time.Second,
	}
	if !c.splitBounds() {
		// One bound for every call: the transport's own, no wrapper.
		tr.ResponseHeaderTimeout = c.opts.FirstByte
	}
	if proxyURL == "" {
		return tr, nil
	}
	pu, err := url.Parse(proxyURL)
	if err != nil || pu.Host == "" {
		return nil, errors.New("invalid proxy URL")
	}
	switch pu.Scheme {
	case "http", "https":
		tr.Proxy = http.ProxyURL(pu)
	case "socks5", "socks5h":
		d, err := proxy.FromURL(pu, dialer)
		if err != nil {
			return nil, errors.New("invalid socks proxy URL")
		}
		cd, ok := d.(proxy.ContextDialer)
		if !ok {
			return nil, errors.New("socks proxy cannot dial with a context")
		}
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return cd.DialContext(ctx, network, addr)
		}
	default:
		return nil, fmt.Errorf("unsupported proxy scheme %q", pu.Scheme)
	}
	return tr, nil
}
