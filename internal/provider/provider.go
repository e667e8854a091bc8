// Package provider is the static registry of upstream providers: where each
// one lives, how it authenticates, which wire format it speaks, which kinds
// of model it serves and which models it is known to serve. It has no side
// effects and no mutable package state, and is shared by core and workers.
//
// The package is split by concern:
//
//	provider.go   the types: Spec, Model and their constants
//	kind.go       model kinds and how a record's kind is read
//	registry.go   Registry, Lookup and the compatible families
//	providers.go  the built-in providers, one Spec per provider
//	upstream.go   per-request helpers: base URL and credential headers
package provider

import (
	"strings"
	"time"
)

// Model kinds (interface section 1).
const (
	KindLLM       = "llm"
	KindImage     = "image"
	KindTTS       = "tts"
	KindSTT       = "stt"
	KindEmbedding = "embedding"
	KindVideo     = "video"
	KindMusic     = "music"
)

// Modalities of a model's input and output.
const (
	ModalityText  = "text"
	ModalityImage = "image"
	ModalityAudio = "audio"
	ModalityVideo = "video"
)

// Format is the wire format an upstream speaks.
type Format string

const (
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	// FormatResponses is OpenAI's Responses API only (the ChatGPT backend of
	// codex connections): chat and Messages requests are translated to it.
	FormatResponses Format = "responses"
	// FormatElevenLabs is ElevenLabs' own audio API (text-to-speech, voices,
	// speech-to-text).
	FormatElevenLabs Format = "elevenlabs"
)

// Auth is how a credential is presented upstream.
type Auth string

const (
	// AuthBearer sends "Authorization: Bearer <credential>".
	AuthBearer Auth = "bearer"
	// AuthXAPIKey sends "x-api-key: <credential>" and "anthropic-version".
	AuthXAPIKey Auth = "x-api-key"
	// AuthXIAPIKey sends "xi-api-key: <credential>" (ElevenLabs).
	AuthXIAPIKey Auth = "xi-api-key"
)

// Compatible provider families: ids "<family>-<suffix>".
const (
	FamilyOpenAICompatible    = "openai-compatible"
	FamilyAnthropicCompatible = "anthropic-compatible"
)

// AnthropicVersion is the API version header sent to Anthropic-style upstreams.
const AnthropicVersion = "2023-06-01"

// Model is a model a provider serves.
type Model struct {
	// ID is the model id exactly as the provider publishes it.
	ID   string
	Name string
	// Kind is one of Kinds.
	Kind string
	// Input and Output are the modalities (Modality*) the model takes and
	// produces. Output is empty for embedding models, whose output is a
	// vector.
	Input  []string
	Output []string
	// ContextWindow is the maximum number of input tokens (for LLMs, input
	// plus output), 0 when not meaningful or not known. Figures are the
	// provider's public ones and approximate.
	ContextWindow int
	// MaxOutput is the most tokens the model writes in one answer (the
	// largest output cap its provider takes), 0 when not known.
	MaxOutput int
	// Dimensions is the default length of an embedding model's vectors.
	Dimensions int
}

