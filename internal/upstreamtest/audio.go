package upstreamtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// upload is a parsed multipart/form-data audio request.
type upload struct {
	ok       bool // the body is a well-formed multipart form
	fields   map[string]string
	hasFile  bool
	fileName string
	file     []byte
}

// parseUpload parses a multipart/form-data body.
func parseUpload(contentType string, body []byte) *upload {
	up := &upload{fields: map[string]string{}}
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return up
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return up
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return up
		}
		if name := p.FormName(); name == "file" {
			up.hasFile, up.fileName, up.file = true, p.FileName(), data
		} else if name != "" {
			up.fields[name] = string(data)
		}
	}
	up.ok = true
	return up
}

// Transcript returns the text the fake transcribes (or translates) from
// the uploaded audio: two sentences naming the size and CRC-32 of the file,
// so that tests can check which file reached the upstream.
func Transcript(audio []byte) string {
	b := make([]byte, 0, 64)
	b = append(b, "Transcribed "...)
	b = strconv.AppendInt(b, int64(len(audio)), 10)
	b = append(b, " bytes of audio. Checksum "...)
	sum := crc32.ChecksumIEEE(audio)
	for i := 28; i >= 0; i -= 4 {
		b = append(b, hexDigits[sum>>uint(i)&0xf])
	}
	return string(append(b, '.'))
}

// segmentSeconds is the duration the fake gives every transcript sentence.
const segmentSeconds = 2

// tokenBilled reports whether a transcription model is billed by tokens, as
// OpenAI's gpt-4o-transcribe family is: its json answer reports tokens, not
// seconds, and it has no verbose_json or subtitles.
func tokenBilled(model string) bool {
	return strings.Contains(model, "-transcribe")
}

// TranscriptionTokens returns the input and output tokens the fake reports
// for transcribing audio with a token-billed model: an audio token per 32
// bytes, a text token per 4 characters of the transcript.
func TranscriptionTokens(audio []byte) (input, output int) {
	return len(audio)/32 + 1, len(Transcript(audio))/4 + 1
}

// TranscriptDeltas returns the transcript.text.delta pieces in which the
// fake streams the transcript of audio (a token-billed model asked with
// stream=true): its words, each with the space before it.
func TranscriptDeltas(audio []byte) []string {
	return splitWords(Transcript(audio))
}

// sentences splits a transcript after each ". ".
func sentences(text string) []string {
	var out []string
	for {
		i := strings.Index(text, ". ")
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+2:]
	}
}

// timestamp formats seconds as HH:MM:SS<sep>mmm.
func timestamp(seconds int, sep byte) string {
	b := make([]byte, 0, 12)
	for _, v := range []int{seconds / 3600, seconds / 60 % 60, seconds % 60} {
		if len(b) > 0 {
			b = append(b, ':')
		}
		b = append(b, byte('0'+v/10), byte('0'+v%10))
	}
	return string(append(b, sep, '0', '0', '0'))
}

