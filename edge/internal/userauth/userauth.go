// Package userauth authenticates the signed-in users of the GraphQL surface:
// JWT bearer tokens signed with an HS256 secret (SWITCHBOARD_JWT_SECRET) or
// with keys published at a JWKS URL (SWITCHBOARD_JWKS_URL). The token's `sub`
// is the user id and `email` the user's email.
package userauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard/internal/bearer"
)

// User is an authenticated user.
type User struct {
	ID    string
	Email string
}

// Errors of Verify.
var (
	ErrNoToken       = errors.New("no bearer token")
	ErrInvalidToken  = errors.New("invalid token")
	ErrNotConfigured = errors.New("user authentication is not configured")
)

// Claims are the claims switchboard reads.
type Claims struct {
	Email string `json:"email,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks tokens.
type Verifier struct {
	secret   []byte
	jwks     *JWKS
	leeway   time.Duration
	issuer   string
	audience string
	methods  []string
}

// Algorithms accepted: HS256 only with the secret, these only with keys of
// the JWKS (each key used only for the algorithms its type allows).
var (
	secretMethods = []string{"HS256"}
	jwksMethods   = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
)

// Config configures a Verifier: a secret, a JWKS URL, or both (a token with
// an HS256 header is checked with the secret, others against the JWKS).
type Config struct {
	Secret  string
	JWKSURL string
	// Issuer and Audience, when set, must be the token's iss and one of its
	// aud (SWITCHBOARD_JWT_ISSUER, SWITCHBOARD_JWT_AUDIENCE).
	Issuer   string
	Audience string
	// HTTPClient fetches the JWKS; nil means a client with a 10s timeout.
	HTTPClient *http.Client
	// Log receives the JWKS URL's failures; nil discards them.
	Log *slog.Logger
}

// New returns a Verifier. With neither a secret nor a JWKS URL every token
// is refused with ErrNotConfigured.
func New(cfg Config) *Verifier {
	v := &Verifier{leeway: 30 * time.Second, issuer: cfg.Issuer, audience: cfg.Audience}
	if cfg.Secret != "" {
		v.secret = []byte(cfg.Secret)
		v.methods = append(v.methods, secretMethods...)
	}
	if cfg.JWKSURL != "" {
		v.methods = append(v.methods, jwksMethods...)
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Second}
		}
		v.jwks = NewJWKS(cfg.JWKSURL, client)
		if cfg.Log != nil {
			v.jwks.log = cfg.Log
		}
	}
	return v
}

// Configured reports whether any key source is set.
func (v *Verifier) Configured() bool { return v.secret != nil || v.jwks != nil }

// BearerToken extracts the token of an "Authorization: Bearer <token>"
// header value.
func BearerToken(header string) (string, bool) {
	token := bearer.Token(header)
	return token, token != ""
}

// Verify checks a token's algorithm, signature, expiry, subject, and issuer
// and audience when configured. A token refused is ErrInvalidToken; a token
// whose key could not be had because the JWKS URL failed is
// ErrKeysUnavailable, for it may well be valid.
func (v *Verifier) Verify(ctx context.Context, token string) (User, error) {
	if token == "" {
		return User{}, ErrNoToken
	}
	if !v.Configured() {
		return User{}, ErrNotConfigured
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(v.leeway),
	}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	if v.audience != "" {
		opts = append(opts, jwt.WithAudience(v.audience))
	}
	var claims Claims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		if t.Method.Alg() == jwt.SigningMethodHS256.Alg() {
			if v.secret == nil {
				return nil, errors.New("hs256 tokens are not accepted")
			}
			return v.secret, nil
		}
		if v.jwks == nil {
			return nil, fmt.Errorf("%s tokens are not accepted", t.Method.Alg())
		}
		kid, _ := t.Header["kid"].(string)
		return v.jwks.Key(ctx, kid, t.Method.Alg())
	}, opts...)
	if errors.Is(err, ErrKeysUnavailable) {
		return User{}, err
	}
	if err != nil {
		return User{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if claims.Subject == "" {
		return User{}, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	return User{ID: claims.Subject, Email: claims.Email}, nil
}

// Mint signs an HS256 token for a user, valid for ttl (development tokens).
func Mint(secret, userID, email string, ttl time.Duration) (string, error) {
	return MintFor(secret, "switchboard", "", userID, email, ttl)
}

// MintFor is Mint with a chosen issuer and audience (empty: no aud claim),
// for deployments that set SWITCHBOARD_JWT_ISSUER or _AUDIENCE.
func MintFor(secret, issuer, audience, userID, email string, ttl time.Duration) (string, error) {
	if secret == "" {
		return "", errors.New("a JWT secret is required")
	}
	if userID == "" {
		return "", errors.New("a user id is required")
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	now := time.Now()
	claims := Claims{
		Email: email,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			Issuer:    issuer,
		},
	}
	if audience != "" {
		claims.Audience = jwt.ClaimStrings{audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}

type ctxKey struct{}

// result is what the middleware learned about a request's user.
type result struct {
	user User
	err  error
}

// WithResult stores an authentication outcome in ctx.
func WithResult(ctx context.Context, u User, err error) context.Context {
	return context.WithValue(ctx, ctxKey{}, result{u, err})
}

// FromContext returns the request's user, or why there is none.
func FromContext(ctx context.Context) (User, error) {
	r, ok := ctx.Value(ctxKey{}).(result)
	if !ok {
		return User{}, ErrNoToken
	}
	return r.user, r.err
}

// Middleware authenticates the request's bearer token, if any, and stores
// the outcome for FromContext. It never rejects: fields that need a user do.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u User
		err := ErrNoToken
		if token, ok := BearerToken(r.Header.Get("Authorization")); ok {
			u, err = v.Verify(r.Context(), token)
		}
		next.ServeHTTP(w, r.WithContext(WithResult(r.Context(), u, err)))
	})
}
