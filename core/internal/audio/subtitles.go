package audio

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textPlain is the content type of OpenAI's text, srt and vtt answers.
const textPlain = "text/plain; charset=utf-8"

// Subtitles made from word timestamps are cut as subtitles usually are: a
// cue ends with its sentence, when the speaker changes, or before it would
// hold more than two lines of 42 characters or stay longer than 7 seconds.
const (
	maxCueChars   = 84
	maxCueSeconds = 7.0
)

// timedWord is one entry of ElevenLabs' word timestamps: a word, the
// spacing between two words, or an audio event ("(laughter)"). Times are
// in seconds and may be null.
type timedWord struct {
	Text      string   `json:"text"`
	Start     *float64 `json:"start"`
	End       *float64 `json:"end"`
	Type      string   `json:"type"`
	SpeakerID string   `json:"speaker_id"`
}

// cue is one subtitle.
type cue struct {
	start, end float64
	text       string
	speaker    string
}

// wordsEnd is the latest end time of the words, 0 when none has one.
func wordsEnd(words []timedWord) float64 {
	end := 0.0
	for _, w := range words {
		if w.End != nil && *w.End > end {
			end = *w.End
		}
	}
	return end
}

// timed reports whether any word has a time.
func timed(words []timedWord) bool {
	return slices.ContainsFunc(words, func(w timedWord) bool { return w.Start != nil || w.End != nil })
}

// untimedWords are the words of a transcript, without times.
func untimedWords(text string) []timedWord {
	fields := strings.Fields(text)
	words := make([]timedWord, len(fields))
	for i, f := range fields {
		words[i] = timedWord{Text: f, Type: "word"}
	}
	return words
}

// spread times words that have none: each takes a share of the seconds in
// proportion to its length, in order, the spacing between two words
// taking none. It is an estimate, for an answer that carries no timestamps.
func spread(words []timedWord, seconds float64) []timedWord {
	total := 0
	for _, w := range words {
		if w.Type != "spacing" {
			total += utf8.RuneCountInString(w.Text)
		}
	}
	if total == 0 {
		return words
	}
	out := make([]timedWord, len(words))
	done := 0
	for i, w := range words {
		start := seconds * float64(done) / float64(total)
		if w.Type != "spacing" {
			done += utf8.RuneCountInString(w.Text)
		}
		end := seconds * float64(done) / float64(total)
		w.Start, w.End = &start, &end
		out[i] = w
	}
	return out
}

// cuesOf cuts timed words into cues. Spacing entries separate the words as
// the transcript does; an answer without any is read as words separated by
// one space. A word without times takes the latest time seen before it.
func cuesOf(words []timedWord) []cue {
	spaced := slices.ContainsFunc(words, func(w timedWord) bool { return w.Type == "spacing" })
	var (
		cues  []cue
		cur   cue
		text  strings.Builder
		chars int    // runes in text
		open  bool   // cur holds a word
		gap   string // spacing seen since the last word of cur
		last  float64
	)
	flush := func() {
		if open {
			cur.text = strings.Join(strings.Fields(text.String()), " ")
			if cur.text != "" {
				cues = append(cues, cur)
			}
		}
		open, gap, chars = false, "", 0
		text.Reset()
	}
	for _, w := range words {
		if w.Type == "spacing" {
			if open {
				gap += w.Text
			}
			continue
		}
		if strings.TrimSpace(w.Text) == "" {
			continue
		}
		start := last
		if w.Start != nil {
			start = *w.Start
		}
		end := start
		if w.End != nil && *w.End > start {
			end = *w.End
		}
		last = max(last, end)
		if open {
			sep := gap
			if !spaced {
				sep = " "
			}
			n := utf8.RuneCountInString(sep) + utf8.RuneCountInString(w.Text)
			if w.SpeakerID != cur.speaker || chars+n > maxCueChars || end-cur.start > maxCueSeconds {
				flush()
			} else {
				text.WriteString(sep)
				chars += utf8.RuneCountInString(sep)
				gap = ""
			}
		}
		if !open {
			cur, open = cue{start: start, end: end, speaker: w.SpeakerID}, true
		}
		text.WriteString(w.Text)
		chars += utf8.RuneCountInString(w.Text)
		cur.end = max(cur.end, end)
		if endsSentence(w.Text) {
			flush()
		}
	}
	flush()
	return cues
}

// endsSentence reports whether a word closes its sentence.
func endsSentence(word string) bool {
	r, _ := utf8.DecodeLastRuneInString(strings.TrimRight(word, `"')]»”’`))
	return strings.ContainsRune(".!?…。！？", r)
}

// subtitles renders cues as OpenAI's srt answer (numbered cues,
// 00:00:01,000) or its vtt answer (a WEBVTT header, 00:00:01.000).
func subtitles(cues []cue, vtt bool) []byte {
	var b strings.Builder
	sep := byte(',')
	if vtt {
		b.WriteString("WEBVTT\n\n")
		sep = '.'
	}
	for i, c := range cues {
		if !vtt {
			b.WriteString(strconv.Itoa(i + 1))
			b.WriteByte('\n')
		}
		b.WriteString(cueTime(c.start, sep))
		b.WriteString(" --> ")
		b.WriteString(cueTime(c.end, sep))
		b.WriteByte('\n')
		b.WriteString(c.text)
		b.WriteString("\n\n")
	}
	return []byte(b.String())
}

// cueTime formats seconds as HH:MM:SS<sep>mmm.
func cueTime(seconds float64, sep byte) string {
	ms := int64(math.Round(max(seconds, 0) * 1000))
	return fmt.Sprintf("%02d:%02d:%02d%c%03d", ms/3_600_000, ms/60_000%60, ms/1000%60, sep, ms%1000)
}
