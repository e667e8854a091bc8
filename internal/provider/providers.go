package provider

import "time"

// The built-in providers. Each provider is one function returning one Spec
// literal; builtinSpecs lists them in registry order.
//
// Base URLs are the providers' OpenAI-compatible endpoints where they have
// one, since the gateway speaks OpenAI to them (Anthropic is the exception:
// it is spoken to natively). Model ids are the ones the providers publish;
// the static lists are representative and deliberately short, since the
// providers retire models often and the live listing (Listing) is the
// complete, current picture. Context windows are approximate public figures.

func builtinSpecs() []Spec {
	return []Spec{
		openAI(),
		openRouter(),
		anthropic(),
		gemini(),
		groq(),
		mistral(),
		deepSeek(),
		xAI(),
		together(),
		fireworks(),
		cerebras(),
		elevenLabs(),
		githubCopilot(),
		qwen(),
		kimi(),
		codex(),
		claude(),
	}
}

func openAI() Spec {
	return Spec{
		ID: "openai", Alias: "openai", DefaultBaseURL: "https://api.openai.com/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Responses: true, Listing: true,
		// gpt-5 and the o-series answer 400 to max_tokens.
		MaxCompletionTokens: true,
		// "Invalid 'stop': array too long. Expected an array with maximum
		// length 4" (array_above_max_length).
		MaxStopSequences: 4,
		Kinds:            []string{KindLLM, KindEmbedding, KindSTT, KindTTS, KindImage, KindVideo},
		Models: []Model{
			chat("gpt-5.2", 400_000, ModalityText, ModalityImage),
			chat("gpt-5", 400_000, ModalityText, ModalityImage),
			chat("gpt-5-mini", 400_000, ModalityText, ModalityImage),
			chat("gpt-5-nano", 400_000, ModalityText, ModalityImage),
			chat("gpt-4.1", 1_047_576, ModalityText, ModalityImage),
			chat("gpt-4.1-mini", 1_047_576, ModalityText, ModalityImage),
			chat("gpt-4.1-nano", 1_047_576, ModalityText, ModalityImage),
			chat("gpt-4o", 128_000, ModalityText, ModalityImage),
			chat("gpt-4o-mini", 128_000, ModalityText, ModalityImage),
			chat("o3", 200_000, ModalityText, ModalityImage),
			chat("o3-mini", 200_000, ModalityText),
			chat("o4-mini", 200_000, ModalityText, ModalityImage),
			embedding("text-embedding-3-small", 1536, 8191),
			embedding("text-embedding-3-large", 3072, 8191),
			embedding("text-embedding-ada-002", 1536, 8191),
			stt("whisper-1"),
			stt("gpt-4o-transcribe"),
			stt("gpt-4o-mini-transcribe"),
			tts("tts-1"),
			tts("tts-1-hd"),
			tts("gpt-4o-mini-tts"),
			image("gpt-image-1", ModalityText, ModalityImage),
			image("gpt-image-1-mini", ModalityText, ModalityImage),
			video("sora-2", ModalityText, ModalityImage),
		},
	}
}

// openRouter's ids are "<vendor>/<model>"; its listing is public.
func openRouter() Spec {
	return Spec{
		ID: "openrouter", Alias: "openrouter", DefaultBaseURL: "https://openrouter.ai/api/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true, LiveCatalog: true,
		Kinds: []string{KindLLM, KindEmbedding},
		Models: []Model{
			chat("openai/gpt-4o", 128_000, ModalityText, ModalityImage),
			chat("openai/gpt-4o-mini", 128_000, ModalityText, ModalityImage),
			chat("openai/gpt-oss-120b", 131_072, ModalityText),
			chat("anthropic/claude-sonnet-4.6", 1_000_000, ModalityText, ModalityImage),
			chat("meta-llama/llama-3.3-70b-instruct", 131_072, ModalityText),
			chat("deepseek/deepseek-chat", 163_840, ModalityText),
			embedding("openai/text-embedding-3-small", 1536, 8191),
		},
	}
}

