package grpcapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Console sign-in codes: what `go run .` prints in the console's sign-in
// link instead of the admin token itself.
const (
	// SignInCodeTTL is how long a sign-in code may be redeemed.
	SignInCodeTTL = 10 * time.Minute
	// maxSignInCodes bounds the codes waiting to be redeemed.
	maxSignInCodes = 64
)

// signInCodes are the codes of this core, by their SHA-256, with their
// expiry. They live in memory: a code is redeemed on the core that minted it
// (one process with `go run .`); behind several replicas use the token.
type signInCodes struct {
	mu    sync.Mutex
	codes map[[32]byte]time.Time
}

func (s *signInCodes) mint(now time.Time) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	code := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes == nil {
		s.codes = map[[32]byte]time.Time{}
	}
	for h, exp := range s.codes {
		if !now.Before(exp) || len(s.codes) >= maxSignInCodes {
			delete(s.codes, h)
		}
	}
	s.codes[sha256.Sum256([]byte(code))] = now.Add(SignInCodeTTL)
	return code
}

// redeem reports whether code was minted, unexpired and not used before; it
// is then used up.
func (s *signInCodes) redeem(code string, now time.Time) bool {
	h := sha256.Sum256([]byte(code))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.codes[h]
	delete(s.codes, h)
	return ok && now.Before(exp)
}

// CreateSignInCode mints a one-time sign-in code.
func (a *Admin) CreateSignInCode(ctx context.Context, _ *corev1.CreateSignInCodeRequest) (*corev1.CreateSignInCodeResponse, error) {
	if _, err := a.auth.AdminWithoutCatchUp(ctx); err != nil {
		return nil, err
	}
	created(ctx)
	return &corev1.CreateSignInCodeResponse{Code: a.signIns.mint(a.now()), ExpiresIn: int32(SignInCodeTTL / time.Second)}, nil
}

// RedeemSignInCode exchanges a code for the admin token, once.
func (a *Admin) RedeemSignInCode(_ context.Context, req *corev1.RedeemSignInCodeRequest) (*corev1.RedeemSignInCodeResponse, error) {
	if req.GetCode() == "" {
		return nil, missingParam("code")
	}
	if !a.signIns.redeem(req.GetCode(), a.now()) {
		return nil, statusError(codes.Unauthenticated, "invalid_sign_in_code", "the sign-in code is unknown, used or expired: print a new link or sign in with the admin token")
	}
	return &corev1.RedeemSignInCodeResponse{Token: string(a.auth.adminToken)}, nil
}
