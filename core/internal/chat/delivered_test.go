package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDeliveredCountsTextOfChunks(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		chars  int64
	}{
		{"content", []string{`{"choices":[{"delta":{"content":"Hello"}}]}`, `{"choices":[{"delta":{"content":" world"}}]}`}, 11},
		{"escapes and multi-byte", []string{`{"choices":[{"delta":{"content":"a\"b\n\u00e9é"}}]}`}, 6},
		{"reasoning and refusal", []string{`{"choices":[{"delta":{"reasoning_content":"abcd","refusal":"no"}}]}`}, 6},
		{"tool call arguments", []string{`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`}, 7},
		{"null content", []string{`{"choices":[{"delta":{"content":null,"role":"assistant"}}]}`}, 0},
		{"truncated", []string{`{"choices":[{"delta":{"content":"abc`}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d delivered
			for _, c := range tt.chunks {
				d.add("", []byte(c))
			}
			assert.Equal(t, tt.chars, d.chars)
		})
	}
}

// Messages and Responses streams are counted in their own shapes: text,
// thinking and tool-call argument deltas, never the events that repeat them.
func TestDeliveredCountsTextOfEachDialect(t *testing.T) {
	type ev struct{ name, data string }
	tests := []struct {
		name   string
		events []ev
		chars  int64
	}{
		{"messages text and thinking", []ev{
			{"message_start", `{"type":"message_start","message":{"content":[],"model":"m"}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"hmm"}}`},
			{"ping", `{"type":"ping"}`},
		}, 8},
		{"messages tool input", []ev{
			{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":1}"}}`},
		}, 7},
		{"responses deltas, not their repeats", []ev{
			{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hello"}`},
			{"response.output_text.done", `{"type":"response.output_text.done","text":"Hello"}`},
			{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","delta":"{}"}`},
			{"response.output_item.done", `{"type":"response.output_item.done","item":{"content":[{"text":"Hello"}]}}`},
		}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d delivered
			for _, e := range tt.events {
				d.add(e.name, []byte(e.data))
			}
			assert.Equal(t, tt.chars, d.chars)
		})
	}
}

func TestDeliveredBill(t *testing.T) {
	d := delivered{chars: 41}
	assert.Equal(t, Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, Partial: true}, d.bill(Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}), "reported usage wins")
	assert.Equal(t, Usage{CompletionTokens: 11, TotalTokens: 11, Partial: true, Estimated: true}, d.bill(Usage{}))
}

func FuzzDeliveredAdd(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"a\u00e9\\"}}]}`))
	f.Add([]byte(`"content": "\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d delivered
		d.add("", b)
		d.add("content_block_delta", b)
		d.add("response.output_text.delta", b)
		if d.chars < 0 || d.chars > 3*int64(len(b)) {
			t.Fatalf("counted %d characters in %d bytes", d.chars, len(b))
		}
	})
}

// add counts one event as the attempt counts an event it relayed.
func (d *delivered) add(event string, data []byte) { d.chars += deliveredChars(event, data) }
