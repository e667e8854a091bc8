package chat

import (
	"encoding/json"
	"runtime"
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

// nestedContent is a content list whose one block wraps the next list,
// depth times, as a tool result's content or a document's content source,
// around one text block; lists[i] is the list i levels above the text's.
func nestedContent(kind string, depth int, text string) (lists []string) {
	list := `[{"type":"text","text":"` + text + `"}]`
	lists = append(lists, list)
	for range depth {
		switch kind {
		case "tool_result":
			list = `[{"type":"tool_result","tool_use_id":"toolu_1","content":` + list + `}]`
		case "document":
			list = `[{"type":"document","source":{"type":"content","content":` + list + `}}]`
		}
		lists = append(lists, list)
	}
	return lists
}

// Content is read as deep as Anthropic nests it (a tool result's blocks, a
// document's content source within them) and a little deeper; a list
// nested past maxContentDepth is counted as text, all its bytes, not read,
// so a megabyte of text 200 tool results or documents deep costs about
// what it costs at the top, where each level read its whole inside again
// (two seconds and 400 MB allocated for one such body).
func TestEstimateReadsNestedContentOnce(t *testing.T) {
	text := strings.Repeat("x", 1<<20)
	for _, kind := range []string{"tool_result", "document"} {
		t.Run(kind, func(t *testing.T) {
			lists := nestedContent(kind, maxContentDepth-1, text)
			shallow := `{"model":"m","messages":[{"role":"user","content":` + lists[len(lists)-1] + `}]}`
			assert.Equal(t, len(text)/4+messageOverhead, estimated(t, shallow), "as deep as Anthropic nests, the text is read")

			lists = nestedContent(kind, 200, text)
			body := `{"model":"m","messages":[{"role":"user","content":` + lists[len(lists)-1] + `}]}`
			in, err := parse(DialectMessages, withMaxTokens([]byte(body)))
			require.NoError(t, err)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out := estimateTokens(in)
			runtime.ReadMemStats(&after)
			var got struct {
				InputTokens int `json:"input_tokens"`
			}
			require.NoError(t, json.Unmarshal(out, &got))
			past := lists[len(lists)-1-maxContentDepth] // the first list not read
			assert.Equal(t, (len(past)+3)/4+messageOverhead, got.InputTokens)
			allocated := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, allocated, uint64(3*len(body)), "bytes allocated for a body of %d", len(body))
		})
	}
}