// serveTranscription answers POST /v1/audio/transcriptions and
// /v1/audio/translations (task "transcribe" or "translate").
func (s *Server) serveTranscription(o *output, up *upload, task string) {
	switch {
	case !up.ok:
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", "Invalid Content-Type header ('multipart/form-data' expected)"))
		return
	case up.fields["model"] == "":
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAINoModel))
		return
	case !up.hasFile:
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", "1 validation error for Request\nbody -> file\n  field required (type=value_error.missing)"))
		return
	}
	text := Transcript(up.file)
	segs := sentences(text)
	seconds := segmentSeconds * len(segs)

	model, format := up.fields["model"], up.fields["response_format"]
	if tokenBilled(model) {
		switch format {
		case "", "json", "text":
		default:
			o.sendJSON(http.StatusBadRequest, invalidRequest("unsupported_value", "response_format",
				"response_format '"+format+"' is not compatible with model '"+model+"'. Use 'json' or 'text' instead."))
			return
		}
	}
	if tokenBilled(model) && up.fields["stream"] == "true" {
		s.streamTranscription(o, up.file)
		return
	}
	switch format {
	case "", "json":
		b := append([]byte(`{"text":`), appendString(nil, text)...)
		if tokenBilled(model) {
			b = appendTokenUsage(append(b, ','), up.file)
		} else if task == "transcribe" {
			b = append(b, `,"usage":{"type":"duration","seconds":`...)
			b = appendInt(b, seconds)
			b = append(b, '}')
		}
		o.sendJSON(http.StatusOK, append(b, '}'))
	case "text":
		o.send(http.StatusOK, "text/plain; charset=utf-8", []byte(text+"\n"))
	case "srt", "vtt":
		var sb strings.Builder
		sep := byte(',')
		if format == "vtt" {
			sb.WriteString("WEBVTT\n\n")
			sep = '.'
		}
		for i, seg := range segs {
			if format == "srt" {
				sb.WriteString(strconv.Itoa(i + 1))
				sb.WriteByte('\n')
			}
			sb.WriteString(timestamp(i*segmentSeconds, sep))
			sb.WriteString(" --> ")
			sb.WriteString(timestamp((i+1)*segmentSeconds, sep))
			sb.WriteByte('\n')
			sb.WriteString(seg)
			sb.WriteString("\n\n")
		}
		o.send(http.StatusOK, "text/plain; charset=utf-8", []byte(sb.String()))
	case "verbose_json":
		language := up.fields["language"]
		if language == "" || task == "translate" {
			language = "english"
		}
		b := []byte(`{"task":`)
		b = appendString(b, task)
		b = append(b, `,"language":`...)
		b = appendString(b, language)
		b = append(b, `,"duration":`...)
		b = appendInt(b, seconds)
		b = append(b, `,"text":`...)
		b = appendString(b, text)
		b = append(b, `,"segments":[`...)
		for i, seg := range segs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendInt(b, i)
			b = append(b, `,"seek":0,"start":`...)
			b = appendInt(b, i*segmentSeconds)
			b = append(b, `,"end":`...)
			b = appendInt(b, (i+1)*segmentSeconds)
			b = append(b, `,"text":`...)
			b = appendString(b, " "+seg)
			b = append(b, `,"tokens":[],"temperature":0,"avg_logprob":-0.25,"compression_ratio":1.2,"no_speech_prob":0.01}`...)
		}
		b = append(b, `],"usage":{"type":"duration","seconds":`...)
		b = appendInt(b, seconds)
		o.sendJSON(http.StatusOK, append(b, "}}"...))
	default:
		o.sendJSON(http.StatusBadRequest, invalidRequest("invalid_value", "response_format",
			"Invalid value: '"+format+"'. Supported values are: 'json', 'text', 'srt', 'verbose_json', and 'vtt'."))
	}
}

// appendTokenUsage appends the "usage" member a token-billed model reports
// for transcribing audio.
func appendTokenUsage(b []byte, audio []byte) []byte {
	in, out := TranscriptionTokens(audio)
	b = append(b, `"usage":{"type":"tokens","input_tokens":`...)
	b = appendInt(b, in)
	b = append(b, `,"input_token_details":{"text_tokens":0,"audio_tokens":`...)
	b = appendInt(b, in)
	b = append(b, `},"output_tokens":`...)
	b = appendInt(b, out)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, in+out)
	return append(b, '}')
}

// streamTranscription answers a streamed transcription as OpenAI's
// gpt-4o-transcribe family does (stream=true; whisper-1 ignores stream):
// server-sent events, a transcript.text.delta per piece of
// [TranscriptDeltas], then transcript.text.done with the text and the
// usage. Stream faults count the events as chunks, the done event last.
func (s *Server) streamTranscription(o *output, audio []byte) {
	o.startStream("text/event-stream", true)
	for _, piece := range TranscriptDeltas(audio) {
		b := append([]byte(`data: {"type":"transcript.text.delta","delta":`), appendString(nil, piece)...)
		if !o.chunk(chunkContent, append(b, "}\n\n"...)) {
			return
		}
	}
	b := append([]byte(`data: {"type":"transcript.text.done","text":`), appendString(nil, Transcript(audio))...)
	b = appendTokenUsage(append(b, ','), audio)
	if !o.chunk(chunkFinish, append(b, "}\n\n"...)) {
		return
	}
	o.end()
}

