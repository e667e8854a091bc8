package chat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Messages request with more stop sequences than OpenAI takes is the
// client's 400 on stop_sequences when it goes to OpenAI, and goes whole to
// a chat upstream without a known limit.
func TestMessagesStopSequencesByUpstream(t *testing.T) {
	reg := provider.NewRegistry()
	body := []byte(`{"model":"m","max_tokens":64,"stop_sequences":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`)
	in, err := parse(DialectMessages, body)
	require.NoError(t, err)

	spec, ok := reg.Lookup("openai")
	require.True(t, ok)
	_, err = pick(DialectMessages, spec, "gpt-4o").request(in, "gpt-4o")
	var re *RequestError
	require.True(t, errors.As(err, &re), "a request error: %v", err)
	assert.Equal(t, "stop_sequences", re.Param)

	spec, ok = reg.Lookup("groq")
	require.True(t, ok)
	got, err := pick(DialectMessages, spec, "m").request(in, "m")
	require.NoError(t, err)
	var sent struct {
		Stop []string `json:"stop"`
	}
	require.NoError(t, json.Unmarshal(got, &sent), "%s", got)
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, sent.Stop)
}

// A translated answer that stopped on one of the request's stop sequences
// says so (stop_reason stop_sequence, and which) when the upstream tells
// which sequence it stopped on: vLLM's stop_reason, SGLang's matched_stop.
// OpenAI's "stop" does not tell a sequence from the model's own end, nor
// does a token id or a sequence the request did not ask for: end_turn.
func TestMessagesStopSequenceReported(t *testing.T) {
	reg := provider.NewRegistry()
	spec, ok := reg.Lookup("groq")
	require.True(t, ok)
	body := []byte(`{"model":"m","max_tokens":64,"stop_sequences":["###","END"],"messages":[{"role":"user","content":"count"}]}`)
	in, err := parse(DialectMessages, body)
	require.NoError(t, err)
	tr := pick(DialectMessages, spec, "m")

	for _, tc := range []struct {
		name, choice string
		reason       string
		sequence     any
	}{
		{"vLLM", `"finish_reason":"stop","stop_reason":"END"`, "stop_sequence", "END"},
		{"SGLang", `"finish_reason":"stop","matched_stop":"###"`, "stop_sequence", "###"},
		{"OpenAI", `"finish_reason":"stop"`, "end_turn", nil},
		{"end of sequence token", `"finish_reason":"stop","stop_reason":2`, "end_turn", nil},
		{"a sequence not asked for", `"finish_reason":"stop","stop_reason":"<|im_end|>"`, "end_turn", nil},
		{"cut by the cap", `"finish_reason":"length","stop_reason":null`, "max_tokens", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"1 2 3"},` + tc.choice + `}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`
			out, _, err := tr.whole(in, []byte(whole), "m")
			require.NoError(t, err)
			var msg struct {
				StopReason   string `json:"stop_reason"`
				StopSequence any    `json:"stop_sequence"`
			}
			require.NoError(t, json.Unmarshal(out, &msg), "%s", out)
			assert.Equal(t, tc.reason, msg.StopReason, "whole: %s", out)
			assert.Equal(t, tc.sequence, msg.StopSequence, "whole: %s", out)

			et := tr.events(in, "m")
			var delta []byte
			emit := func(name string, data []byte) error {
				if name == "message_delta" {
					delta = append([]byte(nil), data...)
				}
				return nil
			}
			for _, c := range []string{
				`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":"1 2 3"},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},` + tc.choice + `}]}`,
				`[DONE]`,
			} {
				_, err := et.event("", []byte(c), emit)
				require.NoError(t, err)
			}
			complete, err := et.finish(emit)
			require.NoError(t, err)
			require.True(t, complete)
			var ev struct {
				Delta struct {
					StopReason   string `json:"stop_reason"`
					StopSequence any    `json:"stop_sequence"`
				} `json:"delta"`
			}
			require.NoError(t, json.Unmarshal(delta, &ev), "%s", delta)
			assert.Equal(t, tc.reason, ev.Delta.StopReason, "stream: %s", delta)
			assert.Equal(t, tc.sequence, ev.Delta.StopSequence, "stream: %s", delta)
		})
	}
}
