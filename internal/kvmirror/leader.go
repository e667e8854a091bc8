package kvmirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// GetFromLeader reads key of bucket as the leader of the bucket's stream
// holds it, and answers ErrNotFound for a key it does not hold (or holds
// deleted). A key-value get (jetstream.KeyValue.Get) is a direct get,
// which any replica of a clustered bucket may answer from what it has
// applied: a member a slower link away from the leader misses a key written
// a moment ago through another member. JetStream's message get, which this
// sends, is answered by the leader alone. A caller that must not take a
// miss for an answer (a key handed to it right after it was written, by
// another process) confirms the miss here.
func GetFromLeader(ctx context.Context, js jetstream.JetStream, bucket, key string) (value []byte, revision uint64, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, leaderGetWait)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, 0, err
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js.Options())+"STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, fmt.Errorf("get %s from its leader: %w", bucket, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("get %s from its leader: %w", bucket, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, ErrNotFound
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("get %s from its leader: %w", bucket, resp.Error)
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("get %s from its leader: %w", bucket, jetstream.ErrInvalidJetStreamResponse)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, 0, fmt.Errorf("get %s from its leader: %w", bucket, err)
		}
		// A delete or purge marker, or the marker of a key's expiry.
		if h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
			return nil, 0, ErrNotFound
		}
	}
	return resp.Message.Data, resp.Message.Sequence, nil
}

// leaderGetWait bounds GetFromLeader when its context sets no deadline
// (JetStream's own API timeout).
const leaderGetWait = 5 * time.Second

// apiPrefix is the JetStream API prefix js sends its requests under.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// GetConfirmed reads key of kv as a get does, and confirms a miss with the
// leader of the bucket's stream (GetFromLeader, bounded by confirmWait
// when that is not 0): a reader handed a key right after another process
// wrote it through another member of a cluster must not take that
// member's miss for an answer, and a key found costs nothing more. With js
// nil (no leader to ask) a miss stands. A key not found either way is
// ErrNotFound.
func GetConfirmed(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, key string, confirmWait time.Duration) (value []byte, revision uint64, err error) {
	e, err := kv.Get(ctx, key)
	switch {
	case err == nil:
		return e.Value(), e.Revision(), nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, err
	case js == nil:
		return nil, 0, ErrNotFound
	}
	if confirmWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, confirmWait)
		defer cancel()
	}
	return GetFromLeader(ctx, js, kv.Bucket(), key)
}
