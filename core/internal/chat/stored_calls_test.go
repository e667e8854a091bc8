package chat

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A turn continuing a stored answer that called a custom tool (GPT-5's
// freeform tools, Codex's apply_patch) sends the call before its output,
// as it does a function call: OpenAI refuses an output whose call it
// cannot find. Reasoning, whose ids only the answering upstream knows,
// stays out.
func TestContinuingAStoredAnswerKeepsItsToolCalls(t *testing.T) {
	svc := &Service{opts: Options{Responses: &memoryResponses{records: map[string][]byte{}}}}
	ctx := context.Background()
	in, err := parse(DialectResponses, []byte(`{"model":"gpt-5","input":"patch the file"}`))
	require.NoError(t, err)
	require.NoError(t, svc.continueFrom(ctx, "m1", &in))
	answer := `{"id":"resp_1","object":"response","status":"completed","output":[
		{"id":"rs_1","type":"reasoning","summary":[]},
		{"id":"ctc_1","type":"custom_tool_call","status":"completed","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch"},
		{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_f","name":"exec","arguments":"{}"}]}`
	require.NoError(t, svc.store("m1", in, json.RawMessage(answer)))

	next, err := parse(DialectResponses, []byte(`{"model":"gpt-5","previous_response_id":"resp_1","input":[
		{"type":"custom_tool_call_output","call_id":"call_p","output":"done"},
		{"type":"function_call_output","call_id":"call_f","output":"ok"}]}`))
	require.NoError(t, err)
	require.NoError(t, svc.continueFrom(ctx, "m1", &next))
	var sent struct{ Input []map[string]any }
	require.NoError(t, json.Unmarshal(next.body, &sent))
	var types []string
	for _, it := range sent.Input {
		typ, _ := it["type"].(string) // a message may have none
		types = append(types, typ)
	}
	assert.Equal(t, []string{"", "custom_tool_call", "function_call", "custom_tool_call_output", "function_call_output"}, types, "%s", next.body)
	assert.Equal(t, map[string]any{"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": "*** Begin Patch"}, sent.Input[1])
}
