package userauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// JWKS is a cached JSON Web Key Set fetched from a URL. It refetches after
// jwksTTL, or sooner when a token names an unknown key id (at most once per
// jwksMinRefresh).
//
// A fetch belongs to the set, not to the request that needed it: it runs on
// its own context with its own timeout, every request needing the set waits
// for the one fetch in flight (each for as long as its own context lasts),
// and a request that gives up neither cancels the fetch nor spends the
// refresh of the next jwksMinRefresh. Keys the cache holds fresh are
// answered without waiting on a fetch.
type JWKS struct {
	url    string
	client *http.Client
	log    *slog.Logger

	mu      sync.Mutex
	keys    map[string]any    // kid -> *rsa.PublicKey | *ecdsa.PublicKey
	algs    map[string]string // kid -> the key's "alg" member, when it has one
	fetched time.Time         // last successful fetch
	tried   time.Time         // end of the last fetch, successful or not
	lastErr error             // the last fetch's error, nil when it succeeded

	loads singleflight.Group // the fetch in flight, which every waiter shares
}

const (
	jwksTTL          = 10 * time.Minute
	jwksMinRefresh   = 30 * time.Second
	jwksFetchTimeout = 10 * time.Second
	jwksMaxBytes     = 1 << 20
)

// ErrKeysUnavailable is the error of a key the JWKS could not be asked for:
// the URL failed (a refused connection, a timeout, a 5xx, a set that does
// not parse) and the cache does not hold the key, or the request ended
// while it waited for the set. It says nothing about the token.
var ErrKeysUnavailable = errors.New("the signing keys could not be loaded")

// NewJWKS returns a key set read from url.
func NewJWKS(url string, client *http.Client) *JWKS {
	return &JWKS{url: url, client: client, log: slog.New(slog.DiscardHandler)}
}

// Key returns the public key for kid (any key fitting alg when kid is
// empty and the set holds a single key). A key the set does not hold once
// fetched is an error of its own; when the set could not be fetched the
// error is ErrKeysUnavailable.
func (j *JWKS) Key(ctx context.Context, kid, alg string) (any, error) {
	j.mu.Lock()
	k, ok := j.lookup(kid)
	if ok && time.Since(j.fetched) <= jwksTTL {
		defer j.mu.Unlock()
		return j.fit(kid, k, alg)
	}
	j.mu.Unlock()

	err := j.refresh(ctx)
	j.mu.Lock()
	defer j.mu.Unlock()
	k, ok = j.lookup(kid)
	switch {
	case err == nil && ok:
		return j.fit(kid, k, alg)
	case err == nil:
		return nil, fmt.Errorf("no key %q for %s in the JWKS", kid, alg)
	case ok && ctx.Err() == nil:
		return j.fit(kid, k, alg) // serve the stale set while the URL fails
	}
	return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
}

// refresh waits for a fetch of the set (the one in flight, else a new one)
// and returns its error, or the context's once the context ends first.
func (j *JWKS) refresh(ctx context.Context) error {
	select {
	case r := <-j.loads.DoChan("jwks", j.load):
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// load fetches the set on a context of its own and stores the outcome.
// Within jwksMinRefresh of the last fetch it fetches nothing and answers
// that fetch's error: tokens with made-up key ids cannot make every request
// wait on the URL.
func (j *JWKS) load() (any, error) {
	j.mu.Lock()
	if !j.tried.IsZero() && time.Since(j.tried) <= jwksMinRefresh {
		defer j.mu.Unlock()
		return nil, j.lastErr
	}
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	keys, algs, err := j.fetch(ctx)
	if err != nil {
		j.log.Warn("jwks fetch failed: tokens signed with keys the cache does not hold cannot be checked", "err", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tried, j.lastErr = time.Now(), err
	if err == nil {
		j.keys, j.algs, j.fetched = keys, algs, j.tried
	}
	return nil, err
}

// fit pins a key to the algorithms it may verify: its "alg" member when the
// set names one, else its type (RSA for RS*/PS*, EC of the matching curve
// for ES*).
func (j *JWKS) fit(kid string, key any, alg string) (any, error) {
	if want := j.algs[kid]; want != "" && want != alg {
		return nil, fmt.Errorf("key %q is for %s, not %s", kid, want, alg)
	}
	ok := false
	switch k := key.(type) {
	case *rsa.PublicKey:
		ok = strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		curves := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}
		ok = curves[alg] == k.Curve
	}
	if !ok {
		return nil, fmt.Errorf("key %q does not fit %s", kid, alg)
	}
	return key, nil
}

func (j *JWKS) lookup(kid string) (any, bool) {
	if kid == "" && len(j.keys) == 1 {
		for _, k := range j.keys {
			return k, true
		}
	}
	k, ok := j.keys[kid]
	return k, ok
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// fetch reads the set from the URL.
func (j *JWKS) fetch(ctx context.Context) (map[string]any, map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("fetch jwks: status %d", resp.StatusCode)
	}
	return parseJWKS(io.LimitReader(resp.Body, jwksMaxBytes))
}

// ParseJWKS reads a key set's RSA and EC signing keys by kid; other keys
// are skipped.
func ParseJWKS(r io.Reader) (map[string]any, error) {
	keys, _, err := parseJWKS(r)
	return keys, err
}

// parseJWKS is ParseJWKS that also returns the keys' "alg" members by kid.
func parseJWKS(r io.Reader) (map[string]any, map[string]string, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(r).Decode(&set); err != nil {
		return nil, nil, fmt.Errorf("parse jwks: %w", err)
	}
	keys := make(map[string]any, len(set.Keys))
	algs := make(map[string]string)
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			continue
		}
		keys[k.Kid] = pub
		if k.Alg != "" {
			algs[k.Kid] = k.Alg
		}
	}
	if len(keys) == 0 {
		return nil, nil, errors.New("parse jwks: no usable signing key")
	}
	return keys, algs, nil
}

func (k jwk) publicKey() (any, error) {
	b64 := base64.RawURLEncoding
	switch k.Kty {
	case "RSA":
		n, err := b64.DecodeString(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64.DecodeString(k.E)
		if err != nil {
			return nil, err
		}
		if len(n) < 256 || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("unusable rsa key")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errors.New("unsupported curve")
		}
		x, err := b64.DecodeString(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64.DecodeString(k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("bad ec point size")
		}
		point := append(append([]byte{4}, x...), y...)
		return ecdsa.ParseUncompressedPublicKey(curve, point)
	}
	return nil, errors.New("unsupported key type")
}
