package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// clientUsage is the usage a client reads of an answer in its dialect: a
// chat completion's (whole, or the stream's usage chunk) or a Messages
// answer's (whole, or the stream's message_delta).
func clientUsage(t *testing.T, d Dialect, r *streamRecorder) (prompt, completion, total int64) {
	t.Helper()
	var u struct {
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			TotalTokens      int64 `json:"total_tokens"`
			InputTokens      int64 `json:"input_tokens"`
			OutputTokens     int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	data := r.whole
	if data == nil {
		for i, e := range r.events {
			if d == DialectChat && strings.Contains(e, `"usage":{`) || d == DialectMessages && r.names[i] == "message_delta" {
				data = []byte(e)
			}
		}
	}
	require.NotNil(t, data, "the client was told no usage: %q", r.events)
	require.NoError(t, json.Unmarshal(data, &u), "%s", data)
	require.NotNil(t, u.Usage, "%s", data)
	if d == DialectMessages {
		return u.Usage.InputTokens, u.Usage.OutputTokens, 0
	}
	return u.Usage.PromptTokens, u.Usage.CompletionTokens, u.Usage.TotalTokens
}

// An answer the gateway stopped at a sequence, from a Responses-only
// upstream (codex) that told no usage, tells its client the usage it is
// billed: the gateway's estimate of what it delivered, and of the request's
// text as its prompt, where the client was told a prompt of 0 tokens and
// billed the estimate.
func TestStoppedAnswerTellsTheClientItsBilledUsage(t *testing.T) {
	const prompt = "please answer me now" // 20 characters: 5 tokens
	bodies := map[Dialect]string{
		DialectChat:     `{"model":"m","stream":false,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}],"stop":["<end of>"]}`,
		DialectMessages: `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"` + prompt + `"}],"stop_sequences":["<end of>"]}`,
	}
	type test struct {
		name   string
		d      Dialect
		stream bool
		deltas []string
		// completion is the estimate of the text delivered.
		completion int64
	}
	var tests []test
	for _, d := range []Dialect{DialectChat, DialectMessages} {
		for _, stream := range []bool{true, false} {
			tests = append(tests,
				test{fmt.Sprintf("%s, streamed %v", d, stream), d, stream, []string{"Hello wor", "ld <end of> never"}, 3},
				test{fmt.Sprintf("%s, streamed %v, stopped before any text", d, stream), d, stream, []string{"<end of> never"}, 0})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := []string{stopCreated, stopItem, stopPart}
			for _, d := range tc.deltas {
				events = append(events, stopDelta(d))
			}
			srv, _ := stopUpstream(t, events...)
			body := bodies[tc.d]
			spec := provider.Spec{Format: provider.FormatResponses, StreamOnly: true}
			in, err := parse(tc.d, []byte(strings.Replace(body, `"stream":false`, `"stream":`+map[bool]string{true: "true", false: "false"}[tc.stream], 1)))
			require.NoError(t, err)
			sink := &streamRecorder{}
			svc := &Service{opts: Options{StallTimeout: time.Minute, FirstEventTimeout: time.Minute}}
			cp := &completion{s: svc, in: in, sink: sink, start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, cp.call(ctx, routing.Target{Spec: spec, Model: "gpt-5"},
				&dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}, Spec: spec, BaseURL: srv.URL, Client: srv.Client()}))
			billed := cp.out.Usage
			require.True(t, billed.Estimated, "%+v", billed)
			require.Equal(t, tc.completion, billed.CompletionTokens, "%+v", billed)
			require.EqualValues(t, 5, billed.PromptTokens, "%+v", billed)

			p, c, total := clientUsage(t, tc.d, sink)
			assert.Equal(t, billed.PromptTokens, p, "the prompt the client is told")
			assert.Equal(t, billed.CompletionTokens, c, "the completion the client is told")
			if tc.d == DialectChat {
				assert.Equal(t, billed.TotalTokens, total, "the total the client is told")
			}
		})
	}
}
