package chat

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// In a cluster a session's next request goes to the connection its last
// one moved it to, through any member, the moment that was recorded: a
// core connected to a member that has not applied the write yet (one a
// slower link away from the bucket's leader; a key-value get is answered
// by the member a client is connected to) does not take the session for
// new and send it elsewhere, away from its warm prompt cache.
func TestSessionAffinityFoundThroughALaggingMember(t *testing.T) {
	ctx := context.Background()
	c := spinetest.StartCluster(t, 3)
	leader, slow := c.LaggingBucket(t, spine.BucketAffinity, spine.Topology{}.Buckets())
	writer := &Service{opts: Options{Affinity: KVAffinity{KV: leader.KV, JS: leader.JS}}}
	reader := &Service{opts: Options{Affinity: KVAffinity{KV: slow.KV, JS: slow.JS}}}

	const rounds = 20
	lost := 0
	for i := range rounds {
		in, err := parse(DialectChat, []byte(`{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		in.header = map[string]string{"x-session-id": fmt.Sprint("sess-", i)}
		key, prefer := writer.affinity(ctx, "m1", in)
		require.Empty(t, prefer, "a new session")
		require.True(t, writer.remember(ctx, key, "conn-b"))
		if _, prefer := reader.affinity(ctx, "m1", in); prefer != "conn-b" {
			lost++
		}
	}
	assert.Zero(t, lost, "sessions sent to another connection, of %d", rounds)
}
