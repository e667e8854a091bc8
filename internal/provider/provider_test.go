package provider

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var modalities = []string{ModalityText, ModalityImage, ModalityAudio, ModalityVideo}

func TestRegistryHoldsTheRequiredProviders(t *testing.T) {
	r := NewRegistry()
	for _, id := range []string{"openai", "openrouter", "anthropic", "gemini", "groq", "mistral",
		"deepseek", "xai", "together", "fireworks", "cerebras"} {
		s, ok := r.Lookup(id)
		if assert.True(t, ok, id) {
			assert.Equal(t, id, s.ID)
		}
	}
	ids := r.IDs()
	assert.Len(t, ids, len(builtinSpecs()), "no two built-in specs share an id")
	assert.Equal(t, ids, NewRegistry().IDs(), "IDs are in a stable order")
	ids[0] = "mutated"
	assert.NotEqual(t, "mutated", r.IDs()[0], "IDs returns a copy")
}

func TestRegistryEntries(t *testing.T) {
	r := NewRegistry()
	for _, id := range r.IDs() {
		t.Run(id, func(t *testing.T) {
			s, ok := r.Lookup(id)
			require.True(t, ok)
			assert.Equal(t, id, s.ID)
			assert.Equal(t, strings.ToLower(s.ID), s.ID, "id is lower case")
			assert.NotEmpty(t, s.Alias)
			assert.Equal(t, strings.ToLower(s.Alias), s.Alias, "alias is lower case")
			assert.Empty(t, s.Family, "registry entries are not compatible families")
			f, _ := Family(s.ID)
			assert.Empty(t, f, "a registry id must not look like a compatible family id")

			u, err := url.Parse(s.DefaultBaseURL)
			require.NoError(t, err)
			assert.Equal(t, "https", u.Scheme, "base URL %q", s.DefaultBaseURL)
			assert.NotEmpty(t, u.Host)
			assert.Empty(t, u.RawQuery)
			assert.False(t, strings.HasSuffix(s.DefaultBaseURL, "/"), "no trailing slash")
			assert.Equal(t, s.DefaultBaseURL, s.BaseURL(""), "the default base is already normalised")

			assert.Contains(t, []Format{FormatOpenAI, FormatAnthropic, FormatElevenLabs, FormatResponses}, s.Format)
			assert.Contains(t, []Auth{AuthBearer, AuthXAPIKey, AuthXIAPIKey}, s.Auth)
			// A Claude subscription's OAuth token goes as a bearer token.
			assert.Equal(t, s.Format == FormatAnthropic && s.ID != "claude", s.Auth == AuthXAPIKey, "Anthropic format goes with x-api-key auth")
			assert.Equal(t, s.Format == FormatElevenLabs, s.Auth == AuthXIAPIKey, "ElevenLabs format goes with xi-api-key auth")
			// ElevenLabs' model listing is not OpenAI-shaped: static list only.
			assert.Equal(t, s.Format != FormatElevenLabs, s.Listing, "every OpenAI or Anthropic style provider has a live listing")

			require.NotEmpty(t, s.Kinds)
			for _, k := range s.Kinds {
				assert.True(t, ValidKind(k), "kind %q", k)
			}
			assert.Len(t, s.Kinds, len(uniq(s.Kinds)), "kinds are unique")

			require.NotEmpty(t, s.Models)
			seen := map[string]bool{}
			served := map[string]bool{}
			for _, m := range s.Models {
				assert.NotEmpty(t, m.ID)
				assert.Equal(t, strings.TrimSpace(m.ID), m.ID)
				assert.NotContains(t, m.ID, " ")
				assert.False(t, seen[m.ID], "duplicate model %q", m.ID)
				seen[m.ID] = true

				assert.True(t, ValidKind(m.Kind), "model %q kind %q", m.ID, m.Kind)
				assert.True(t, s.Serves(m.Kind), "model %q is a %s, which %s does not list in Kinds", m.ID, m.Kind, s.ID)
				served[m.Kind] = true
				assert.Equal(t, m.Kind, KindOf(m.Kind, "", m.ID))

				assert.NotEmpty(t, m.Input, "model %q input", m.ID)
				assert.Subset(t, modalities, m.Input, "model %q input", m.ID)
				assert.Subset(t, modalities, m.Output, "model %q output", m.ID)
				assert.Len(t, m.Input, len(uniq(m.Input)))
				assert.GreaterOrEqual(t, m.ContextWindow, 0)

				switch m.Kind {
				case KindEmbedding:
					assert.Positive(t, m.Dimensions, "embedding model %q has dimensions", m.ID)
					assert.Empty(t, m.Output)
				default:
					assert.Zero(t, m.Dimensions, "only embedding models have dimensions (%q)", m.ID)
					assert.NotEmpty(t, m.Output, "model %q output", m.ID)
				}
				switch m.Kind {
				case KindLLM:
					assert.Positive(t, m.ContextWindow, "LLM %q has a context window", m.ID)
					assert.Equal(t, []string{ModalityText}, m.Output)
				case KindSTT:
					assert.Equal(t, []string{ModalityAudio}, m.Input)
				case KindTTS:
					assert.Equal(t, []string{ModalityAudio}, m.Output)
				case KindImage:
					assert.Contains(t, m.Output, ModalityImage)
				case KindVideo:
					assert.Contains(t, m.Output, ModalityVideo)
				}
			}
			for _, k := range s.Kinds {
				assert.True(t, served[k], "%s lists kind %s but has no static model of it", s.ID, k)
			}
		})
	}
}

