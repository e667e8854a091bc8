package grpcapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/spine"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// SignInCodeTTL is how long a console sign-in code (what `go run .` prints
// in the console's sign-in link instead of the admin token itself) may be
// redeemed.
const SignInCodeTTL = spine.SignInCodeTTL

// signInCodes keep the codes in a key-value bucket by their SHA-256, with
// their expiry, so a code minted through one core replica is redeemed
// through any, once.
type signInCodes struct {
	kv jetstream.KeyValue
	// js reaches the bucket's leader (redeem).
	js jetstream.JetStream
}

// errNoSignInCodes answers when no bucket was given (EnableSignInCodes).
var errNoSignInCodes = errors.New("sign-in codes are not kept by this core")

func signInKey(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

func (s *signInCodes) mint(ctx context.Context, now time.Time) (string, error) {
	if s.kv == nil {
		return "", errNoSignInCodes
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	code := base64.RawURLEncoding.EncodeToString(b)
	exp := strconv.FormatInt(now.Add(SignInCodeTTL).UnixNano(), 10)
	if _, err := s.kv.Create(ctx, signInKey(code), []byte(exp)); err != nil {
		return "", err
	}
	return code, nil
}

// redeem reports whether code was minted, unexpired and not used before; it
// is then used up. Of two replicas redeeming one code at once, one wins.
func (s *signInCodes) redeem(ctx context.Context, code string, now time.Time) (bool, error) {
	if s.kv == nil {
		return false, errNoSignInCodes
	}
	key := signInKey(code)
	// In a cluster, a member that has not yet applied a code minted a
	// moment ago through another member misses it, and the console's first
	// sign-in would fail: the leader confirms a miss.
	value, rev, err := kvmirror.GetConfirmed(ctx, s.js, s.kv, key, 0)
	if errors.Is(err, kvmirror.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	exp, perr := strconv.ParseInt(string(value), 10, 64)
	err = s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	switch {
	case kvmirror.LostRace(err):
		return false, nil // used (or expired and cleared) meanwhile
	case err != nil:
		return false, err
	}
	return perr == nil && now.UnixNano() < exp, nil
}

// CreateSignInCode mints a one-time sign-in code.
func (a *Admin) CreateSignInCode(ctx context.Context, _ *corev1.CreateSignInCodeRequest) (*corev1.CreateSignInCodeResponse, error) {
	if _, err := a.auth.AdminWithoutCatchUp(ctx); err != nil {
		return nil, err
	}
	code, err := a.signIns.mint(ctx, a.now())
	if err != nil {
		return nil, a.storeError(err)
	}
	created(ctx)
	return &corev1.CreateSignInCodeResponse{Code: code, ExpiresIn: int32(SignInCodeTTL / time.Second)}, nil
}

// RedeemSignInCode exchanges a code for the admin token, once.
func (a *Admin) RedeemSignInCode(ctx context.Context, req *corev1.RedeemSignInCodeRequest) (*corev1.RedeemSignInCodeResponse, error) {
	if req.GetCode() == "" {
		return nil, missingParam("code")
	}
	ok, err := a.signIns.redeem(ctx, req.GetCode(), a.now())
	if err != nil {
		return nil, a.storeError(err)
	}
	if !ok {
		return nil, statusError(codes.Unauthenticated, "invalid_sign_in_code", "the sign-in code is unknown, used or expired: print a new link or sign in with the admin token")
	}
	return &corev1.RedeemSignInCodeResponse{Token: string(a.auth.adminToken)}, nil
}

// EnableSignInCodes keeps the console's sign-in codes in kv
// (spine.BucketSignInCodes), on js.
func (a *Admin) EnableSignInCodes(js jetstream.JetStream, kv jetstream.KeyValue) *Admin {
	a.signIns.kv, a.signIns.js = kv, js
	return a
}
