package audio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
)

// VoiceProviders are the providers whose voices can be listed.
var VoiceProviders = []string{"openai", "elevenlabs"}

// ErrUnsupportedVoiceProvider is returned for a provider whose voices
// cannot be listed.
var ErrUnsupportedVoiceProvider = errors.New("voices are not listed for this provider")

// Voice is a text-to-speech voice.
type Voice struct {
	ID     string
	Name   string
	Lang   string
	Gender string
	// Model is usable as the model of /v1/audio/speech.
	Model string
	// langs are every language the voice is known to speak ("*": any).
	langs []string
}

// Voices are a listing.
type Voices struct {
	Voices []Voice
	// Upstream is the time spent waiting on upstreams.
	Upstream time.Duration
}

// ElevenLabsVoiceModel is the model whose ElevenLabs voices are listed.
const ElevenLabsVoiceModel = "eleven_multilingual_v2"

// LangMultilingual is the lang of voices that speak any language.
const LangMultilingual = "multilingual"

// openAIVoices are OpenAI's built-in voices. OpenAI does not publish
// genders; these are how the voices are commonly described.
var openAIVoices = []struct{ id, gender string }{
	{"alloy", "neutral"}, {"ash", "male"}, {"ballad", "male"}, {"coral", "female"},
	{"echo", "male"}, {"fable", "neutral"}, {"nova", "female"}, {"onyx", "male"},
	{"sage", "female"}, {"shimmer", "female"}, {"verse", "male"}, {"marin", "female"},
	{"cedar", "male"},
}

// builtInVoice reports whether voice is one of OpenAI's built-in voices.
func builtInVoice(voice string) bool {
	for _, v := range openAIVoices {
		if v.id == voice {
			return true
		}
	}
	return false
}

// tts1Voices are the built-in voices tts-1 and tts-1-hd speak: all but
// ballad, verse, marin and cedar.
var tts1Voices = []string{"alloy", "ash", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer"}

// openAIVoiceModels are OpenAI's speech models, in the order a voice is
// listed with the first of them a connection enables that speaks it.
var openAIVoiceModels = []string{"gpt-4o-mini-tts", "tts-1", "tts-1-hd"}

// openAIModelVoices are the built-in voices each of openAIVoiceModels
// speaks (nil: every one).
var openAIModelVoices = map[string][]string{
	"gpt-4o-mini-tts": nil,
	"tts-1":           tts1Voices,
	"tts-1-hd":        tts1Voices,
}

// openAISpeaks reports whether OpenAI's model speaks the built-in voice.
func openAISpeaks(model, voice string) bool {
	voices, ok := openAIModelVoices[model]
	return ok && (voices == nil || contains(voices, voice))
}

// Voices lists a provider's voices that speak lang (any when empty): the
// fixed list for OpenAI, the account's voices (with a connection's key) for
// ElevenLabs. A provider's voices are listed only when the machine has a
// connection that can speak them; else the error is the one a speech
// request would get (routing.ErrNoCredentials).
func (s *Service) Voices(ctx context.Context, machineID, providerID, lang string) (Voices, dispatch.Result, error) {
	var out Voices
	var res dispatch.Result
	var err error
	switch providerID {
	case "openai":
		// Each voice is spoken by the first of OpenAI's speech models the
		// machine can speak with that speaks it; with none, the error is the
		// first model's.
		var speakers []string
		var first error
		for i, m := range openAIVoiceModels {
			switch err := s.canSpeak(ctx, machineID, "openai/"+m); {
			case err == nil:
				speakers = append(speakers, m)
			case i == 0:
				first = err
			}
		}
		if len(speakers) == 0 {
			return out, res, first
		}
		for _, v := range openAIVoices {
			for _, m := range speakers {
				if openAISpeaks(m, v.id) {
					out.Voices = append(out.Voices, Voice{
						ID: v.id, Name: strings.ToUpper(v.id[:1]) + v.id[1:], Lang: LangMultilingual, Gender: v.gender,
						Model: VoiceModel("openai", m, v.id), langs: []string{"*"},
					})
					break
				}
			}
		}
	case "elevenlabs":
		res, err = s.d.Do(ctx, dispatch.Request{MachineID: machineID, Model: "elevenlabs/" + ElevenLabsVoiceModel, Supports: elevenLabs},
			func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
				start := time.Now()
				defer func() { out.Upstream += time.Since(start) }()
				w := s.watch(ctx)
				defer w.close()
				v, err := elevenLabsVoices(w, t, c)
				out.Voices = v
				return err
			})
	default:
		return out, res, ErrUnsupportedVoiceProvider
	}
	if err != nil || lang == "" {
		return out, res, err
	}
	kept := out.Voices[:0]
	for _, v := range out.Voices {
		if speaks(v.langs, lang) {
			kept = append(kept, v)
		}
	}
	out.Voices = kept
	return out, res, nil
}