func TestRegistriesDoNotShareState(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	sa, _ := a.Lookup("openai")
	sa.Models[0].ID = "mutated"
	sa.Models[0].Input[0] = "mutated"
	sa.Kinds[0] = "mutated"
	sb, _ := b.Lookup("openai")
	assert.NotEqual(t, "mutated", sb.Models[0].ID)
	assert.NotEqual(t, "mutated", sb.Models[0].Input[0])
	assert.NotEqual(t, "mutated", sb.Kinds[0])
	// Models built by the same constructor do not share slices either.
	assert.NotEqual(t, "mutated", sa.Models[1].Input[0])
}

func TestKnownModels(t *testing.T) {
	r := NewRegistry()
	model := func(provider, id string) Model {
		t.Helper()
		s, ok := r.Lookup(provider)
		require.True(t, ok, provider)
		i := slices.IndexFunc(s.Models, func(m Model) bool { return m.ID == id })
		require.GreaterOrEqual(t, i, 0, "%s has %s", provider, id)
		return s.Models[i]
	}
	// Models other packages and tests rely on.
	assert.Equal(t, KindLLM, model("openai", "gpt-4o-mini").Kind)
	assert.Equal(t, KindLLM, model("openai", "gpt-4o").Kind)
	assert.Equal(t, KindSTT, model("openai", "whisper-1").Kind)
	assert.Equal(t, KindTTS, model("openai", "tts-1").Kind)
	assert.Equal(t, 1536, model("openai", "text-embedding-3-small").Dimensions)
	assert.Equal(t, 3072, model("openai", "text-embedding-3-large").Dimensions)
	assert.Equal(t, KindLLM, model("openrouter", "openai/gpt-4o-mini").Kind)
	assert.Equal(t, 1536, model("openrouter", "openai/text-embedding-3-small").Dimensions)
	// A sample across providers.
	assert.Equal(t, KindImage, model("openai", "gpt-image-1").Kind)
	assert.Equal(t, KindVideo, model("openai", "sora-2").Kind)
	assert.Equal(t, []string{ModalityText}, model("openai", "o3-mini").Input)
	assert.Equal(t, 1024, model("mistral", "mistral-embed").Dimensions)
	assert.Equal(t, 3072, model("gemini", "gemini-embedding-001").Dimensions)
	assert.Contains(t, model("gemini", "gemini-3.5-flash").Input, ModalityVideo)
	assert.Equal(t, KindSTT, model("groq", "whisper-large-v3").Kind)
	assert.Equal(t, KindSTT, model("elevenlabs", "scribe_v2").Kind, "ElevenLabs' current speech-to-text model")
	assert.Equal(t, KindSTT, model("elevenlabs", "scribe_v1").Kind)
	assert.Equal(t, KindLLM, model("deepseek", "deepseek-reasoner").Kind)
	assert.Equal(t, KindImage, model("xai", "grok-imagine-image").Kind)
	assert.Equal(t, KindLLM, model("anthropic", "claude-sonnet-4-6").Kind)
	assert.Equal(t, 768, model("fireworks", "nomic-ai/nomic-embed-text-v1.5").Dimensions)
}

