package provider

import "strings"

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

// GuessKind guesses a model's kind from its id when no record says.
func GuessKind(id string) string {
	s := strings.ToLower(id)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("embed"):
		return KindEmbedding
	case has("whisper", "transcribe", "stt"):
		return KindSTT
	case has("tts", "speech", "voice"):
		return KindTTS
	case has("video", "sora"):
		return KindVideo
	case has("music", "lyria"):
		return KindMusic
	case has("image", "dall-e", "flux", "sdxl", "stable-diffusion"):
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
