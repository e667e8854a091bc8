package store

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Cooldowns is the credential engine's cooldown store over the sb_cooldowns
// bucket: every core replica reads its own mirror and sees the others'
// writes. The bucket forgets records spine.CooldownTTL after their last
// write: past the longest cooldown and its backoff level's retention.
type Cooldowns struct {
	b *kvmirror.Bucket[*busv1.Cooldown]
}

var _ credential.Cooldowns = (*Cooldowns)(nil)

// NewCooldowns returns the store over the bucket.
func NewCooldowns(b *kvmirror.Bucket[*busv1.Cooldown]) *Cooldowns { return &Cooldowns{b: b} }

// cooldownKey is "<connection>.<base64url(model)>": model ids hold
// characters a KV key may not.
func cooldownKey(connectionID, model string) string {
	return string(appendCooldownKey(nil, connectionID, model))
}

func appendCooldownKey(dst []byte, connectionID, model string) []byte {
	dst = append(append(dst, connectionID...), '.')
	return base64.RawURLEncoding.AppendEncode(dst, []byte(model))
}

// Get returns the record of a connection for a model. It runs for every
// candidate of every request: the key is built on the stack.
func (c *Cooldowns) Get(connectionID, model string) (credential.Cooldown, bool) {
	var buf [128]byte
	e, ok := c.b.GetBytes(appendCooldownKey(buf[:0], connectionID, model))
	if !ok {
		return credential.Cooldown{}, false
	}
	v := e.Value
	until := v.GetUntil().AsTime()
	if time.Since(until) > credential.DefaultRetention {
		// Kept by the bucket for the longest cooldown; past its own
		// retention a record's backoff level no longer counts, as in
		// credential.MemoryCooldowns.
		return credential.Cooldown{}, false
	}
	return credential.Cooldown{
		ConnectionID: v.GetConnectionId(),
		Model:        v.GetModel(),
		Until:        until,
		Level:        int(v.GetLevel()),
		Reason:       credential.Reason(v.GetReason()),
		Status:       int(v.GetStatus()),
		Message:      v.GetMessage(),
	}, true
}

// Put stores a record.
func (c *Cooldowns) Put(ctx context.Context, cd credential.Cooldown) error {
	return c.b.Put(ctx, cooldownKey(cd.ConnectionID, cd.Model), &busv1.Cooldown{
		ConnectionId: cd.ConnectionID,
		Model:        cd.Model,
		Until:        timestamppb.New(cd.Until),
		Level:        int32(cd.Level),
		Reason:       string(cd.Reason),
		Status:       int32(cd.Status),
		Message:      cd.Message,
	})
}

// Clear removes a record.
func (c *Cooldowns) Clear(ctx context.Context, connectionID, model string) error {
	return c.b.Delete(ctx, cooldownKey(connectionID, model))
}

// ClearConnection removes every record of a connection and returns how many
// there were.
func (c *Cooldowns) ClearConnection(ctx context.Context, connectionID string) (int, error) {
	var keys []string
	prefix := connectionID + "."
	c.b.Range(func(key string, _ kvmirror.Entry[*busv1.Cooldown]) bool {
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return true
	})
	for _, k := range keys {
		if err := c.b.Delete(ctx, k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
