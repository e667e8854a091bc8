package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Anthropic requires max_tokens; OpenAI does not. A request that gives
// none is sent one by what the upstream does with it.
const (
	// DefaultMaxTokens is a whole answer's max_tokens: Anthropic sends a
	// non-streamed answer only once it is written, so its cap must let it
	// finish within the gateway's whole-answer timeout.
	DefaultMaxTokens = 4096
	// FallbackMaxOutput is a streamed answer's max_tokens for a model whose
	// limit is not known (AnthropicOptions.MaxOutput 0): Claude Code's own
	// default, so Anthropic-compatible servers that serve Claude Code take
	// it, and no Claude 4 model's limit is lower (Opus 4 and 4.1: 32,000).
	FallbackMaxOutput = 32000
)

// AnthropicOptions are what a translated /v1/messages request must fit of
// its upstream model.
type AnthropicOptions struct {
	// MaxOutput is the model's output limit (0: not known). A streamed
	// request without an output cap asks for all of it, so a long answer
	// (Codex's patches: the Codex CLI never sends max_output_tokens) is not
	// cut short.
	MaxOutput int64
}

// uncappedMaxTokens is the max_tokens of a request that gives none.
func (o AnthropicOptions) uncappedMaxTokens(stream bool) int64 {
	switch {
	case !stream:
		if o.MaxOutput > 0 {
			return min(DefaultMaxTokens, o.MaxOutput)
		}
		return DefaultMaxTokens
	case o.MaxOutput > 0:
		return o.MaxOutput
	}
	return FallbackMaxOutput
}

// minThinkingBudget is Anthropic's smallest thinking budget; it is also the
// room kept for the answer when a budget must shrink to fit max_tokens.
const minThinkingBudget = 1024

// fitBudget is a thinking budget shrunk to leave room for the answer within
// maxTokens (0: no room to think). OpenAI's max_completion_tokens covers
// reasoning and answer, as Anthropic's max_tokens does.
func fitBudget(budget, maxTokens int64) int64 {
	if budget > 0 && budget > maxTokens-minThinkingBudget {
		budget = maxTokens - minThinkingBudget
		if budget < minThinkingBudget {
			budget = 0
		}
	}
	return budget
}

// contextLimitRefusal is the message of Anthropic's 400 to a request whose
// input and max_tokens pass the model's context window: "input length and
// `max_tokens` exceed context limit: 197626 + 128000 > 200000, decrease
// input length or `max_tokens` and try again".
var contextLimitRefusal = regexp.MustCompile("input length and `?max_tokens`? exceed context limit: ([0-9]+) \\+ ([0-9]+) > ([0-9]+)")

// Sampling is what a client's request asks of the sampling: its
// temperature, top_p and top_k (nil: not named).
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	TopK        *int64   `json:"top_k,omitempty"`
}

// ChatSampling reads a chat.completions request's sampling as the
// translation does (OpenAIToAnthropicRequest).
func ChatSampling(body []byte) Sampling {
	var s Sampling
	_ = json.Unmarshal(body, &s) // a body the translation read: what it holds
	return s
}

// ResponsesSampling reads a Responses request's sampling as the
// translation does (ResponsesToOpenAIRequest): it has no top_k.
func ResponsesSampling(body []byte) Sampling {
	s := ChatSampling(body)
	s.TopK = nil
	return s
}

// anthropic is the sampling a /v1/messages request is sent of s, with
// thinking on or off.
func (s Sampling) anthropic(thinks bool) Sampling {
	if t := s.Temperature; t != nil && *t > 1 {
		one := 1.0 // OpenAI allows 0..2, Anthropic 0..1
		s.Temperature = &one
	}
	if thinks {
		// With thinking on, Anthropic refuses temperature other than 1,
		// top_k, and top_p below 0.95.
		s.Temperature, s.TopK = nil, nil
		if p := s.TopP; p != nil && *p < 0.95 {
			s.TopP = nil
		}
	}
	if s.Temperature != nil && s.TopP != nil {
		// Current Claude models refuse both at once ("use only one");
		// temperature is the knob clients mean.
		s.TopP = nil
	}
	return s
}