// anthropic is spoken to natively: Messages API, x-api-key, and a model
// listing at GET /v1/models. Output limits are the models overview's "Max
// output" (the API refuses a larger max_tokens, naming the limit).
func anthropic() Spec {
	return Spec{
		ID: "anthropic", Alias: "anthropic", DefaultBaseURL: "https://api.anthropic.com/v1",
		Auth: AuthXAPIKey, Format: FormatAnthropic, Listing: true,
		Kinds: []string{KindLLM},
		Models: []Model{
			chat("claude-opus-4-8", 1_000_000, ModalityText, ModalityImage).maxOutput(128_000),
			chat("claude-opus-4-7", 1_000_000, ModalityText, ModalityImage).maxOutput(128_000),
			chat("claude-sonnet-4-6", 1_000_000, ModalityText, ModalityImage).maxOutput(128_000),
			chat("claude-haiku-4-5-20251001", 200_000, ModalityText, ModalityImage).maxOutput(64_000),
			chat("claude-opus-4-5-20251101", 200_000, ModalityText, ModalityImage).maxOutput(64_000),
			chat("claude-sonnet-4-5-20250929", 200_000, ModalityText, ModalityImage).maxOutput(64_000),
		},
	}
}

// gemini is reached through its OpenAI-compatible endpoint, which also
// serves embeddings, images and a model listing.
func gemini() Spec {
	return Spec{
		ID: "gemini", Alias: "gemini", DefaultBaseURL: "https://generativelanguage.googleapis.com/v1beta/openai",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindEmbedding, KindImage},
		Models: []Model{
			chat("gemini-3.5-flash", 1_048_576, ModalityText, ModalityImage, ModalityAudio, ModalityVideo),
			chat("gemini-3.1-pro-preview", 1_048_576, ModalityText, ModalityImage, ModalityAudio, ModalityVideo),
			chat("gemini-3.1-flash-lite", 1_048_576, ModalityText, ModalityImage, ModalityAudio, ModalityVideo),
			chat("gemini-3-flash-preview", 1_048_576, ModalityText, ModalityImage, ModalityAudio, ModalityVideo),
			image("gemini-3.1-flash-image", ModalityText, ModalityImage),
			embedding("gemini-embedding-001", 3072, 2048),
		},
	}
}

func groq() Spec {
	return Spec{
		ID: "groq", Alias: "groq", DefaultBaseURL: "https://api.groq.com/openai/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindSTT},
		Models: []Model{
			chat("llama-3.3-70b-versatile", 131_072, ModalityText),
			chat("llama-3.1-8b-instant", 131_072, ModalityText),
			chat("openai/gpt-oss-120b", 131_072, ModalityText),
			chat("openai/gpt-oss-20b", 131_072, ModalityText),
			chat("qwen/qwen3-32b", 131_072, ModalityText),
			chat("meta-llama/llama-4-scout-17b-16e-instruct", 131_072, ModalityText, ModalityImage),
			stt("whisper-large-v3"),
			stt("whisper-large-v3-turbo"),
		},
	}
}

// mistral's "-latest" aliases follow each line's newest version.
func mistral() Spec {
	return Spec{
		ID: "mistral", Alias: "mistral", DefaultBaseURL: "https://api.mistral.ai/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindEmbedding},
		Models: []Model{
			chat("mistral-large-latest", 262_144, ModalityText, ModalityImage),
			chat("mistral-medium-latest", 262_144, ModalityText, ModalityImage),
			chat("mistral-small-latest", 262_144, ModalityText, ModalityImage),
			chat("magistral-medium-latest", 131_072, ModalityText, ModalityImage),
			chat("codestral-latest", 262_144, ModalityText),
			chat("ministral-8b-latest", 131_072, ModalityText),
			embedding("mistral-embed", 1024, 8192),
		},
	}
}

func deepSeek() Spec {
	return Spec{
		ID: "deepseek", Alias: "deepseek", DefaultBaseURL: "https://api.deepseek.com",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		// Thinking mode (on by default) answers 400 to a tool call's turn
		// sent back without its reasoning_content, and ignores it on other
		// turns.
		ReasoningBack: true,
		Kinds:         []string{KindLLM},
		Models: []Model{
			chat("deepseek-chat", 128_000, ModalityText),
			chat("deepseek-reasoner", 128_000, ModalityText),
		},
	}
}

func xAI() Spec {
	return Spec{
		ID: "xai", Alias: "xai", DefaultBaseURL: "https://api.x.ai/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindImage},
		Models: []Model{
			chat("grok-4.3", 1_000_000, ModalityText, ModalityImage),
			chat("grok-4.20-non-reasoning", 2_000_000, ModalityText, ModalityImage),
			chat("grok-3-mini", 131_072, ModalityText),
			image("grok-imagine-image", ModalityText, ModalityImage),
		},
	}
}

