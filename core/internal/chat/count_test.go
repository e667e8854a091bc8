package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// estimated is the gateway's count_tokens answer for a body.
func estimated(t *testing.T, body string) int {
	t.Helper()
	in, err := parse(DialectMessages, withMaxTokens([]byte(body)))
	require.NoError(t, err)
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	require.NoError(t, json.Unmarshal(estimateTokens(in), &got))
	return got.InputTokens
}

// The estimate counts the text a model reads, four bytes a token, and a
// few tokens a message: not the JSON around it (roles, types, ids,
// cache_control), so the same words cost the same however the client
// wraps them, and a tool round trip costs its name, input and result.
func TestEstimateCountsTheTextAModelReads(t *testing.T) {
	x400 := strings.Repeat("x", 400)
	for _, c := range []struct {
		name string
		body string
		want int
	}{
		{"one character", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 1 + messageOverhead},
		{"400 bytes of text", `{"model":"m","messages":[{"role":"user","content":"` + x400 + `"}]}`, 100 + messageOverhead},
		{"the same as blocks", `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"` + x400[:200] + `","cache_control":{"type":"ephemeral"}},
			{"type":"text","text":"` + x400[:200] + `"}]}]}`, 100 + messageOverhead},
		{"system prompt", `{"model":"m","system":[{"type":"text","text":"` + x400 + `","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":"x"}]}`, 101 + messageOverhead},
		{"tool round trip", `{"model":"m","messages":[
			{"role":"user","content":"read main.go"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"read_file","input":{"path":"main.go"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"package main"}]}]}]}`,
			// "read main.go", "read_file", {"path":"main.go"}, "package main": 51 bytes
			13 + 3*messageOverhead},
		{"earlier thinking left out", `{"model":"m","messages":[
			{"role":"user","content":"x"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"` + x400 + `","signature":"c2ln"},{"type":"text","text":"y"}]},
			{"role":"user","content":"z"}]}`, 1 + 3*messageOverhead},
		{"a text document", `{"model":"m","messages":[{"role":"user","content":[
			{"type":"document","title":"notes","source":{"type":"text","media_type":"text/plain","data":"` + x400 + `"}}]}]}`,
			102 + messageOverhead},
		{"tool definitions", `{"model":"m","messages":[{"role":"user","content":"x"}],
			"tools":[{"name":"get_weather","description":"Get the weather.","input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]}`,
			// "x", "get_weather", "Get the weather.", the schema compacted (57 bytes): 85 bytes
			22 + messageOverhead},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, estimated(t, c.body))
		})
	}
}