// FitContextWindow answers Anthropic's refusal of a request whose input and
// max_tokens pass the model's context window (errBody, its 400's body): it
// returns body, the refused /v1/messages request, asking for what the window
// leaves (its limit less the input), with its thinking budget shrunk below
// that as a translated request's is. A request left without thinking is
// sent the client's sampling (client) as one translated without thinking
// is: thinking on, the translation left it out. ok is false when errBody is
// not that refusal or its numbers cannot be read, and when the window
// leaves no more than body asked for or no room at all.
func FitContextWindow(body, errBody []byte, client Sampling) (fitted []byte, ok bool) {
	m := contextLimitRefusal.FindStringSubmatch(parseAnthropicError(errBody).Message)
	if m == nil {
		return nil, false
	}
	input, err1 := strconv.ParseInt(m[1], 10, 64)
	limit, err2 := strconv.ParseInt(m[3], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	var req map[string]json.RawMessage
	var asked int64
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["max_tokens"], &asked) != nil {
		return nil, false
	}
	var thinking msgThinking // adaptive thinking has no budget to fit
	thinks := json.Unmarshal(req["thinking"], &thinking) == nil && thinking.Type == "enabled"
	// With less room than an answer and the smallest budget need, thinking
	// is left out (fitBudget), however little room there is: an answer
	// without thinking rather than the refusal.
	room := limit - input
	if room < 1 || room >= asked {
		return nil, false
	}
	req["max_tokens"] = strconv.AppendInt(nil, room, 10)
	if thinks {
		if thinking.BudgetTokens = fitBudget(thinking.BudgetTokens, room); thinking.BudgetTokens > 0 {
			req["thinking"], _ = marshal(&thinking) // two plain fields: it cannot fail
		} else {
			delete(req, "thinking")
			delete(req, "temperature")
			delete(req, "top_p")
			delete(req, "top_k")
			sent, _ := marshal(client.anthropic(false)) // three numbers: it cannot fail
			_ = json.Unmarshal(sent, &req)
		}
	}
	out, err := marshal(req)
	if err != nil {
		return nil, false
	}
	return out, true
}

// reasoningEfforts pairs OpenAI's reasoning efforts with Anthropic thinking
// budgets, in rising order; both directions read it (thinkingBudget and
// reasoningEffort), so an effort sent one way comes back as itself. Every
// reasoning model takes the portable ones: OpenAI's codex models refuse
// minimal and xhigh ("Supported values are: 'low', 'medium', and 'high'"),
// and gpt-5.1 refuses minimal.
var reasoningEfforts = [...]struct {
	effort   string
	budget   int64
	portable bool
}{
	{"minimal", 1024, false},
	{"low", 2048, true},
	{"medium", 8192, true},
	{"high", 16384, true},
	{"xhigh", 32768, false},
}

// thinkingBudget maps OpenAI's reasoning_effort to a thinking budget (0:
// no thinking); ok is false for an unknown effort.
func thinkingBudget(effort string) (budget int64, ok bool) {
	if effort == "" || effort == "none" {
		return 0, true
	}
	for _, e := range reasoningEfforts {
		if e.effort == effort {
			return e.budget, true
		}
	}
	return 0, false
}

// reasoningEffort maps a thinking budget to the portable reasoning effort
// it pays for: the highest whose budget it reaches, and the lowest for a
// smaller budget.
func reasoningEffort(budget int64) string {
	effort := ""
	for _, e := range reasoningEfforts {
		if !e.portable {
			continue
		}
		if effort == "" || budget >= e.budget {
			effort = e.effort
		}
	}
	return effort
}

// placeholderUserText opens a conversation that starts with an assistant
// turn: Anthropic refuses a first message that is not the user's.
const placeholderUserText = "."

// AnthropicRequest is a translated request.
type AnthropicRequest struct {
	// Body is the /v1/messages request body.
	Body []byte
	// Stream is the client's "stream"; the body asks Anthropic for a stream
	// too.
	Stream bool
	// IncludeUsage is the client's stream_options.include_usage: whether
	// the translated stream ends with a usage chunk.
	IncludeUsage bool
}