// canSpeak returns nil when the machine has a connection that can serve
// model on /v1/audio/speech, else what a speech request for model would
// get: routing.ErrNoCredentials (no usable connection, or none of a
// provider that speaks), routing.ErrModelNotFound. The model is resolved
// as a request's would be, aliases and combos included; no upstream is
// called.
func (s *Service) canSpeak(ctx context.Context, machineID, model string) error {
	targets, err := s.d.Resolve(ctx, dispatch.Request{MachineID: machineID, Model: model})
	if err != nil {
		return err
	}
	for _, t := range targets {
		if SupportsSpeech(t.Spec) && len(t.Connections) > 0 {
			return nil
		}
	}
	return routing.ErrNoCredentials
}

// speaks reports whether one of langs is lang, comparing base languages
// ("en" matches "en-US").
func speaks(langs []string, lang string) bool {
	base := func(s string) string {
		s = strings.ToLower(s)
		if i := strings.IndexAny(s, "-_"); i > 0 {
			return s[:i]
		}
		return s
	}
	want := base(lang)
	for _, l := range langs {
		if l == "*" || base(l) == want {
			return true
		}
	}
	return false
}

// elevenLabsVoices is GET {base}/voices.
func elevenLabsVoices(w *watchdog, t routing.Target, c *dispatch.Conn) ([]Voice, error) {
	hreq, err := http.NewRequestWithContext(w.call, http.MethodGet, c.BaseURL+"/voices", nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := send(c, hreq, w)
	if err != nil {
		return nil, err
	}
	raw, err := readAll(resp)
	if err != nil {
		return nil, w.err(err)
	}
	var body struct {
		Voices []struct {
			VoiceID string `json:"voice_id"`
			Name    string `json:"name"`
			Labels  struct {
				Gender   string `json:"gender"`
				Language string `json:"language"`
			} `json:"labels"`
			VerifiedLanguages []struct {
				Language string `json:"language"`
			} `json:"verified_languages"`
			FineTuning struct {
				Language string `json:"language"`
			} `json:"fine_tuning"`
		} `json:"voices"`
	}
	if json.Unmarshal(raw, &body) != nil || body.Voices == nil {
		return nil, badUpstream("voice list")
	}
	out := make([]Voice, 0, len(body.Voices))
	for _, v := range body.Voices {
		if v.VoiceID == "" {
			continue
		}
		var langs []string
		for _, l := range append([]string{v.Labels.Language}, v.FineTuning.Language) {
			if l != "" {
				langs = append(langs, l)
			}
		}
		for _, l := range v.VerifiedLanguages {
			if l.Language != "" {
				langs = append(langs, l.Language)
			}
		}
		lang := ""
		if len(langs) > 0 {
			lang = langs[0]
		}
		out = append(out, Voice{
			ID: v.VoiceID, Name: v.Name, Lang: lang, Gender: v.Labels.Gender,
			Model: VoiceModel(t.Alias, ElevenLabsVoiceModel, v.VoiceID), langs: langs,
		})
	}
	return out, nil
}

// VoiceModels are the models a provider's voices are spoken with.
func VoiceModels(providerID string) []string {
	if providerID == "openai" {
		return openAIVoiceModels
	}
	return []string{ElevenLabsVoiceModel}
}

// SupportedVoiceProvider reports whether a provider's voices are listed.
func SupportedVoiceProvider(id string) bool {
	return contains(VoiceProviders, id)
}