// Spec describes one provider.
type Spec struct {
	// ID is the registry id ("openai"), or for a compatible family the full
	// connection provider id ("openai-compatible-local").
	ID string
	// Alias is the default public prefix of its model ids.
	Alias string
	// Family is set for the compatible families.
	Family         string
	DefaultBaseURL string
	Auth           Auth
	Format         Format
	// Headers are sent with every request to the provider, beyond the
	// credential: the request shape a subscription backend requires
	// (Copilot's editor and integration ids, Codex's originator).
	Headers map[string]string
	// DataHeaders are headers whose value is a connection's stored value
	// (header name to key of the connection's ProviderData.values, which a
	// login fills from its tokens): Codex's chatgpt-account-id. A value the
	// connection does not have sends no header.
	DataHeaders map[string]string
	// StreamOnly is true when the upstream answers only streamed requests
	// (the ChatGPT backend): a non-streamed request goes up streamed and the
	// stream is assembled into the whole answer.
	StreamOnly bool
	// MaxCompletionTokens is true when the upstream takes a translated
	// chat request's output cap as max_completion_tokens (OpenAI: its
	// reasoning models refuse max_tokens); others get max_tokens.
	MaxCompletionTokens bool
	// ReasoningBack is true when a translated chat request sends earlier
	// turns' reasoning back as reasoning_content on their assistant
	// messages: DeepSeek's thinking mode refuses a tool call's turn
	// without it, Kimi keeps it, most servers ignore it, and one that
	// refuses it (Groq, Cerebras) is asked again without it. OpenAI refuses
	// message members it does not know, so it gets none.
	ReasoningBack bool
	// MaxStopSequences is the most stop sequences the upstream takes in a
	// translated chat request (OpenAI: 4, answering 400 to more); 0 when
	// no limit is known.
	MaxStopSequences int
	// Omit are top-level request members the upstream answers 400 to
	// although its API defines them (the ChatGPT backend refuses output
	// caps and sampling): they are left out of what is sent.
	Omit []string
	// Require are top-level request members the upstream insists on, with
	// the JSON value it accepts (the ChatGPT backend stores nothing:
	// "store": false); they are set on what is sent.
	Require map[string]string
	// SystemFirst is a line an Anthropic-shaped upstream wants at the head
	// of every request's system prompt (a Claude subscription's token is
	// taken only for requests that present themselves as Claude Code's): a
	// request whose system prompt has no block beginning with it gets it as
	// its first block.
	SystemFirst string
	// SystemFirstAlike are other lines a system block may begin with in
	// SystemFirst's stead, as the client's own requests do (Claude Code
	// run non-interactively names itself an Agent SDK agent): a request
	// with one goes up as it came.
	SystemFirstAlike []string
	// Responses is true when the upstream also speaks OpenAI's Responses
	// API at {BaseURL}/responses: /v1/responses requests go to it as they
	// are instead of being translated.
	Responses bool
	// Unreserved is true when the provider's id and alias are not kept
	// from other providers' connections as a prefix: "claude" named
	// Anthropic connections' models before Claude subscriptions had it.
	// A connection that has it still keeps it from the others.
	Unreserved bool
	// Kinds lists the model kinds the provider serves.
	Kinds []string
	// Listing is true when GET {BaseURL}/models lists the models live.
	Listing bool
	// LiveCatalog is true when /v1/models shows the provider's live list
	// (fetched with the connection's credential, kept an hour) instead of
	// the static Models (interface 4.2 rule 7). The compatible families
	// always list live.
	LiveCatalog bool
	// Models is the static model list: representative models, not the
	// provider's whole catalogue (Listing gives that where there is one).
	Models []Model
	// RefreshLead is how long before an OAuth access token expires that it
	// is refreshed ahead of use; zero means the provider's entry in
	// refreshPolicy, else DefaultRefreshLead.
	RefreshLead time.Duration
	// RefreshMaxAge, when set, forces a refresh of tokens last refreshed
	// longer ago than this, whatever their expiry says.
	RefreshMaxAge time.Duration
}

// DefaultRefreshLead is the refresh lead time of OAuth providers without
// their own (reference/gateway.md: "others 5 min"), compatible families
// included.
const DefaultRefreshLead = 5 * time.Minute

// TokenRefresh is when an OAuth connection of the provider is refreshed
// proactively: lead before its token expires, and (when maxAge is set) once
// its last refresh is older than maxAge.
func (s Spec) TokenRefresh() (lead, maxAge time.Duration) {
	lead, maxAge = refreshPolicy(s.ID)
	if s.RefreshLead > 0 {
		lead = s.RefreshLead
	}
	if s.RefreshMaxAge > 0 {
		maxAge = s.RefreshMaxAge
	}
	if lead <= 0 {
		lead = DefaultRefreshLead
	}
	return lead, maxAge
}

// Model is the model the provider lists with the id, and whether it lists
// one.
func (s Spec) Model(id string) (Model, bool) {
	for _, m := range s.Models {
		if m.ID == id {
			return m, true
		}
	}
	// An alias of a listed snapshot (see SnapshotOf) is that snapshot.
	for _, m := range s.Models {
		if SnapshotOf(m.ID, id) {
			return m, true
		}
	}
	return Model{}, false
}

// SnapshotOf reports whether id is a dated snapshot of the model alias, the
// alias followed by "-YYYYMMDD": Anthropic lists "claude-sonnet-4-5" only
// as "claude-sonnet-4-5-20250929", and takes requests for either.
func SnapshotOf(id, alias string) bool {
	rest, ok := strings.CutPrefix(id, alias)
	if !ok || len(rest) != 9 || rest[0] != '-' {
		return false
	}
	for i := 1; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return true
}

// Serves reports whether the provider serves models of kind k.
func (s Spec) Serves(k string) bool {
	for _, x := range s.Kinds {
		if x == k {
			return true
		}
	}
	return false
}
