package store

import (
	"context"
	"encoding/base64"
	"slices"
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
	return fromBus(v), true
}

func fromBus(v *busv1.Cooldown) credential.Cooldown {
	return credential.Cooldown{
		ConnectionID: v.GetConnectionId(),
		Model:        v.GetModel(),
		Until:        v.GetUntil().AsTime(),
		Level:        int(v.GetLevel()),
		Reason:       credential.Reason(v.GetReason()),
		Status:       int(v.GetStatus()),
		Message:      v.GetMessage(),
	}
}

// Put stores a record unless the bucket holds one that ends later, with
// compare-and-swap: a longer cooldown another replica wrote a moment ago
// is kept even when this replica's mirror has not seen it yet.
func (c *Cooldowns) Put(ctx context.Context, cd credential.Cooldown) error {
	until := timestamppb.New(cd.Until)
	_, err := c.b.Upsert(ctx, cooldownKey(cd.ConnectionID, cd.Model), func(v *busv1.Cooldown, ok bool) error {
		if ok && v.GetUntil().AsTime().After(cd.Until) {
			return kvmirror.ErrSkip
		}
		v.ConnectionId = cd.ConnectionID
		v.Model = cd.Model
		v.Until = until
		v.Level = int32(cd.Level)
		v.Reason = string(cd.Reason)
		v.Status = int32(cd.Status)
		v.Message = cd.Message
		return nil
	})
	return err
}

// Clear removes the record of cd's connection and model if it is still cd,
// with compare-and-swap: a record another replica wrote since stays.
func (c *Cooldowns) Clear(ctx context.Context, cd credential.Cooldown) error {
	_, err := c.b.DeleteIf(ctx, cooldownKey(cd.ConnectionID, cd.Model), func(v *busv1.Cooldown) bool {
		return fromBus(v).Same(cd)
	})
	return err
}

// ClearConnection removes a connection's records, or with reasons only
// those for one of them (each only while it still is: one another failure
// rewrote since stays), and returns how many it removed.
func (c *Cooldowns) ClearConnection(ctx context.Context, connectionID string, reasons ...credential.Reason) (int, error) {
	match := func(v *busv1.Cooldown) bool {
		return len(reasons) == 0 || slices.Contains(reasons, credential.Reason(v.GetReason()))
	}
	var keys []string
	prefix := connectionID + "."
	c.b.Range(func(key string, e kvmirror.Entry[*busv1.Cooldown]) bool {
		if strings.HasPrefix(key, prefix) && match(e.Value) {
			keys = append(keys, key)
		}
		return true
	})
	n := 0
	for _, k := range keys {
		deleted := true
		var err error
		if len(reasons) == 0 {
			err = c.b.Delete(ctx, k)
		} else {
			deleted, err = c.b.DeleteIf(ctx, k, match)
		}
		if err != nil {
			return n, err
		}
		if deleted {
			n++
		}
	}
	return n, nil
}
