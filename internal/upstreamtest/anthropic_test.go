package upstreamtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

const anthropicWeatherTool = `{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object",` +
	`"properties":{"location":{"type":"string"}},"required":["location"]}}`

// anthropicEvent is the part of a Messages stream event the tests inspect.
type anthropicEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// parseAnthropic checks that every event's data is JSON whose type is the
// event name, and returns the parsed events.
func parseAnthropic(t *testing.T, evs []sseEvent) []anthropicEvent {
	t.Helper()
	out := make([]anthropicEvent, len(evs))
	for i, ev := range evs {
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &out[i]), "event data is not JSON: %s", ev.Data)
		require.Equal(t, ev.Event, out[i].Type)
	}
	return out
}

func eventNames(evs []sseEvent) []string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.Event
	}
	return names
}

func TestMessages(t *testing.T) {
	s := upstreamtest.New(t)
	resp, body := post(t, s, upstreamtest.PathMessages,
		`{"model":"claude-sonnet-4-20250514","max_tokens":100,"system":"Be brief.","messages":[{"role":"user","content":"Say Hello World"}]}`,
		anthropicHeaders...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireSameShape(t, decode(t, fixture(t, "anthropic/messages_multi_turn.json")), decode(t, body))
	// messages.json is the same answer with the shorter usage of early 2025.
	older, ours := decode(t, fixture(t, "anthropic/messages.json")).(map[string]any), decode(t, body).(map[string]any)
	requireSameShape(t, older["usage"].(map[string]any)["input_tokens"], ours["usage"].(map[string]any)["input_tokens"])
	delete(older, "usage")
	delete(ours, "usage")
	requireSameShape(t, older, ours)

	var got struct {
		Model   string `json:"model"`
		ID      string `json:"id"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens          int `json:"input_tokens"`
			OutputTokens         int `json:"output_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "claude-sonnet-4-20250514", got.Model)
	require.True(t, strings.HasPrefix(got.ID, "msg_01"))
	require.Equal(t, "echo: Say Hello World", got.Content[0].Text)
	require.Equal(t, "end_turn", got.StopReason)
	require.Equal(t, upstreamtest.Tokens("Be brief.")+upstreamtest.Tokens("Say Hello World"), got.Usage.InputTokens)
	require.Equal(t, upstreamtest.Tokens("echo: Say Hello World"), got.Usage.OutputTokens)
}

func TestMessagesToolUse(t *testing.T) {
	s := upstreamtest.New(t)
	_, body := post(t, s, upstreamtest.PathMessages,
		`{"model":"m","max_tokens":100,"tools":[`+anthropicWeatherTool+`],"messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]}]}`,
		anthropicHeaders...)
	requireSameShape(t, decode(t, fixture(t, "anthropic/messages_with_tools.json")), decode(t, body))
	var got struct {
		Content []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "tool_use", got.StopReason)
	require.Len(t, got.Content, 2)
	require.Equal(t, "tool_use", got.Content[1].Type)
	require.True(t, strings.HasPrefix(got.Content[1].ID, "toolu_01"))
	require.Equal(t, "get_weather", got.Content[1].Name)
	require.JSONEq(t, `{"location":"Weather in Paris?"}`, string(got.Content[1].Input))

	// After the tool result, Claude answers with text.
	_, body = post(t, s, upstreamtest.PathMessages,
		`{"model":"m","max_tokens":100,"tools":[`+anthropicWeatherTool+`],"messages":[`+
			`{"role":"user","content":"Weather in Paris?"},`+
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Sunny"}]}]}]}`,
		anthropicHeaders...)
	require.Contains(t, string(body), `"content":[{"type":"text","text":"echo: Sunny"}],"stop_reason":"end_turn"`)
}

func TestMessagesStream(t *testing.T) {
	s := upstreamtest.New(t)
	evs := stream(t, s, upstreamtest.PathMessages,
		`{"model":"claude-sonnet-4-20250514","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Say Hello World"}]}`,
		anthropicHeaders...)

	// The recording lacks the blank line that ends the last event.
	recorded, err := readSSE(strings.NewReader(string(fixture(t, "anthropic/messages_stream.txt")) + "\n"))
	require.ErrorIs(t, err, io.EOF)
	// The recording has a single text delta; ours has one per word.
	require.Equal(t, eventNames(recorded)[:3], eventNames(evs)[:3])
	require.Equal(t, eventNames(recorded)[3:], eventNames(evs)[len(evs)-4:])
	for _, ev := range evs[3 : len(evs)-3] {
		require.Equal(t, "content_block_delta", ev.Event)
	}
	// The same JSON shapes, and the same whitespace padding.
	byName := map[string]sseEvent{}
	for _, ev := range recorded {
		byName[ev.Event] = ev
	}
	for _, ev := range evs {
		want := byName[ev.Event]
		requireSameShape(t, decode(t, []byte(want.Data)), decode(t, []byte(ev.Data)))
		require.Equal(t, len(want.Data)-len(strings.TrimRight(want.Data[:len(want.Data)-1], " ")),
			len(ev.Data)-len(strings.TrimRight(ev.Data[:len(ev.Data)-1], " ")), "padding of %s", ev.Event)
	}
	require.Equal(t, `{"type": "ping"}`, evs[2].Data)

	parsed := parseAnthropic(t, evs)
	var text strings.Builder
	for _, ev := range parsed[3 : len(parsed)-3] {
		require.Equal(t, "text_delta", ev.Delta.Type)
		text.WriteString(ev.Delta.Text)
	}
	require.Equal(t, "echo: Say Hello World", text.String())
	delta := parsed[len(parsed)-2]
	require.Equal(t, "end_turn", delta.Delta.StopReason)
	require.Equal(t, upstreamtest.Tokens("echo: Say Hello World"), delta.Usage.OutputTokens)
}

func TestMessagesStreamToolUse(t *testing.T) {
	s := upstreamtest.New(t)
	evs := stream(t, s, upstreamtest.PathMessages,
		`{"model":"m","max_tokens":100,"stream":true,"tools":[`+anthropicWeatherTool+`],"messages":[{"role":"user","content":"Weather in Paris?"}]}`,
		anthropicHeaders...)
	parsed := parseAnthropic(t, evs)
	require.Equal(t, "message_start", parsed[0].Type)
	require.Equal(t, "message_stop", parsed[len(parsed)-1].Type)
	require.Equal(t, "tool_use", parsed[len(parsed)-2].Delta.StopReason)

	var args strings.Builder
	var started, stopped []int
	for _, ev := range parsed {
		switch ev.Type {
		case "content_block_start":
			started = append(started, ev.Index)
			if ev.Index == 1 {
				require.Equal(t, "tool_use", ev.ContentBlock.Type)
				require.Equal(t, "get_weather", ev.ContentBlock.Name)
				require.True(t, strings.HasPrefix(ev.ContentBlock.ID, "toolu_01"))
			}
		case "content_block_stop":
			stopped = append(stopped, ev.Index)
		case "content_block_delta":
			if ev.Index == 1 {
				require.Equal(t, "input_json_delta", ev.Delta.Type)
				args.WriteString(ev.Delta.PartialJSON)
			}
		}
	}
	require.Equal(t, []int{0, 1}, started)
	require.Equal(t, []int{0, 1}, stopped)
	require.JSONEq(t, `{"location":"Weather in Paris?"}`, args.String())
}

func TestMessagesValidation(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct {
		name, body string
		header     []string
		message    string
	}{
		{"no version", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, nil, "anthropic-version: header is required"},
		{"bad JSON", `{"model"`, anthropicHeaders, "There was an error parsing the body"},
		{"no model", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, anthropicHeaders, "model: Field required"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, anthropicHeaders, "max_tokens: Field required"},
		{"no messages", `{"model":"m","max_tokens":1}`, anthropicHeaders, "messages: Field required"},
		{"tool_use id", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"functions.f:0","name":"f","input":{}}]}]}`,
			anthropicHeaders, "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{"tool_use_id", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"call:1","content":"x"}]}]}`,
			anthropicHeaders, "messages.0.content.0.tool_result.tool_use_id: String should match pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, s, upstreamtest.PathMessages, tc.body, tc.header...)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			e := requireAnthropicError(t, body)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func requireAnthropicError(t *testing.T, body []byte) anthropicError {
	t.Helper()
	var e anthropicError
	require.NoError(t, json.Unmarshal(body, &e), "not JSON: %s", body)
	require.Equal(t, "error", e.Type)
	require.NotEmpty(t, e.Error.Type)
	require.NotEmpty(t, e.Error.Message)
	return e
}
