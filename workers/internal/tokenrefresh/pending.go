package tokenrefresh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/secrets"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// PendingTokens keep the tokens a grant answered until core has stored
// them. Once a provider that rotates refresh tokens has answered, the
// refresh token core holds is spent: were the answer lost with the worker's
// memory (core unreachable for the whole job, the worker dying), the next
// attempt would present the spent one and the connection would need a new
// login. With a pending set, the next attempt (a retry, a redelivery,
// another process) stores it instead of asking the provider again.
//
// Leases that also implement PendingTokens (KVLeases does) keep them.
type PendingTokens interface {
	// PutPending keeps sealed under key; an existing value is replaced.
	PutPending(ctx context.Context, key string, sealed []byte) error
	// Pending returns the value under key, nil when there is none.
	Pending(ctx context.Context, key string) ([]byte, error)
	// DeletePending forgets key.
	DeletePending(ctx context.Context, key string) error
}

// PendingTTL is how long a pending token set is kept when no attempt
// stores it (the connection was deleted, or core stayed away): the jobs
// retrying the refresh and the expiry scan find it well within it.
const PendingTTL = 24 * time.Hour

// pendingPurpose derives the key pending sets are sealed with.
const pendingPurpose = "switchboard token refresh pending tokens v1"

var _ PendingTokens = KVLeases{}

// pendingKey is the key of a connection's pending set at a generation,
// beside its lease in the bucket.
func pendingKey(machineID, connectionID string, gen uint64) string {
	return fmt.Sprintf("pending.%s.%s.%d", machineID, connectionID, gen)
}

// PutPending implements PendingTokens with a per-key TTL of PendingTTL.
func (l KVLeases) PutPending(ctx context.Context, key string, sealed []byte) error {
	_, err := l.KV.Create(ctx, key, sealed, jetstream.KeyTTL(PendingTTL))
	if kvmirror.LostRace(err) {
		// Left by an attempt whose set could not be read back: this
		// grant's set is the one that holds now.
		if err := l.KV.Purge(ctx, key); err != nil {
			return fmt.Errorf("keep pending tokens: %w", err)
		}
		_, err = l.KV.Create(ctx, key, sealed, jetstream.KeyTTL(PendingTTL))
	}
	if err != nil {
		return fmt.Errorf("keep pending tokens: %w", err)
	}
	return nil
}

// Pending implements PendingTokens.
func (l KVLeases) Pending(ctx context.Context, key string) ([]byte, error) {
	// In a cluster, a member that has not yet applied tokens kept a moment
	// ago through another member misses them, and the attempt would present
	// the spent refresh token: the leader confirms a miss.
	v, _, err := kvmirror.GetConfirmed(ctx, l.JS, l.KV, key, 0)
	if errors.Is(err, kvmirror.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pending tokens: %w", err)
	}
	return v, nil
}

// DeletePending implements PendingTokens.
func (l KVLeases) DeletePending(ctx context.Context, key string) error {
	if err := l.KV.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget pending tokens: %w", err)
	}
	return nil
}

// pendingBox seals pending sets with a key derived from the admin token:
// they never sit in NATS in plain text, and whoever could open them holds
// the admin token, with which core's admin API answers the same tokens
// (GetConnectionCredentials) anyway.
func pendingBox(adminToken string) *secrets.Box {
	box, err := secrets.NewBox(secrets.Derive([]byte(adminToken), pendingPurpose))
	if err != nil {
		panic(err) // Derive's key is always KeySize bytes
	}
	return box
}

// pendingAAD binds a pending set to its connection, generation and the
// refresh token it was granted from: a set opens only against the very
// material it replaces, never after a new login stored other tokens.
func pendingAAD(key string, creds *corev1.GetConnectionCredentialsResponse) []byte {
	return []byte(key + "\x00" + creds.GetRefreshToken())
}

// sealPending seals req, the tokens to store, for key.
func (r *Refresher) sealPending(key string, creds *corev1.GetConnectionCredentialsResponse, req *corev1.StoreTokensRequest) ([]byte, error) {
	plain, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	return r.box.Seal(plain, pendingAAD(key, creds))
}

// openPending opens a set sealed by sealPending; an error means it does
// not belong to the stored material (or the admin token changed).
func (r *Refresher) openPending(key string, creds *corev1.GetConnectionCredentialsResponse, sealed []byte) (*corev1.StoreTokensRequest, error) {
	plain, err := r.box.Open(sealed, pendingAAD(key, creds))
	if err != nil {
		return nil, err
	}
	req := &corev1.StoreTokensRequest{}
	if err := proto.Unmarshal(plain, req); err != nil {
		return nil, errors.New("pending tokens cannot be decoded")
	}
	return req, nil
}
