package translate

import (
	"os"
	"testing"
)

func BenchmarkOpenAIToAnthropicRequest(b *testing.B) {
	body, err := os.ReadFile("testdata/request/tools_results.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenAIToAnthropicRequest(body, "claude", AnthropicOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnthropicToOpenAIResponse(b *testing.B) {
	body, err := os.ReadFile("testdata/response/parallel_tools.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := AnthropicToOpenAIResponse(body, "m"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamTextDelta measures the hot path: one text_delta event in,
// one chunk out.
func BenchmarkStreamTextDelta(b *testing.B) {
	tr := NewStreamTranslator("claude-sonnet-4-5", true)
	discard := func([]byte) error { return nil }
	if err := tr.Event("message_start", []byte(`{"type":"message_start","message":{"id":"msg_01","usage":{"input_tokens":10}}}`), discard); err != nil {
		b.Fatal(err)
	}
	if err := tr.Event("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), discard); err != nil {
		b.Fatal(err)
	}
	delta := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, this is a typical token run."}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(delta)))
	for b.Loop() {
		if err := tr.Event("content_block_delta", delta, discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamToolDelta(b *testing.B) {
	tr := NewStreamTranslator("claude-sonnet-4-5", false)
	discard := func([]byte) error { return nil }
	for _, ev := range [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","usage":{"input_tokens":10}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`},
	} {
		if err := tr.Event(ev[0], []byte(ev[1]), discard); err != nil {
			b.Fatal(err)
		}
	}
	delta := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Pa"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Event("content_block_delta", delta, discard); err != nil {
			b.Fatal(err)
		}
	}
}
