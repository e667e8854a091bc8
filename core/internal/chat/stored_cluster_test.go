package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// In a cluster a turn continues an answer the moment it was stored, through
// any member: a core connected to a member that has not applied the write
// yet (one a slower link away from the bucket's leader; a key-value get is
// answered by the member a client is connected to) does not refuse
// previous_response_id as not found.
func TestPreviousResponseFoundThroughALaggingMember(t *testing.T) {
	ctx := context.Background()
	c := spinetest.StartCluster(t, 3)
	leader, slow := c.LaggingBucket(t, spine.BucketResponses, spine.Topology{}.Buckets())
	writer := &Service{opts: Options{Responses: KVResponses{KV: leader.KV, JS: leader.JS}}}
	reader := &Service{opts: Options{Responses: KVResponses{KV: slow.KV, JS: slow.JS}}}

	const rounds = 20
	refused := 0
	for i := range rounds {
		first, err := parse(DialectResponses, []byte(`{"model":"gpt-5","input":"my name is Ada"}`))
		require.NoError(t, err)
		require.NoError(t, writer.continueFrom(ctx, "m1", &first))
		id := fmt.Sprintf("resp_%d", i)
		require.NoError(t, writer.store("m1", first, json.RawMessage(`{"id":"`+id+`","object":"response","status":"completed","output":[
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello Ada"}]}]}`)))

		next, err := parse(DialectResponses, []byte(`{"model":"gpt-5","previous_response_id":"`+id+`","input":"what is my name?"}`))
		require.NoError(t, err)
		if err := reader.continueFrom(ctx, "m1", &next); err != nil {
			var re *RequestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "previous_response_not_found", re.Code)
			refused++
			continue
		}
		assert.Contains(t, string(next.body), "hello Ada", "the stored turn goes upstream")
	}
	assert.Zero(t, refused, "turns refused as continuing an unknown answer, of %d", rounds)
}
