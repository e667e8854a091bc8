package audio

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func at(s float64) *float64 { return &s }

// word and space build ElevenLabs' word timestamps.
func word(text string, start, end float64) timedWord {
	return timedWord{Text: text, Start: at(start), End: at(end), Type: "word"}
}

func space(at float64) timedWord {
	return timedWord{Text: " ", Start: &at, End: &at, Type: "spacing"}
}

// spaced interleaves spacing entries between words, as ElevenLabs answers.
func spaced(words ...timedWord) []timedWord {
	var out []timedWord
	for i, w := range words {
		if i > 0 {
			out = append(out, timedWord{Text: " ", Start: words[i-1].End, End: words[i-1].End, Type: "spacing"})
		}
		out = append(out, w)
	}
	return out
}

func TestAudioCues(t *testing.T) {
	long := make([]timedWord, 0, 20)
	for i := range 20 { // 20 × "word" and 19 spaces: 99 characters in 10 s
		long = append(long, word("word", float64(i)*0.5, float64(i)*0.5+0.4))
	}
	wide := make([]timedWord, 0, 10)
	for i := range 10 { // 10 × "wordiness" and 9 spaces: 99 characters in 1 s
		wide = append(wide, word("wordiness", float64(i)*0.1, float64(i)*0.1+0.1))
	}
	for _, tc := range []struct {
		name  string
		words []timedWord
		want  []cue
	}{
		{"none", nil, nil},
		{"one sentence", spaced(word("Hello", 0, 0.5), word("world!", 0.6, 1.2)),
			[]cue{{start: 0, end: 1.2, text: "Hello world!"}}},
		{"a cue per sentence", spaced(word("Hi.", 0, 0.4), word("How", 1, 1.2), word("are", 1.2, 1.4), word("you?", 1.4, 1.9), word("Fine", 2.5, 3)),
			[]cue{{0, 0.4, "Hi.", ""}, {1, 1.9, "How are you?", ""}, {2.5, 3, "Fine", ""}}},
		{"a closing quote after the stop", spaced(word(`"Go."`, 0, 1), word("Then", 2, 3)),
			[]cue{{0, 1, `"Go."`, ""}, {2, 3, "Then", ""}}},
		{"no spacing entries: words joined by a space", []timedWord{word("Transcribed", 0, 0.5), word("bytes", 0.5, 1.25)},
			[]cue{{0, 1.25, "Transcribed bytes", ""}}},
		{"the transcript's own spacing", []timedWord{word("こんにちは", 0, 1), {Text: "", Type: "spacing"}, word("世界。", 1, 2)},
			[]cue{{0, 2, "こんにちは世界。", ""}}},
		{"audio events are kept", spaced(word("Well", 0, 0.5), timedWord{Text: "(laughs)", Start: at(0.6), End: at(1.5), Type: "audio_event"}, word("ok.", 1.6, 2)),
			[]cue{{0, 2, "Well (laughs) ok.", ""}}},
		{"a new speaker, a new cue", []timedWord{
			{Text: "Yes", Start: at(0), End: at(0.5), Type: "word", SpeakerID: "speaker_0"}, space(0.5),
			{Text: "no", Start: at(0.6), End: at(1), Type: "word", SpeakerID: "speaker_1"},
		}, []cue{{0, 0.5, "Yes", "speaker_0"}, {0.6, 1, "no", "speaker_1"}}},
		{"at most 7 seconds", spaced(long...), []cue{
			{0, 6.9, "word word word word word word word word word word word word word word", ""},
			{7, 9.9, "word word word word word word", ""},
		}},
		{"at most 84 characters", spaced(wide...), []cue{
			{0, 0.8, "wordiness wordiness wordiness wordiness wordiness wordiness wordiness wordiness", ""},
			{0.8, 1, "wordiness wordiness", ""},
		}},
		{"times missing: the last time seen", spaced(word("a", 0, 1), timedWord{Text: "b", Type: "word"}, word("c.", 1.5, 2)),
			[]cue{{0, 2, "a b c.", ""}}},
		{"whitespace in a word does not break the cue", spaced(word("line\n\none", 0, 1)),
			[]cue{{0, 1, "line one", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cuesOf(tc.words))
		})
	}
}

func TestAudioSubtitles(t *testing.T) {
	cues := []cue{{start: 0, end: 1.2, text: "Hello world."}, {start: 3725.0004, end: 3727.9996, text: "Later."}}
	assert.Equal(t, "1\n00:00:00,000 --> 00:00:01,200\nHello world.\n\n2\n01:02:05,000 --> 01:02:08,000\nLater.\n\n", string(subtitles(cues, false)))
	assert.Equal(t, "WEBVTT\n\n00:00:00.000 --> 00:00:01.200\nHello world.\n\n01:02:05.000 --> 01:02:08.000\nLater.\n\n", string(subtitles(cues, true)))
	assert.Equal(t, "WEBVTT\n\n", string(subtitles(nil, true)), "silence")
	assert.Empty(t, subtitles(nil, false))

	// What the metering of subtitles reads back is the end of the last cue.
	assert.Equal(t, 3728.0, lastCueEnd(subtitles(cues, false)))
	assert.Equal(t, 3728.0, lastCueEnd(subtitles(cues, true)))

	assert.Equal(t, "00:00:00,005", cueTime(0.0049, ','))
	assert.Equal(t, "00:00:00.000", cueTime(-1, '.'))
	assert.Equal(t, "100:00:00,000", cueTime(360000, ','))
}

func TestAudioWordsEnd(t *testing.T) {
	assert.Zero(t, wordsEnd(nil))
	assert.Equal(t, 2.5, wordsEnd([]timedWord{word("a", 0, 2.5), {Text: "b", Type: "word"}, space(2.5)}))
	assert.Equal(t, 3.0, wordsEnd([]timedWord{word("a", 0, 3), word("b", 1, 2)}), "the latest, not the last")
}