// OpenAIToAnthropicRequest translates a chat.completions request body, as
// the client sent it, into a /v1/messages body for upstreamModel (the
// body's own model when empty). Errors match ErrInvalidRequest.
func OpenAIToAnthropicRequest(body []byte, upstreamModel string, opts AnthropicOptions) (AnthropicRequest, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return AnthropicRequest{}, decodeError(err)
	}
	out := msgRequest{Model: upstreamModel, Stream: in.Stream}
	if out.Model == "" {
		out.Model = in.Model
	}
	if out.Model == "" {
		return AnthropicRequest{}, invalid("model", "model is required")
	}
	if in.N != nil && *in.N != 1 {
		return AnthropicRequest{}, invalid("n", "only n=1 is supported by this model's provider")
	}

	if err := convertMessages(&out, in.Messages); err != nil {
		return AnthropicRequest{}, err
	}
	if err := convertTools(&out, &in); err != nil {
		return AnthropicRequest{}, err
	}
	format, err := responseFormat(in.ResponseFormat)
	if err != nil {
		return AnthropicRequest{}, err
	}
	if format != "" {
		out.System = append(out.System, msgBlock{Type: "text", Text: format})
	}
	stops, err := stopSequences(in.Stop)
	if err != nil {
		return AnthropicRequest{}, err
	}
	out.StopSequences = stops
	if err := samplingAndBudget(&out, &in, opts); err != nil {
		return AnthropicRequest{}, err
	}
	if user := in.User; user != "" {
		out.Metadata = &msgMetadata{UserID: user}
	} else if in.SafetyIdentifier != "" {
		out.Metadata = &msgMetadata{UserID: in.SafetyIdentifier}
	}

	b, err := marshal(&out)
	if err != nil {
		return AnthropicRequest{}, invalid("", "cannot encode the translated request: "+err.Error())
	}
	return AnthropicRequest{Body: b, Stream: in.Stream, IncludeUsage: in.Stream && in.StreamOptions.IncludeUsage}, nil
}

// decodeError turns a decoding error into a client-facing one without Go
// type names.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return invalid("", "request body must be a JSON object")
		}
		return invalid(typeErr.Field, "unexpected JSON "+typeErr.Value)
	}
	return invalid("", "request body is not valid JSON")
}

// convertMessages moves system and developer messages to the top-level
// system prompt and the rest, in order, to Anthropic turns: tool messages
// become tool_result blocks of a user turn, consecutive turns of one role
// are merged (Anthropic wants alternating roles), and in a user turn the
// tool results come first (Anthropic wants them there).
func convertMessages(out *msgRequest, messages []chatMessage) error {
	if len(messages) == 0 {
		return invalid("messages", "at least one message is required")
	}
	turns := make([]msgMessage, 0, len(messages))
	add := func(role string, blocks []msgBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			return
		}
		turns = append(turns, msgMessage{Role: role, Content: blocks})
	}
	for i := range messages {
		m := &messages[i]
		param := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			blocks, err := textBlocks(m.Content, param+".content")
			if err != nil {
				return err
			}
			out.System = append(out.System, blocks...)
		case "user":
			blocks, err := userBlocks(m.Content, param+".content")
			if err != nil {
				return err
			}
			add("user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(m, param)
			if err != nil {
				return err
			}
			add("assistant", blocks)
		case "tool":
			block, err := toolResult(m, param)
			if err != nil {
				return err
			}
			add("user", []msgBlock{block})
		case "":
			return invalid(param+".role", "role is required")
		default:
			return invalid(param+".role", "unsupported role "+strconv.Quote(m.Role))
		}
	}
	if len(turns) == 0 {
		if len(out.System) == 0 {
			return invalid("messages", "at least one non-empty message is required")
		}
		// Only instructions: OpenAI answers them, Anthropic needs a turn to
		// answer. They become the user's turn.
		turns = append(turns, msgMessage{Role: "user", Content: out.System})
		out.System = nil
	}
	if turns[0].Role != "user" {
		turns = append(turns, msgMessage{})
		copy(turns[1:], turns)
		turns[0] = msgMessage{Role: "user", Content: msgContent{{Type: "text", Text: placeholderUserText}}}
	}
	for i := range turns {
		if turns[i].Role == "user" {
			toolResultsFirst(turns[i].Content)
		}
	}
	out.Messages = turns
	return nil
}

