package chat

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
)

func TestAssembleResponsesStream(t *testing.T) {
	item := `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`
	sse := func(events ...string) string {
		var b strings.Builder
		for _, e := range events {
			b.WriteString("data: " + e + "\n\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, stream, want string
		bad                bool
	}{
		{"completed carries the output", sse(`{"type":"response.created","response":{"id":"r"}}`,
			`{"type":"response.completed","response":{"id":"r","object":"response","output":[`+item+`]}}`),
			`{"id":"r","object":"response","output":[` + item + `]}`, false},
		{"empty output filled from the done items", sse(`{"type":"response.output_item.done","output_index":0,"item":`+item+`}`,
			`{"type":"response.completed","response":{"id":"r","object":"response","output":[]}}`),
			`{"id":"r","object":"response","output":[` + item + `]}`, false},
		{"failed", sse(`{"type":"response.failed","response":{"id":"r"}}`), "", true},
		{"failed, with the backend's error", sse(`{"type":"response.failed","response":{"id":"r","error":{"code":"context_length_exceeded","message":"too long"}}}`), "", true},
		{"no completion", sse(`{"type":"response.created","response":{"id":"r"}}`), "", true},
		{"malformed", "data: {nope\n\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := 0
			got, err := toResponses{}.assemble(strings.NewReader(tc.stream), func() { events++ })
			if tc.bad {
				if strings.Contains(tc.name, "backend's error") {
					// The attempt passes it on with its status (failEvent).
					var ev *eventError
					require.ErrorAs(t, err, &ev)
					assert.Equal(t, 400, ev.status, "the client's to act on")
					assert.Contains(t, string(ev.body), "context_length_exceeded")
					return
				}
				if errors.Is(err, errUpstreamEvent) {
					return // an error without its message: the attempt's 502 (failEvent)
				}
				var ue *credential.UpstreamError
				require.True(t, errors.As(err, &ue), "%v", err)
				assert.Equal(t, 502, ue.Status, "the next connection may try")
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
			assert.Positive(t, events)
		})
	}
}
