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
package translate