// toolResultsFirst moves tool_result blocks ahead of the others, keeping
// the order within each group.
func toolResultsFirst(blocks []msgBlock) {
	firstOther := -1
	for i := range blocks {
		if blocks[i].Type != "tool_result" {
			if firstOther < 0 {
				firstOther = i
			}
			continue
		}
		if firstOther >= 0 { // a result after other content: rotate it into place
			b := blocks[i]
			copy(blocks[firstOther+1:i+1], blocks[firstOther:i])
			blocks[firstOther] = b
			firstOther++
		}
	}
}

// responseFormat turns response_format into an instruction for the system
// prompt. Anthropic's Messages API has no JSON mode; asking for JSON in the
// prompt keeps structured-output clients (which validate what they get)
// working instead of failing them outright.
func responseFormat(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var v struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return "", invalid("response_format", "must be an object with a type")
	}
	const plain = "Respond with a single JSON object and nothing else: no prose, no code fences."
	switch v.Type {
	case "text":
		return "", nil
	case "json_object":
		return plain, nil
	case "json_schema":
		var schema bytes.Buffer
		if isNull(v.JSONSchema.Schema) || json.Compact(&schema, v.JSONSchema.Schema) != nil {
			return plain, nil
		}
		return "Respond with a single JSON value that conforms to this JSON Schema, and nothing else: no prose, no code fences.\n" + schema.String(), nil
	}
	return "", invalid("response_format.type", "unsupported response_format type "+strconv.Quote(v.Type))
}

// stopSequences converts stop (a string or an array of strings). Empty and
// whitespace-only sequences are dropped: Anthropic refuses the whole
// request over them.
func stopSequences(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	var list []string
	if raw[0] == '"' {
		list = []string{rawString(raw)}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "must be a string or an array of strings")
	}
	out := list[:0]
	for _, s := range list {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// answersToolCalls reports whether the conversation's last turn is the
// user's answer to tool calls (it holds tool results).
func answersToolCalls(msgs []msgMessage) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return false
	}
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// samplingAndBudget sets max_tokens, temperature, top_p, top_k and thinking.
func samplingAndBudget(out *msgRequest, in *chatRequest, opts AnthropicOptions) error {
	var maxTokens int64
	switch {
	case in.MaxCompletionTokens != nil:
		if maxTokens = *in.MaxCompletionTokens; maxTokens < 1 {
			return invalid("max_completion_tokens", "must be at least 1")
		}
	case in.MaxTokens != nil:
		if maxTokens = *in.MaxTokens; maxTokens < 1 {
			return invalid("max_tokens", "must be at least 1")
		}
	}

	budget, ok := thinkingBudget(in.ReasoningEffort)
	if !ok {
		return invalid("reasoning_effort", "unknown reasoning_effort "+strconv.Quote(in.ReasoningEffort))
	}
	if c := out.ToolChoice; c != nil && (c.Type == "any" || c.Type == "tool") {
		budget = 0 // Anthropic cannot think and be forced to a tool; the forced tool wins
	}
	if answersToolCalls(out.Messages) {
		// Inside a tool-use turn Anthropic wants the assistant's part to
		// start with its signed thinking block, which a history in Chat
		// Completions' shape never carries: with thinking on it answers 400.
		// The turn goes on without thinking; the next question thinks again.
		budget = 0
	}
	if maxTokens == 0 {
		maxTokens = opts.uncappedMaxTokens(in.Stream)
		if budget > 0 && !in.Stream {
			// A whole answer's cap is for its text: the thinking comes on top.
			maxTokens += budget
			if opts.MaxOutput > 0 {
				maxTokens = min(maxTokens, opts.MaxOutput)
			}
		}
	}
	budget = fitBudget(budget, maxTokens)
	out.MaxTokens = maxTokens

	if budget > 0 {
		out.Thinking = &msgThinking{Type: "enabled", BudgetTokens: budget}
	}
	sent := Sampling{Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK}.anthropic(budget > 0)
	out.Temperature, out.TopP, out.TopK = sent.Temperature, sent.TopP, sent.TopK
	return nil
}
