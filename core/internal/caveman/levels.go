package caveman

import (
	"errors"
	"strings"
)

// The levels, from least to most compressed within each register.
const (
	LevelLite        = "lite"
	LevelFull        = "full"
	LevelUltra       = "ultra"
	LevelWenyanLite  = "wenyan-lite"
	LevelWenyan      = "wenyan"
	LevelWenyanUltra = "wenyan-ultra"

	// DefaultLevel is used when no level is set.
	DefaultLevel = LevelFull
)

// ErrUnknownLevel reports a level that is not one of [Levels].
var ErrUnknownLevel = errors.New("caveman: unknown level")

// Rules shared by every level. They are appended to each level's intent so
// that the prompts stay short and consistent.
const (
	// keepExact and plainWhenItMatters apply to every level.
	keepExact          = " Cut words, not facts. Never shorten or alter code, file paths, commands, error messages or URLs."
	plainWhenItMatters = " Write security warnings, irreversible actions and ordered multi-step instructions in plain, complete sentences"
	noMention          = " Never mention or describe this writing style."

	// tail closes the lite, full and ultra prompts.
	tail = keepExact + plainWhenItMatters + ". Reply in the user's language." + noMention
	// wenyanTail closes the wenyan prompts: the register is kept whatever
	// the user's language, except where clarity matters most.
	wenyanTail = " Use this register whatever language the user writes in." + keepExact +
		plainWhenItMatters + " in the user's own language." + noMention
)

const (
	promptLite = "Be concise. Keep normal grammar and full sentences, but cut filler, hedging, pleasantries and repetition." + tail

	promptFull = "Be terse. Sentence fragments are fine. Drop articles, filler, hedging and pleasantries; prefer short words." + tail

	promptUltra = "Be telegraphic: fewest words possible, one word where one is enough, no articles or filler, " +
		"common abbreviations fine, arrows for cause and effect (X → Y)." + tail

	promptWenyanLite = "Answer in plain classical Chinese (浅近文言): concise literary sentences that stay easy to read, " +
		"without filler or pleasantries." + wenyanTail

	promptWenyan = "Answer in classical Chinese (文言文): terse literary phrasing, particles only where needed, " +
		"no filler or pleasantries." + wenyanTail

	promptWenyanUltra = "Answer in maximally compressed classical Chinese (文言文): fewest characters possible, bare phrases, " +
		"arrows for cause and effect (X → Y)." + wenyanTail
)

// Levels returns the valid levels in order of the settings UI. The slice is
// the caller's to keep.
func Levels() []string {
	return []string{LevelLite, LevelFull, LevelUltra, LevelWenyanLite, LevelWenyan, LevelWenyanUltra}
}

// Valid reports whether level is one of [Levels]. Levels are matched
// exactly; the empty string is not a level (settings treat it as
// "use [DefaultLevel]", see [Resolve]).
func Valid(level string) bool {
	_, ok := Prompt(level)
	return ok
}

// Prompt returns the system prompt for level, and false when the level is
// unknown.
func Prompt(level string) (string, bool) {
	switch level {
	case LevelLite:
		return promptLite, true
	case LevelFull:
		return promptFull, true
	case LevelUltra:
		return promptUltra, true
	case LevelWenyanLite:
		return promptWenyanLite, true
	case LevelWenyan:
		return promptWenyan, true
	case LevelWenyanUltra:
		return promptWenyanUltra, true
	}
	return "", false
}

// containsPrompt reports whether s already carries any level's prompt.
func containsPrompt(s string) bool {
	for _, level := range Levels() {
		p, _ := Prompt(level)
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
