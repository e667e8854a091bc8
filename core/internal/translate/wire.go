package translate

import "encoding/json"

// Wire types. chat* is OpenAI Chat Completions, msg* is Anthropic Messages.
// Only the fields the translators read or write are declared; decoding
// ignores the rest.

// chatRequest is a chat.completions request as a client sends it.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	N                   *int64          `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools             []chatTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	User              string          `json:"user"`
	SafetyIdentifier  string          `json:"safety_identifier"`
	ReasoningEffort   string          `json:"reasoning_effort"`
	ResponseFormat    json.RawMessage `json:"response_format"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null.
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
	// ImageURL is {"url","detail"}, or a bare URL string (older clients).
	ImageURL json.RawMessage `json:"image_url"`
	File     *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
	// CacheControl is the prompt-caching extension some clients send
	// (OpenRouter, LiteLLM style); it is passed to Anthropic as is.
	CacheControl json.RawMessage `json:"cache_control"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string holding JSON; some clients send the
		// object itself.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	} `json:"function"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// msgRequest is a /v1/messages request.
type msgRequest struct {
	Model         string         `json:"model"`
	MaxTokens     int64          `json:"max_tokens"`
	System        msgContent     `json:"system,omitempty"`
	Messages      []msgMessage   `json:"messages"`
	Tools         []msgTool      `json:"tools,omitempty"`
	ToolChoice    *msgToolChoice `json:"tool_choice,omitempty"`
	StopSequences []string       `json:"stop_sequences,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	TopK          *int64         `json:"top_k,omitempty"`
	Metadata      *msgMetadata   `json:"metadata,omitempty"`
	Thinking      *msgThinking   `json:"thinking,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
}

type msgMessage struct {
	Role    string     `json:"role"`
	Content msgContent `json:"content"`
}

// msgBlock is a request content block: text, image, document, tool_use or
// tool_result.
type msgBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *msgSource      `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      msgContent      `json:"content,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// msgContent is a list of blocks; a lone plain text block is written as a
// string, the shorter form Anthropic accepts wherever content is allowed.
type msgContent []msgBlock

func (c msgContent) MarshalJSON() ([]byte, error) {
	if len(c) == 1 && c[0].Type == "text" && len(c[0].CacheControl) == 0 {
		return appendString(nil, c[0].Text), nil
	}
	return marshal([]msgBlock(c))
}

type msgSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	// Content is a document's own content (source type "content"): a
	// string or text and image blocks.
	Content json.RawMessage `json:"content,omitempty"`
}

type msgTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type msgToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type msgMetadata struct {
	UserID string `json:"user_id"`
}

type msgThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

// msgResponse is a /v1/messages response (or, with Type "error", an error).
type msgResponse struct {
	ID         string             `json:"id"`
	Type       string             `json:"type"`
	Role       string             `json:"role"`
	Content    []msgResponseBlock `json:"content"`
	StopReason string             `json:"stop_reason"`
	Usage      msgUsage           `json:"usage"`
}

type msgResponseBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}
