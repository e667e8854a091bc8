package audio

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// What a transcription's answer says of its usage, in each format: the
// duration (JSON usage, verbose_json, the last subtitle cue) or the tokens
// of a token-billed model; plain text says nothing.
func TestReportUsage(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		want                    Transcription
	}{
		{"duration usage", "application/json", `{"text":"hi","usage":{"type":"duration","seconds":3}}`, Transcription{Seconds: 3}},
		{"verbose_json", "application/json", `{"text":"hi","duration":2.5}`, Transcription{Seconds: 2.5}},
		{"token usage", "application/json; charset=utf-8", `{"text":"hi","usage":{"type":"tokens","input_tokens":120,"output_tokens":5,"total_tokens":125}}`,
			Transcription{InputTokens: 120, OutputTokens: 5, TotalTokens: 125}},
		{"tokens without a total", "application/json", `{"text":"hi","usage":{"input_tokens":7,"output_tokens":2}}`,
			Transcription{InputTokens: 7, OutputTokens: 2, TotalTokens: 9}},
		{"srt", "text/plain", "1\n00:00:00,000 --> 00:00:01,500\nhello\n\n2\n00:00:01,500 --> 00:01:02,250\nthere\n", Transcription{Seconds: 62.25}},
		{"vtt", "text/vtt", "WEBVTT\n\n00:00.000 --> 00:03.120\nhello\n", Transcription{Seconds: 3.12}},
		{"text", "text/plain", "hello there", Transcription{}},
		{"broken cue", "text/plain", "00:00:00,000 --> later\n", Transcription{}},
	} {
		got := Transcription{ContentType: tc.contentType}
		reportUsage(&got, []byte(tc.body))
		tc.want.ContentType = tc.contentType
		assert.Equal(t, tc.want, got, tc.name)
	}
}