// together's ids are "<org>/<model>"; its listing is a bare JSON array.
func together() Spec {
	return Spec{
		ID: "together", Alias: "together", DefaultBaseURL: "https://api.together.xyz/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindEmbedding, KindImage, KindSTT},
		Models: []Model{
			chat("meta-llama/Llama-3.3-70B-Instruct-Turbo", 131_072, ModalityText),
			chat("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", 1_048_576, ModalityText, ModalityImage),
			chat("openai/gpt-oss-120b", 131_072, ModalityText),
			chat("deepseek-ai/DeepSeek-R1", 163_840, ModalityText),
			image("black-forest-labs/FLUX.1-schnell", ModalityText),
			embedding("BAAI/bge-large-en-v1.5", 1024, 512),
			stt("openai/whisper-large-v3"),
		},
	}
}

// fireworks' model ids are "accounts/fireworks/models/<model>".
func fireworks() Spec {
	return Spec{
		ID: "fireworks", Alias: "fireworks", DefaultBaseURL: "https://api.fireworks.ai/inference/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM, KindEmbedding},
		Models: []Model{
			chat("accounts/fireworks/models/llama-v3p3-70b-instruct", 131_072, ModalityText),
			chat("accounts/fireworks/models/gpt-oss-120b", 131_072, ModalityText),
			chat("accounts/fireworks/models/kimi-k2-instruct-0905", 262_144, ModalityText),
			chat("accounts/fireworks/models/deepseek-r1-0528", 163_840, ModalityText),
			embedding("nomic-ai/nomic-embed-text-v1.5", 768, 8192),
		},
	}
}

// cerebras retires models quickly; the listing is authoritative.
func cerebras() Spec {
	return Spec{
		ID: "cerebras", Alias: "cerebras", DefaultBaseURL: "https://api.cerebras.ai/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM},
		Models: []Model{
			chat("gpt-oss-120b", 131_072, ModalityText),
		},
	}
}

// elevenLabs is an audio provider spoken to in its own API: text-to-speech
// at {base}/text-to-speech/{voice_id}/stream, voices at {base}/voices,
// speech-to-text at {base}/speech-to-text, all with xi-api-key. Its model
// listing does not have the OpenAI shape, so the static list is used.
func elevenLabs() Spec {
	return Spec{
		ID: "elevenlabs", Alias: "elevenlabs", DefaultBaseURL: "https://api.elevenlabs.io/v1",
		Auth: AuthXIAPIKey, Format: FormatElevenLabs,
		Kinds: []string{KindTTS, KindSTT},
		Models: []Model{
			tts("eleven_multilingual_v2"),
			tts("eleven_flash_v2_5"),
			tts("eleven_turbo_v2_5"),
			tts("eleven_v3"),
			stt("scribe_v2"),
			stt("scribe_v1"),
		},
	}
}

// The OAuth subscription providers: connections are created by a login
// (internal/oauth), and their access token is the credential.

// githubCopilot's base URL is usually replaced by the API host the Copilot
// token names (endpoints.api).
func githubCopilot() Spec {
	return Spec{
		ID: "github-copilot", Alias: "copilot", DefaultBaseURL: "https://api.githubcopilot.com",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		// Copilot refuses requests that do not name an editor and an
		// integration.
		Headers: map[string]string{
			"Editor-Version":         "vscode/1.104.0",
			"Editor-Plugin-Version":  "copilot-chat/0.31.0",
			"Copilot-Integration-Id": "vscode-chat",
			"User-Agent":             "GitHubCopilotChat/0.31.0",
			"Openai-Intent":          "conversation-panel",
		},
		Kinds: []string{KindLLM},
		Models: []Model{
			chat("gpt-4.1", 128_000, ModalityText, ModalityImage),
			chat("gpt-4o", 128_000, ModalityText, ModalityImage),
			chat("claude-sonnet-4", 128_000, ModalityText, ModalityImage),
		},
	}
}

// qwen's base URL is usually replaced by the resource_url of the login.
func qwen() Spec {
	return Spec{
		ID: "qwen", Alias: "qwen", DefaultBaseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		Kinds: []string{KindLLM},
		Models: []Model{
			chat("qwen3-coder-plus", 1_000_000, ModalityText),
			chat("qwen3-coder-flash", 1_000_000, ModalityText),
		},
	}
}

func kimi() Spec {
	return Spec{
		ID: "kimi", Alias: "kimi", DefaultBaseURL: "https://api.kimi.com/coding/v1",
		Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
		// Kimi's thinking models keep their reasoning across tool calls.
		ReasoningBack: true,
		Kinds:         []string{KindLLM},
		Models: []Model{
			chat("kimi-for-coding", 262_144, ModalityText),
		},
	}
}