// speechContentTypes maps the response_format of /v1/audio/speech to the
// Content-Type of the answer.
func speechContentType(format string) (string, bool) {
	switch format {
	case "", "mp3":
		return "audio/mpeg", true
	case "opus":
		return "audio/opus", true
	case "aac":
		return "audio/aac", true
	case "flac":
		return "audio/flac", true
	case "wav":
		return "audio/wav", true
	case "pcm":
		return "audio/pcm", true
	}
	return "", false
}

// Speech sample format: 24 kHz mono 16-bit PCM, like OpenAI's "pcm".
const (
	speechRate      = 24000
	speechChunkSize = 2048
)

// SpeechAudio returns the audio the fake answers to /v1/audio/speech for
// input: a deterministic tone lasting 10 ms per character of input (between
// 0.1 s and 1 s), as 24 kHz mono 16-bit PCM. It is raw little-endian samples
// for format "pcm" and a WAV file for every other format (the fake does not
// encode mp3, opus, aac or flac; only the Content-Type differs).
func SpeechAudio(input, format string) []byte {
	samples := speechRate / 100 * utf8.RuneCountInString(input)
	samples = min(max(samples, speechRate/10), speechRate)
	period := 20 + int(crc32.ChecksumIEEE([]byte(input))%80)

	header := 44
	if format == "pcm" {
		header = 0
	}
	b := make([]byte, header, header+2*samples)
	if format != "pcm" {
		dataLen := uint32(2 * samples)
		copy(b, "RIFF")
		binary.LittleEndian.PutUint32(b[4:], 36+dataLen)
		copy(b[8:], "WAVEfmt ")
		binary.LittleEndian.PutUint32(b[16:], 16)           // fmt chunk size
		binary.LittleEndian.PutUint16(b[20:], 1)            // PCM
		binary.LittleEndian.PutUint16(b[22:], 1)            // mono
		binary.LittleEndian.PutUint32(b[24:], speechRate)   // sample rate
		binary.LittleEndian.PutUint32(b[28:], 2*speechRate) // byte rate
		binary.LittleEndian.PutUint16(b[32:], 2)            // block align
		binary.LittleEndian.PutUint16(b[34:], 16)           // bits per sample
		copy(b[36:], "data")
		binary.LittleEndian.PutUint32(b[40:], dataLen)
	}
	for i := range samples {
		v := int16(6000)
		if i%period < period/2 {
			v = -6000
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}

// serveSpeech answers POST /v1/audio/speech, streaming the audio in chunks.
func (s *Server) serveSpeech(o *output, body []byte) {
	var req struct {
		Model          string  `json:"model"`
		Input          *string `json:"input"`
		Voice          any     `json:"voice"`
		ResponseFormat string  `json:"response_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAIBadJSON))
		return
	}
	switch {
	case req.Model == "":
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAINoModel))
		return
	case req.Input == nil:
		o.sendJSON(http.StatusBadRequest, invalidRequest("missing_required_parameter", "input", "Missing required parameter: 'input'."))
		return
	case req.Voice == nil:
		o.sendJSON(http.StatusBadRequest, invalidRequest("missing_required_parameter", "voice", "Missing required parameter: 'voice'."))
		return
	}
	contentType, ok := speechContentType(req.ResponseFormat)
	if !ok {
		o.sendJSON(http.StatusBadRequest, invalidRequest("invalid_value", "response_format",
			"Invalid value: '"+req.ResponseFormat+"'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'."))
		return
	}
	audio := SpeechAudio(*req.Input, req.ResponseFormat)
	o.startStream(contentType, false)
	for len(audio) > 0 {
		n := min(len(audio), speechChunkSize)
		if !o.chunk(chunkContent, audio[:n]) {
			return
		}
		audio = audio[n:]
	}
	o.end()
}
