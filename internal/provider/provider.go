// Package provider is the static registry of upstream providers: where each
// one lives, how it authenticates, which wire format it speaks and which
// models it serves. It has no side effects and is shared by core and workers.
package provider

import (
	"regexp"
	"strings"
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

// Kinds lists every model kind.
var Kinds = []string{KindLLM, KindImage, KindTTS, KindSTT, KindEmbedding, KindVideo, KindMusic}

// ValidKind reports whether k is a model kind.
func ValidKind(k string) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Format is the wire format an upstream speaks.
type Format string

const (
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
)

// Auth is how a credential is presented upstream.
type Auth string

const (
	// AuthBearer sends "Authorization: Bearer <credential>".
	AuthBearer Auth = "bearer"
	// AuthXAPIKey sends "x-api-key: <credential>" and "anthropic-version".
	AuthXAPIKey Auth = "x-api-key"
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
	ID            string
	Name          string
	Kind          string
	Input         []string
	Output        []string
	ContextWindow int
	Dimensions    int
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
	// Listing is true when GET {BaseURL}/models lists the models live.
	Listing bool
	// Models is the static model list.
	Models []Model
}

// Registry maps provider ids to their specs.
type Registry struct {
	specs map[string]Spec
}

// NewRegistry returns the registry of known providers.
func NewRegistry() *Registry {
	specs := []Spec{
		{
			ID: "openai", Alias: "openai", DefaultBaseURL: "https://api.openai.com/v1",
			Auth: AuthBearer, Format: FormatOpenAI,
			Models: []Model{
				{ID: "gpt-4.1", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 1047576},
				{ID: "gpt-4.1-mini", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 1047576},
				{ID: "gpt-4o", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 128000},
				{ID: "gpt-4o-mini", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 128000},
				{ID: "o4-mini", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 200000},
				{ID: "text-embedding-3-small", Kind: KindEmbedding, Input: []string{"text"}, Dimensions: 1536},
				{ID: "text-embedding-3-large", Kind: KindEmbedding, Input: []string{"text"}, Dimensions: 3072},
				{ID: "text-embedding-ada-002", Kind: KindEmbedding, Input: []string{"text"}, Dimensions: 1536},
				{ID: "whisper-1", Kind: KindSTT, Input: []string{"audio"}, Output: []string{"text"}},
				{ID: "gpt-4o-transcribe", Kind: KindSTT, Input: []string{"audio"}, Output: []string{"text"}},
				{ID: "tts-1", Kind: KindTTS, Input: []string{"text"}, Output: []string{"audio"}},
				{ID: "gpt-4o-mini-tts", Kind: KindTTS, Input: []string{"text"}, Output: []string{"audio"}},
				{ID: "gpt-image-1", Kind: KindImage, Input: []string{"text", "image"}, Output: []string{"image"}},
			},
		},
		{
			ID: "openrouter", Alias: "openrouter", DefaultBaseURL: "https://openrouter.ai/api/v1",
			Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
			Models: []Model{
				{ID: "openai/gpt-4o-mini", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 128000},
				{ID: "anthropic/claude-sonnet-4", Kind: KindLLM, Input: []string{"text", "image"}, Output: []string{"text"}, ContextWindow: 200000},
				{ID: "openai/text-embedding-3-small", Kind: KindEmbedding, Input: []string{"text"}, Dimensions: 1536},
			},
		},
	}
	r := &Registry{specs: make(map[string]Spec, len(specs))}
	for _, s := range specs {
		r.specs[s.ID] = s
	}
	return r
}

// Lookup returns the spec of a connection's provider id. Compatible family
// ids ("openai-compatible-<suffix>") get a spec of their family with no
// default base URL and no static models.
func (r *Registry) Lookup(id string) (Spec, bool) {
	if s, ok := r.specs[id]; ok {
		return s, true
	}
	switch family, _ := Family(id); family {
	case FamilyOpenAICompatible:
		return Spec{ID: id, Alias: id, Family: family, Auth: AuthBearer, Format: FormatOpenAI, Listing: true}, true
	case FamilyAnthropicCompatible:
		return Spec{ID: id, Alias: id, Family: family, Auth: AuthXAPIKey, Format: FormatAnthropic, Listing: true}, true
	}
	return Spec{}, false
}

// IDs lists the registry's provider ids (not the compatible families).
func (r *Registry) IDs() []string {
	out := make([]string, 0, len(r.specs))
	for id := range r.specs {
		out = append(out, id)
	}
	return out
}

// Family splits a compatible provider id into its family and suffix; family
// is empty for other ids.
func Family(id string) (family, suffix string) {
	for _, f := range []string{FamilyOpenAICompatible, FamilyAnthropicCompatible} {
		if s, ok := strings.CutPrefix(id, f+"-"); ok && s != "" {
			return f, s
		}
	}
	return "", ""
}

var uuidSuffix = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// CrossInstance reports whether a compatible provider id ends in a UUID,
// which marks an upstream / cross-instance connection (interface 2.3).
func CrossInstance(id string) bool {
	family, suffix := Family(id)
	return family != "" && uuidSuffix.MatchString(suffix)
}

// GuessKind guesses a model's kind from its id when no record says.
func GuessKind(id string) string {
	s := strings.ToLower(id)
	switch {
	case strings.Contains(s, "embed"):
		return KindEmbedding
	case strings.Contains(s, "whisper"), strings.Contains(s, "transcribe"), strings.Contains(s, "stt"):
		return KindSTT
	case strings.Contains(s, "tts"), strings.Contains(s, "speech"), strings.Contains(s, "voice"):
		return KindTTS
	case strings.Contains(s, "image"), strings.Contains(s, "dall-e"), strings.Contains(s, "flux"),
		strings.Contains(s, "sdxl"), strings.Contains(s, "stable-diffusion"):
		return KindImage
	}
	return KindLLM
}

// KindOf reads a model record's kind: kind first, then the older type field,
// then a guess from the id (interface 2.3, rule 8).
func KindOf(kind, typ, id string) string {
	if ValidKind(kind) {
		return kind
	}
	if ValidKind(typ) {
		return typ
	}
	return GuessKind(id)
}