func TestProviderShapes(t *testing.T) {
	r := NewRegistry()
	a, _ := r.Lookup("anthropic")
	assert.Equal(t, FormatAnthropic, a.Format)
	assert.Equal(t, AuthXAPIKey, a.Auth)
	assert.Equal(t, "https://api.anthropic.com/v1", a.DefaultBaseURL)
	g, _ := r.Lookup("gemini")
	assert.Equal(t, "https://generativelanguage.googleapis.com/v1beta/openai", g.DefaultBaseURL)
	assert.Equal(t, FormatOpenAI, g.Format)
	for _, id := range r.IDs() {
		if id == "anthropic" || id == "elevenlabs" {
			continue
		}
		if id == "claude" {
			s, _ := r.Lookup(id)
			assert.Equal(t, FormatAnthropic, s.Format, "a Claude subscription is spoken to in Messages")
			continue
		}
		s, _ := r.Lookup(id)
		if id == "codex" {
			assert.Equal(t, FormatResponses, s.Format, "the ChatGPT backend speaks only Responses")
			continue
		}
		assert.Equal(t, FormatOpenAI, s.Format, "%s is spoken to in the OpenAI format", id)
		assert.Equal(t, AuthBearer, s.Auth, id)
	}
}

func TestLookupCompatibleFamilies(t *testing.T) {
	r := NewRegistry()

	s, ok := r.Lookup("openai-compatible-x")
	require.True(t, ok)
	assert.Equal(t, "openai-compatible-x", s.ID)
	assert.Equal(t, "openai-compatible-x", s.Alias)
	assert.Equal(t, FamilyOpenAICompatible, s.Family)
	assert.Equal(t, FormatOpenAI, s.Format)
	assert.Equal(t, AuthBearer, s.Auth)
	assert.True(t, s.Listing)
	assert.Empty(t, s.DefaultBaseURL)
	assert.Empty(t, s.Models)
	assert.ElementsMatch(t, []string{KindLLM, KindEmbedding, KindSTT, KindTTS, KindImage}, s.Kinds)

	s, ok = r.Lookup("anthropic-compatible-x")
	require.True(t, ok)
	assert.Equal(t, "anthropic-compatible-x", s.ID)
	assert.Equal(t, "anthropic-compatible-x", s.Alias)
	assert.Equal(t, FamilyAnthropicCompatible, s.Family)
	assert.Equal(t, FormatAnthropic, s.Format)
	assert.Equal(t, AuthXAPIKey, s.Auth)
	assert.True(t, s.Listing)
	assert.Empty(t, s.DefaultBaseURL)
	assert.Empty(t, s.Models)
	assert.Equal(t, []string{KindLLM}, s.Kinds)

	uuid := "openai-compatible-123e4567-e89b-12d3-a456-426614174000"
	s, ok = r.Lookup(uuid)
	require.True(t, ok)
	assert.Equal(t, uuid, s.ID)

	// Family specs are fresh per lookup.
	s1, _ := r.Lookup("openai-compatible-a")
	s1.Kinds[0] = "mutated"
	s2, _ := r.Lookup("openai-compatible-a")
	assert.Equal(t, KindLLM, s2.Kinds[0])
}

func TestLookupUnknown(t *testing.T) {
	r := NewRegistry()
	for _, id := range []string{"", "nope", "OpenAI", "openai ", "openai-compatible", "openai-compatible-",
		"anthropic-compatible", "anthropic-compatible-", "compatible-x", "openai-compatiblex"} {
		s, ok := r.Lookup(id)
		assert.False(t, ok, "%q", id)
		assert.Equal(t, Spec{}, s, "%q", id)
	}
}

func TestFamily(t *testing.T) {
	for _, tc := range []struct{ id, family, suffix string }{
		{"openai-compatible-local", FamilyOpenAICompatible, "local"},
		{"anthropic-compatible-x", FamilyAnthropicCompatible, "x"},
		{"openai-compatible-a-b", FamilyOpenAICompatible, "a-b"},
		{"openai-compatible-", "", ""},
		{"openai-compatible", "", ""},
		{"openai", "", ""},
		{"", "", ""},
	} {
		f, s := Family(tc.id)
		assert.Equal(t, tc.family, f, "%q", tc.id)
		assert.Equal(t, tc.suffix, s, "%q", tc.id)
	}
}

