// Package upstream holds the HTTP clients core calls providers with: one
// tuned transport per upstream origin and proxy, kept alive and reused, so
// that a busy gateway keeps warm connections to each provider.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/proxy"
)

// Timeouts of upstream calls.
type Timeouts struct {
	// Connect bounds dialing and the TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait for the response headers.
	FirstByte time.Duration
}

// DefaultTimeouts suit model APIs: quick to connect, slow to think.
var DefaultTimeouts = Timeouts{Connect: 10 * time.Second, FirstByte: 120 * time.Second}

// Clients hands out one client per (origin, proxy).
type Clients struct {
	timeouts Timeouts
	mu       sync.Mutex
	clients  map[clientKey]*http.Client
}

type clientKey struct{ origin, proxy string }

// NewClients returns an empty set of clients.
func NewClients(t Timeouts) *Clients {
	return &Clients{timeouts: t, clients: make(map[clientKey]*http.Client)}
}

// For returns the client for calls to baseURL through proxyURL (empty: the
// standard proxy environment variables apply).
func (c *Clients) For(baseURL, proxyURL string) (*http.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("invalid upstream base URL")
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
	cl := &http.Client{Transport: tr}
	c.clients[key] = cl
	return cl, nil
}

func (c *Clients) transport(proxyURL string) (*http.Transport, error) {
	dialer := &net.Dialer{Timeout: c.timeouts.Connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.timeouts.Connect,
		ResponseHeaderTimeout: c.timeouts.FirstByte,
		ExpectContinueTimeout: time.Second,
	}
	if proxyURL == "" {
		return tr, nil
	}
	pu, err := url.Parse(proxyURL)
	if err != nil {
		return nil, errors.New("invalid proxy URL")
	}
	switch pu.Scheme {
	case "http", "https":
		tr.Proxy = http.ProxyURL(pu)
	case "socks5", "socks5h":
		d, err := proxy.FromURL(pu, dialer)
		if err != nil {
			return nil, fmt.Errorf("socks proxy: %w", err)
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
