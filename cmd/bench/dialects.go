package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// The agents' dialects: Anthropic Messages, translated by the gateway for
// the fixture's OpenAI-shaped connection (the direct target is the fake's
// own /v1/messages), and OpenAI Responses, passed through to it (the direct
// target is the fake's /v1/responses).

// lastEvent is the data of a stream's last event.
func lastEvent(stream []byte) []byte {
	var last []byte
	for line := range bytes.Lines(stream) {
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), sseData); ok {
			last = bytes.TrimSpace(data)
		}
	}
	return last
}

// endsWith reports whether a stream's last event has type typ.
func endsWith(typ string) func([]byte) bool {
	return func(stream []byte) bool {
		var ev struct {
			Type string `json:"type"`
		}
		return json.Unmarshal(lastEvent(stream), &ev) == nil && ev.Type == typ
	}
}

// dialectWorkload is one dialect's workload, streamed or not; text reads
// the answer's text from a whole answer or a stream.
func dialectWorkload(name, path string, stream bool, body func(model string) map[string]any, end string,
	text func(body []byte, stream bool) (string, error), header ...string) workload {
	encode := func(model string) []byte {
		m := body(model)
		if stream {
			m["stream"] = true
		}
		return jsonBody(m)
	}
	if stream {
		name += "-stream"
	}
	return workload{
		name: name,
		targets: func(f *fixture) (*target, *target, error) {
			direct := newTarget("direct", http.MethodPost, f.upstream.URL()+path, encode(upstreamChatModel),
				append([]string{"Authorization", "Bearer " + upstreamKey}, header...)...)
			gateway := newTarget("gateway", http.MethodPost, f.gatewayURL+"/v1"+path, encode(gatewayPrefix+upstreamChatModel),
				append([]string{"Authorization", "Bearer " + f.apiKey}, header...)...)
			direct.stream, gateway.stream = stream, stream
			if stream {
				direct.whole, gateway.whole = endsWith(end), endsWith(end)
			}
			return direct, gateway, nil
		},
		check: func(b, _ []byte) error {
			got, err := text(b, stream)
			if err != nil {
				return err
			}
			if want := upstreamtest.EchoPrefix + benchInput; got != want {
				return fmt.Errorf("answer %q, want %q", got, want)
			}
			return nil
		},
		usage: true, // Messages and Responses are billed as chat is
	}
}

func messagesWorkload(stream bool) workload {
	return dialectWorkload("messages", "/messages", stream, func(model string) map[string]any {
		return map[string]any{"model": model, "max_tokens": 256, "messages": []map[string]string{{"role": "user", "content": benchInput}}}
	}, "message_stop", messagesText, "anthropic-version", "2023-06-01")
}

func responsesWorkload(stream bool) workload {
	return dialectWorkload("responses", "/responses", stream, func(model string) map[string]any {
		return map[string]any{"model": model, "input": benchInput, "store": false}
	}, "response.completed", responsesText)
}

// messagesText is the text of a message, or of a Messages stream's deltas.
func messagesText(body []byte, stream bool) (string, error) {
	if !stream {
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(body, &m); err != nil || len(m.Content) == 0 {
			return "", fmt.Errorf("not a message: %.200s", body)
		}
		return m.Content[0].Text, nil
	}
	if !endsWith("message_stop")(body) {
		return "", fmt.Errorf("a stream that does not end with message_stop")
	}
	var b strings.Builder
	for line := range bytes.Lines(body) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), sseData)
		if !ok {
			continue
		}
		var ev struct {
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && ev.Delta.Type == "text_delta" {
			b.WriteString(ev.Delta.Text)
		}
	}
	return b.String(), nil
}

// responsesText is the output text of a response, or of a Responses
// stream's deltas.
func responsesText(body []byte, stream bool) (string, error) {
	if !stream {
		var r struct {
			Output []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal(body, &r); err != nil || len(r.Output) == 0 || len(r.Output[0].Content) == 0 {
			return "", fmt.Errorf("not a response: %.200s", body)
		}
		return r.Output[0].Content[0].Text, nil
	}
	if !endsWith("response.completed")(body) {
		return "", fmt.Errorf("a stream that does not end with response.completed")
	}
	var b strings.Builder
	for line := range bytes.Lines(body) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), sseData)
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
	}
	return b.String(), nil
}