func TestCrossInstance(t *testing.T) {
	const id = "123e4567-e89b-12d3-a456-426614174000"
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"openai-compatible-" + id, true},
		{"anthropic-compatible-" + id, true},
		{"openai-compatible-" + strings.ToUpper(id), true},
		{"openai-compatible-local", false},
		{"openai-compatible-not-a-uuid", false},
		{"openai-compatible-123e4567e89b12d3a456426614174000", false}, // no dashes
		{"openai-compatible-" + id[:len(id)-1], false},                // short
		{"openai-compatible-" + id + "0", false},                      // long
		{"openai-compatible-{" + id + "}", false},
		{"openai-compatible-" + strings.Replace(id, "1", "g", 1), false}, // not hex
		{"openai-compatible-", false},
		{"openai-compatible", false},
		{"openai-" + id, false}, // not a compatible family
		{id, false},
		{"", false},
	} {
		assert.Equal(t, tc.want, CrossInstance(tc.id), "%q", tc.id)
	}
}

func TestKinds(t *testing.T) {
	assert.ElementsMatch(t, []string{"llm", "image", "tts", "stt", "embedding", "video", "music"}, Kinds)
	for _, k := range Kinds {
		assert.True(t, ValidKind(k), k)
	}
	for _, k := range []string{"", "LLM", "chat", "model", "text", "embeddings"} {
		assert.False(t, ValidKind(k), k)
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct{ name, kind, typ, id, want string }{
		{"kind wins over type", KindTTS, KindSTT, "whisper-1", KindTTS},
		{"kind wins over the id", KindImage, "", "gpt-4o", KindImage},
		{"older record: type only", "", KindEmbedding, "some-model", KindEmbedding},
		{"invalid kind falls back to type", "bogus", KindSTT, "some-model", KindSTT},
		{"neither: guess from the id", "", "", "text-embedding-3-small", KindEmbedding},
		{"invalid type: guess from the id", "", "model", "whisper-large-v3", KindSTT},
		{"invalid both: guess", "chat", "model", "flux-dev", KindImage},
		{"nothing at all", "", "", "", KindLLM},
	} {
		assert.Equal(t, tc.want, KindOf(tc.kind, tc.typ, tc.id), tc.name)
	}
}

func TestGuessKind(t *testing.T) {
	for id, want := range map[string]string{
		"gpt-4o":                            KindLLM,
		"claude-sonnet-4-6":                 KindLLM,
		"llama-3-8b":                        KindLLM,
		"":                                  KindLLM,
		"text-embedding-3-small":            KindEmbedding,
		"nomic-embed-text":                  KindEmbedding,
		"gemini-embedding-001":              KindEmbedding,
		"BAAI/bge-large-en-v1.5":            KindLLM, // nothing in the id says
		"whisper-1":                         KindSTT,
		"Whisper-Large-V3":                  KindSTT,
		"gpt-4o-mini-transcribe":            KindSTT,
		"some-stt-model":                    KindSTT,
		"tts-1-hd":                          KindTTS,
		"gpt-4o-mini-tts":                   KindTTS,
		"speech-02":                         KindTTS,
		"voice-clone":                       KindTTS,
		"sora-2":                            KindVideo,
		"text-to-video-1":                   KindVideo,
		"lyria-002":                         KindMusic,
		"music-gen":                         KindMusic,
		"gpt-image-1":                       KindImage,
		"dall-e-3":                          KindImage,
		"black-forest-labs/FLUX.1-schnell":  KindImage,
		"sdxl-turbo":                        KindImage,
		"stable-diffusion-3":                KindImage,
		"imagen-4.0-generate-001":           KindImage,
		"embed-image-v1":                    KindEmbedding, // embedding wins
		"whisper-tts":                       KindSTT,       // stt before tts
		"image-to-video":                    KindVideo,     // video before image
		"accounts/fireworks/models/gpt-oss": KindLLM,
	} {
		assert.Equal(t, want, GuessKind(id), "%q", id)
	}
}

func TestServes(t *testing.T) {
	s := Spec{Kinds: []string{KindLLM, KindSTT}}
	assert.True(t, s.Serves(KindLLM))
	assert.True(t, s.Serves(KindSTT))
	assert.False(t, s.Serves(KindTTS))
	assert.False(t, Spec{}.Serves(KindLLM))
}

func TestBaseURL(t *testing.T) {
	r := NewRegistry()
	openai, _ := r.Lookup("openai")
	anthropic, _ := r.Lookup("anthropic")
	compat, _ := r.Lookup("openai-compatible-x")
	acompat, _ := r.Lookup("anthropic-compatible-x")
	for _, tc := range []struct {
		name     string
		spec     Spec
		override string
		want     string
	}{
		{"default", openai, "", "https://api.openai.com/v1"},
		{"override", openai, "https://proxy.example/v1", "https://proxy.example/v1"},
		{"trailing slash", openai, "https://proxy.example/v1/", "https://proxy.example/v1"},
		{"trailing slashes", openai, "https://proxy.example/v1///", "https://proxy.example/v1"},
		{"openai keeps /messages", openai, "https://proxy.example/messages", "https://proxy.example/messages"},
		{"anthropic default", anthropic, "", "https://api.anthropic.com/v1"},
		{"anthropic /messages", anthropic, "https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1"},
		{"anthropic /messages/", anthropic, "https://api.anthropic.com/v1/messages/", "https://api.anthropic.com/v1"},
		{"anthropic-compatible /messages", acompat, "http://localhost:8080/v1/messages", "http://localhost:8080/v1"},
		{"compatible has no default", compat, "", ""},
		{"compatible override", compat, "http://localhost:11434/v1/", "http://localhost:11434/v1"},
	} {
		assert.Equal(t, tc.want, tc.spec.BaseURL(tc.override), tc.name)
	}
}

func TestAuthorize(t *testing.T) {
	r := NewRegistry()
	headers := func(id, credential string) http.Header {
		t.Helper()
		s, ok := r.Lookup(id)
		require.True(t, ok, id)
		h := http.Header{}
		s.Authorize(h, credential)
		return h
	}

	for _, id := range []string{"openai", "openrouter", "gemini", "groq", "openai-compatible-x"} {
		h := headers(id, "sk-1")
		assert.Equal(t, "Bearer sk-1", h.Get("Authorization"), id)
		assert.Empty(t, h.Get("x-api-key"), id)
		assert.Empty(t, h.Get("anthropic-version"), id)

		h = headers(id, "")
		assert.Empty(t, h, "%s: no credential, no auth header", id)
	}

	assert.Equal(t, http.Header{"Xi-Api-Key": {"xi-1"}}, headers("elevenlabs", "xi-1"))
	assert.Empty(t, headers("elevenlabs", ""))

	for _, id := range []string{"anthropic", "anthropic-compatible-x"} {
		h := headers(id, "sk-ant")
		assert.Equal(t, "sk-ant", h.Get("x-api-key"), id)
		assert.Equal(t, AnthropicVersion, h.Get("anthropic-version"), id)
		assert.Empty(t, h.Get("Authorization"), id)

		h = headers(id, "")
		assert.Empty(t, h.Get("x-api-key"), "%s: no credential, no auth header", id)
		assert.Empty(t, h.Get("Authorization"), id)
		assert.Equal(t, AnthropicVersion, h.Get("anthropic-version"), "%s: the version header is not a credential", id)
	}

	// Authorize replaces, it does not append.
	s, _ := r.Lookup("openai")
	h := http.Header{"Authorization": {"Bearer old"}}
	s.Authorize(h, "new")
	assert.Equal(t, []string{"Bearer new"}, h.Values("Authorization"))
}

func uniq(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// Each subscription backend's request shape is in the table: Authorize sets
// the headers it requires along with the credential.
func TestSubscriptionRequestShapes(t *testing.T) {
	r := NewRegistry()
	cop, _ := r.Lookup("github-copilot")
	h := http.Header{}
	cop.Authorize(h, "tid=copilot-token")
	assert.Equal(t, "Bearer tid=copilot-token", h.Get("Authorization"))
	assert.Equal(t, "vscode-chat", h.Get("Copilot-Integration-Id"))
	assert.NotEmpty(t, h.Get("Editor-Version"))
	assert.NotEmpty(t, h.Get("Editor-Plugin-Version"))

	cx, _ := r.Lookup("codex")
	h = http.Header{}
	cx.Authorize(h, "chatgpt-token")
	assert.Equal(t, "Bearer chatgpt-token", h.Get("Authorization"))
	assert.Equal(t, "responses=experimental", h.Get("OpenAI-Beta"))
	assert.Equal(t, "codex_cli_rs", h.Get("Originator"))
	assert.True(t, cx.Responses)

	cl, _ := r.Lookup("claude")
	h = http.Header{}
	cl.Authorize(h, "sk-ant-oat01-x")
	assert.Equal(t, "Bearer sk-ant-oat01-x", h.Get("Authorization"))
	assert.Empty(t, h.Get("x-api-key"), "a subscription token is no API key")
	assert.Equal(t, AnthropicVersion, h.Get("anthropic-version"))
	assert.Equal(t, "oauth-2025-04-20", h.Get("anthropic-beta"))
	assert.Equal(t, "https://api.anthropic.com/v1", cl.BaseURL(""))
	// The betas a client asked for are kept beside the subscription's.
	h = http.Header{}
	h.Set("anthropic-beta", "interleaved-thinking-2025-05-14,oauth-2025-04-20")
	cl.Authorize(h, "sk-ant-oat01-x")
	assert.Equal(t, "interleaved-thinking-2025-05-14,oauth-2025-04-20", h.Get("anthropic-beta"))
	h = http.Header{}
	h.Set("anthropic-beta", "context-1m-2025-08-07")
	cl.Authorize(h, "sk-ant-oat01-x")
	assert.Equal(t, "context-1m-2025-08-07,oauth-2025-04-20", h.Get("anthropic-beta"))

	oa, _ := r.Lookup("openai")
	h = http.Header{}
	oa.Authorize(h, "sk")
	assert.Empty(t, h.Get("Copilot-Integration-Id"), "no other provider's headers")
}

func TestValidCompatibleID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"openai-compatible-local", true},
		{"anthropic-compatible-x", true},
		{"openai-compatible-my.lab_2-b", true},
		{"openai-compatible-123e4567-e89b-12d3-a456-426614174000", true},
		{"openai-compatible-" + strings.Repeat("x", 64), true},
		{"openai-compatible-" + strings.Repeat("x", 65), false},
		{"openai-compatible-my/lab", false},
		{"openai-compatible-a b", false},
		{"openai-compatible-<script>", false},
		{"openai-compatible--x", false},
		{"openai-compatible-.x", false},
		{"openai-compatible-é", false},
		{"openai-compatible-", false},
		{"openai", false},
		{"", false},
	} {
		assert.Equal(t, tc.want, ValidCompatibleID(tc.id), "%q", tc.id)
	}
	// What was stored before the check still looks up.
	s, ok := NewRegistry().Lookup("openai-compatible-my/lab")
	require.True(t, ok)
	assert.Equal(t, FamilyOpenAICompatible, s.Family)
}