// codex is the ChatGPT-subscription backend of OpenAI's Codex CLI.
func codex() Spec {
	return Spec{
		ID: "codex", Alias: "codex", DefaultBaseURL: "https://chatgpt.com/backend-api/codex",
		// The ChatGPT backend speaks only Responses, at {base}/responses.
		Auth: AuthBearer, Format: FormatResponses, Responses: true, Listing: true,
		Headers: map[string]string{
			"OpenAI-Beta": "responses=experimental",
			"Originator":  "codex_cli_rs",
		},
		// The login's id_token names the ChatGPT account (internal/oauth).
		DataHeaders: map[string]string{"chatgpt-account-id": "chatgpt_account_id"},
		StreamOnly:  true,
		// The backend answers 400 "Unsupported parameter" to these, which
		// Claude Code sends with every request (max_tokens becomes
		// max_output_tokens), and "Store must be set to false" unless told
		// so; the gateway keeps stored responses itself.
		Omit:    []string{"max_output_tokens", "temperature", "top_p"},
		Require: map[string]string{"store": "false"},
		Kinds:   []string{KindLLM},
		Models: []Model{
			chat("gpt-5-codex", 400_000, ModalityText, ModalityImage),
			chat("gpt-5", 400_000, ModalityText, ModalityImage),
		},
	}
}

// claude is a Claude Pro/Max subscription, spoken to as Claude Code speaks
// to Anthropic: Messages with the login's OAuth token as a bearer token
// (not x-api-key) and the OAuth beta, merged with the client's betas.
func claude() Spec {
	a := anthropic()
	return Spec{
		ID: "claude", Alias: "claude", DefaultBaseURL: "https://api.anthropic.com/v1",
		Auth: AuthBearer, Format: FormatAnthropic, Listing: true,
		Headers: map[string]string{
			"anthropic-version": AnthropicVersion,
			"anthropic-beta":    "oauth-2025-04-20",
		},
		// Anthropic connections may keep "claude" as their prefix.
		Unreserved: true,
		// Anthropic answers other clients' requests made with a
		// subscription token with a 400, unless they begin as Claude
		// Code's do.
		SystemFirst: "You are Claude Code, Anthropic's official CLI for Claude.",
		// `claude -p`'s line (its own set also holds SystemFirst and
		// SystemFirst ", running within the Claude Agent SDK.").
		SystemFirstAlike: []string{"You are a Claude agent, built on Anthropic's Claude Agent SDK."},
		Kinds:            []string{KindLLM},
		Models:           a.Models,
	}
}

// refreshPolicy is the proactive token refresh of the OAuth providers by
// provider id (reference/gateway.md "Proactive refresh lead times"). A Spec's
// own RefreshLead and RefreshMaxAge win; ids not named here get
// DefaultRefreshLead.
func refreshPolicy(id string) (lead, maxAge time.Duration) {
	switch id {
	case "claude", "claude-code":
		return 4 * time.Hour, 0
	case "codex":
		// Codex tokens are also refreshed when the last refresh is over
		// 8 days old, whatever their expiry says.
		return 5 * 24 * time.Hour, 8 * 24 * time.Hour
	case "qwen":
		return 20 * time.Minute, 0
	case "gemini-cli", "antigravity":
		return 5 * time.Minute, 0
	case "iflow":
		return 24 * time.Hour, 0
	case "github-copilot", "copilot":
		// The short-lived Copilot token exchanged from the GitHub token.
		return 5 * time.Minute, 0
	}
	return DefaultRefreshLead, 0
}

// Model constructors. Each call builds fresh slices, so no two models (or
// two registries) share state.

func chat(id string, contextWindow int, input ...string) Model {
	return Model{ID: id, Kind: KindLLM, Input: input, Output: []string{ModalityText}, ContextWindow: contextWindow}
}

// maxOutput sets the model's output limit.
func (m Model) maxOutput(n int) Model {
	m.MaxOutput = n
	return m
}

func embedding(id string, dimensions, contextWindow int) Model {
	return Model{ID: id, Kind: KindEmbedding, Input: []string{ModalityText}, Dimensions: dimensions, ContextWindow: contextWindow}
}

func stt(id string) Model {
	return Model{ID: id, Kind: KindSTT, Input: []string{ModalityAudio}, Output: []string{ModalityText}}
}

func tts(id string) Model {
	return Model{ID: id, Kind: KindTTS, Input: []string{ModalityText}, Output: []string{ModalityAudio}}
}

func image(id string, input ...string) Model {
	return Model{ID: id, Kind: KindImage, Input: input, Output: []string{ModalityImage}}
}

func video(id string, input ...string) Model {
	return Model{ID: id, Kind: KindVideo, Input: input, Output: []string{ModalityVideo}}
}
