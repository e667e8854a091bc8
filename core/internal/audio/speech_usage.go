package audio

import (
	"bytes"
	"encoding/json"
	"math"
)

// speechAudioDone is the type of the last event of a speech streamed as
// server-sent events, which holds the usage.
const speechAudioDone = "speech.audio.done"

// maxDoneLine bounds the line speechDone keeps: the done event's data line
// is short, the audio deltas' are long and are let pass unread.
const maxDoneLine = 4 << 10

// speechDone reads the usage of a speech streamed as server-sent events
// from its bytes as relay passes them on (an io.Writer a TeeReader writes
// to): the speech.audio.done event's, whose data line is
// {"type":"speech.audio.done","usage":{"input_tokens","output_tokens","total_tokens"}},
// into out. Lines are split at line feeds, however the bytes came; a line
// longer than maxDoneLine is no done event and is skipped without being
// kept.
type speechDone struct {
	out  *SpeechResult
	line []byte
	// long marks the line being read as past maxDoneLine.
	long bool
}

func (d *speechDone) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if !d.long {
			if len(d.line)+len(part) > maxDoneLine {
				d.long, d.line = true, d.line[:0]
			} else {
				d.line = append(d.line, part...)
			}
		}
		if i < 0 {
			break
		}
		if !d.long {
			d.read(d.line)
		}
		d.line, d.long = d.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// read takes the usage of a line that is the done event's data.
func (d *speechDone) read(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(speechAudioDone)) {
		return
	}
	var ev struct {
		Type  string `json:"type"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != speechAudioDone {
		return
	}
	u := ev.Usage
	d.out.InputTokens, d.out.OutputTokens, d.out.TotalTokens = billedTokens(u.InputTokens, u.OutputTokens, u.TotalTokens)
}

// billedTokens are an upstream's token counts as they are billed, as a chat
// answer's are: negatives count as zero and a missing total is the sum (at
// most math.MaxInt64), so a bad upstream cannot make a bill negative or
// wrap it around.
func billedTokens(input, output, total int64) (int64, int64, int64) {
	input, output, total = max(input, 0), max(output, 0), max(total, 0)
	if total == 0 {
		total = input + output
		if total < 0 {
			total = math.MaxInt64
		}
	}
	return input, output, total
}