// A model asked for by its alias is the listed dated snapshot of it, as
// Anthropic takes "claude-sonnet-4-5" for "claude-sonnet-4-5-20250929": its
// output limit and modalities are the snapshot's. Other suffixes are other
// models.
func TestModelByAliasOfASnapshot(t *testing.T) {
	anthropic, ok := NewRegistry().Lookup("anthropic")
	require.True(t, ok)
	m, ok := anthropic.Model("claude-sonnet-4-5")
	require.True(t, ok, "the alias of a listed snapshot")
	assert.Equal(t, "claude-sonnet-4-5-20250929", m.ID)
	assert.EqualValues(t, 64_000, m.MaxOutput)
	for _, id := range []string{"claude-sonnet-4", "claude-sonnet-4-5-2025", "claude-sonnet", "claude-sonnet-4-5-20250929-x"} {
		_, ok := anthropic.Model(id)
		assert.False(t, ok, id)
	}
	assert.True(t, SnapshotOf("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"))
	assert.False(t, SnapshotOf("gpt-4o-2024-08-06", "gpt-4o"), "OpenAI's dated ids are listed with their alias")
	assert.False(t, SnapshotOf("claude-sonnet-4-5", "claude-sonnet-4-5"))
}

// Earlier turns' reasoning goes back as reasoning_content to the
// openai-compatible family, DeepSeek and Kimi, never to OpenAI (which refuses message members
// it does not know) nor to Anthropic-shaped upstreams.
func TestReasoningBack(t *testing.T) {
	r := NewRegistry()
	for id, want := range map[string]bool{"openai-compatible-x": true, "deepseek": true, "kimi": true, "openai": false, "openrouter": false,
		"anthropic-compatible-x": false, "anthropic": false} {
		s, ok := r.Lookup(id)
		require.True(t, ok, id)
		assert.Equal(t, want, s.ReasoningBack, id)
	}
}
