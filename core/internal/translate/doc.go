// Package translate converts between OpenAI Chat Completions and Anthropic
// Messages, for upstreams that speak Anthropic (Anthropic itself and the
// anthropic-compatible-* providers).
//
// Three translators, all pure (no I/O, no globals):
//
//   - OpenAIToAnthropicRequest: a chat.completions request body to a
//     /v1/messages request body (openai_anthropic.go).
//   - AnthropicToOpenAIResponse: a message to a chat.completion, and
//     AnthropicErrorToOpenAI: an error body to OpenAI's error body
//     (anthropic_openai.go).
//   - StreamTranslator: Anthropic server-sent events to chat.completion.chunk
//     payloads (anthropic_openai_stream.go).
//
// A request the upstream would refuse for a reason we can see here (bad tool
// call arguments, an unsupported content part) fails with an error matching
// ErrInvalidRequest before anything is sent, so a client's mistake never
// costs an upstream round trip or cools a connection down.
//
// Hosted tools (Messages' server tools, Responses' web_search and the like)
// have no Chat Completions counterpart; both routes treat them alike.
// (Responses' custom tools are not hosted: the client runs them, and they
// go as functions taking their freeform input as their one argument.) Offered
// beside the client's own tools they are left out (Codex offers web_search
// with every turn: refusing would make a chat upstream unusable), so the
// model answers with the tools it can call. A request whose only tools are
// hosted, or whose tool_choice names one, is refused with a 400: the answer
// could not be what it asks for. They pass through untouched where the
// upstream speaks the client's dialect natively.
//
// Thinking signatures: a non-Anthropic upstream's reasoning is rendered as
// thinking blocks whose "signature" is the empty string (the field is kept
// because Anthropic's clients expect it; the gateway cannot sign). Such a
// block sent back by the client is never forwarded as is: Messages to Chat
// Completions (and on to Responses) drops thinking blocks, which have no
// counterpart there, or sends their text as reasoning_content where
// ChatOptions.ReasoningBack says, and the pass-through to an Anthropic-shaped upstream
// drops the unsigned ones (core/internal/chat messagesAnthropic), since
// Anthropic refuses a signature it did not make; signed blocks pass
// untouched.
package translate
