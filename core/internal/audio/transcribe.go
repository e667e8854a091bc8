package audio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/upstream"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Transcription response formats (OpenAI's; diarized_json is
// gpt-4o-transcribe-diarize's).
var TranscriptionFormats = []string{"json", "text", "srt", "verbose_json", "vtt", "diarized_json"}

// ValidExtraField reports whether name may be the name of a
// transcription's extra field: not empty, nor one the gateway writes.
func ValidExtraField(name string) bool {
	return name != "" && !slices.Contains(contract.TranscriptionFields, name)
}

// ValidTranscriptionFormat reports whether f is a response_format of
// /v1/audio/transcriptions (empty means json).
func ValidTranscriptionFormat(f string) bool {
	if f == "" {
		return true
	}
	for _, x := range TranscriptionFormats {
		if x == f {
			return true
		}
	}
	return false
}

// TranscribeRequest is a transcription request after validation; the audio
// is in a Spool.
type TranscribeRequest struct {
	Model string
	// Filename and ContentType describe the upload as the client sent it;
	// OpenAI reads the audio format from the file name's extension.
	Filename               string
	ContentType            string
	Language               string
	Prompt                 string
	ResponseFormat         string
	Temperature            *float32
	TimestampGranularities []string
	// Extra are the client's other form fields, in their order (OpenAI's
	// include[], chunking_strategy, known_speaker_names[], ...), sent on to
	// OpenAI-style upstreams as they came.
	Extra []Field
	// Stream asks for the transcript as server-sent events, which models
	// that stream (see streams) send; others answer whole, as OpenAI's
	// whisper-1 does.
	Stream bool
}

// Field is one form field: a client's, or one of an upstream multipart
// body.
type Field struct{ Name, Value string }

// Transcription is the answer.
type Transcription struct {
	// Body and ContentType are the upstream's answer as it sent it
	// (OpenAI-style upstreams; plain text is rendered from the JSON asked
	// for in its place), or the answer in the
	// requested format made from the upstream's: {"text": ...}, the bare
	// text, or subtitles (other upstreams).
	Body        []byte
	ContentType string
	// Seconds is the audio's duration: the one the upstream reported, else
	// the one the file's header tells (see meter), 0 when neither is known.
	Seconds float64
	// spokenOnly reports that Seconds is only the end of the last word or
	// cue the upstream timed, which silence after it outlasts.
	spokenOnly bool
	// InputTokens, OutputTokens and TotalTokens are the usage a
	// token-billed model (gpt-4o-transcribe) reported, 0 when none.
	InputTokens, OutputTokens, TotalTokens int64
	// Upstream is the time spent waiting on upstreams.
	Upstream time.Duration
}

// Transcribe sends the spooled audio to the model's provider, falling back
// across connections; each attempt reads the spool from its start. A
// request to stream (req.Stream, with events set) to a model that streams
// has the upstream's events passed to events as they come, whole ones,
// several that came together at once, the upstream's content type with
// each; fallback to the next connection happens only before the first
// reaches events, and a failure after it is committed. Any other answer,
// a streamed request's to a model that does not stream too, is out's.
func (s *Service) Transcribe(ctx context.Context, machineID string, req TranscribeRequest, audio *Spool, events Sink) (Transcription, dispatch.Result, error) {
	var out Transcription
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: machineID, Model: req.Model, Supports: SupportsTranscription},
		func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
			start := time.Now()
			before := out.Upstream
			out = Transcription{Upstream: before} // nothing of a failed attempt's answer
			defer func() { out.Upstream = before + time.Since(start) }()
			var sink Sink
			call := ctx
			if req.Stream && events != nil && streams(t) {
				sink = func(ch Chunk) error {
					ch.Upstream = before + time.Since(start)
					return events(ch)
				}
			} else {
				// The upstream sends its headers only once the audio is
				// transcribed.
				call = upstream.WholeAnswer(ctx)
			}
			w := s.watch(call)
			defer w.close()
			return transcribe(ctx, w, t, c, req, audio, &out, sink)
		})
	return out, res, err
}

// streams reports whether a transcription target answers a request to
// stream with server-sent events: OpenAI-style upstreams do, but for
// Whisper models (OpenAI's whisper-1 ignores stream and answers whole).
// ElevenLabs does not.
func streams(t routing.Target) bool {
	return openAIStyle(t.Spec) && !answersVerboseJSON(t.Model)
}

// transcribe makes one attempt at a connection, in the upstream's own API,
// and meters the answer. sink, when set, takes the events of a streamed
// answer.
func transcribe(ctx context.Context, w *watchdog, t routing.Target, c *dispatch.Conn, req TranscribeRequest, audio *Spool, out *Transcription, sink Sink) error {
	var err error
	if elevenLabs(t.Spec) {
		err = transcribeElevenLabs(w, t, c, req, audio, out)
	} else {
		err = transcribeOpenAI(ctx, w, t, c, req, audio, out, sink)
	}
	if err == nil {
		out.meter(audio)
	}
	return err
}

// meter settles the duration a transcription is metered by. The one the
// upstream reported stands. Otherwise (an answer that tells none, such as
// json from most Whisper servers or a token-billed model's, or only the end
// of its last word or cue) it is the duration the file's header tells, or
// that end when it comes later: a header that claims too short a file is
// not believed past the speech the upstream heard in it.
func (out *Transcription) meter(audio *Spool) {
	if out.Seconds > 0 && !out.spokenOnly {
		return
	}
	if secs, ok := audio.Seconds(); ok {
		out.Seconds = max(out.Seconds, secs)
	}
}

// transcribeOpenAI posts the multipart form to {base}/audio/transcriptions
// and keeps the answer as it is, but for plain text: it says nothing of the
// usage the model is billed by, so the upstream is asked for verbose_json
// (Whisper models: the audio's duration) or json (the others, such as the
// token-billed gpt-4o-transcribe family: their tokens) and its text is
// answered as the text format would have it. With sink set the upstream is
// asked to stream, and an event stream it answers goes to sink.
func transcribeOpenAI(ctx context.Context, w *watchdog, t routing.Target, c *dispatch.Conn, req TranscribeRequest, audio *Spool, out *Transcription, sink Sink) error {
	format := req.ResponseFormat
	textOfJSON := format == "text"
	if textOfJSON {
		format = "json"
		if answersVerboseJSON(t.Model) {
			format = "verbose_json"
		}
	}
	fields := []Field{{"model", t.Model}}
	for _, f := range []Field{{"language", req.Language}, {"prompt", req.Prompt}, {"response_format", format}} {
		if f.Value != "" {
			fields = append(fields, f)
		}
	}
	if req.Temperature != nil {
		fields = append(fields, Field{"temperature", strconv.FormatFloat(float64(*req.Temperature), 'g', -1, 32)})
	}
	for _, g := range req.TimestampGranularities {
		fields = append(fields, Field{"timestamp_granularities[]", g})
	}
	fields = append(fields, req.Extra...)
	if sink != nil {
		fields = append(fields, Field{"stream", "true"})
	}
	resp, err := postForm(w, c, c.BaseURL+"/audio/transcriptions", fields, req, audio)
	if err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); sink != nil && mt == "text/event-stream" {
		return relayTranscript(ctx, w, c, resp, sink, out)
	}
	body, err := readAll(resp)
	if err != nil {
		return w.err(err)
	}
	out.Body = body
	out.ContentType = resp.Header.Get("Content-Type")
	if out.ContentType == "" {
		out.ContentType = "application/json"
	}
	reportUsage(out, body)
	if textOfJSON {
		return plainText(out)
	}
	return nil
}

// answersVerboseJSON reports whether a transcription model answers
// verbose_json, which tells the audio's duration: Whisper models do
// (OpenAI's whisper-1, whisper-large-v3 at Groq or Together, Whisper
// servers of the OpenAI-compatible kind); OpenAI's token-billed
// gpt-4o-transcribe family does not.
func answersVerboseJSON(model string) bool {
	return strings.Contains(strings.ToLower(model), "whisper")
}

// plainText turns a JSON answer (json or verbose_json), its usage read, into OpenAI's
// text answer: the transcript and a line feed, as text/plain. An answer in
// another format than JSON (an upstream that paid no heed to
// response_format) is kept as it is.
func plainText(out *Transcription) error {
	if mt, _, _ := mime.ParseMediaType(out.ContentType); mt != "application/json" {
		return nil
	}
	var b struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(out.Body, &b) != nil || b.Text == nil {
		return badUpstream("transcription")
	}
	out.Body, out.ContentType = []byte(*b.Text+"\n"), textPlain
	return nil
}

// reportUsage reads what a transcription's answer says of its usage into
// out. A JSON answer: usage.seconds (duration-billed models), or usage's
// tokens (token-billed ones), else verbose_json's duration. Subtitles (srt,
// vtt): the end of their last cue, which meter may find the audio
// outlasts. Plain text says nothing (which is why transcribeOpenAI asks for
// JSON in its place).
func reportUsage(out *Transcription, body []byte) {
	mt, _, _ := mime.ParseMediaType(out.ContentType)
	if mt != "application/json" {
		out.Seconds, out.spokenOnly = lastCueEnd(body), true
		return
	}
	reportJSONUsage(out, body)
}

// reportJSONUsage reads the usage a JSON answer, or a streamed answer's
// transcript.text.done event, reports into out: usage.seconds, or usage's
// tokens, else verbose_json's duration; negative counts and durations count
// as zero (billedTokens).
func reportJSONUsage(out *Transcription, body []byte) {
	var b struct {
		Duration float64 `json:"duration"`
		Usage    struct {
			Seconds      float64 `json:"seconds"`
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
			TotalTokens  int64   `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &b) != nil {
		return
	}
	out.InputTokens, out.OutputTokens, out.TotalTokens = billedTokens(b.Usage.InputTokens, b.Usage.OutputTokens, b.Usage.TotalTokens)
	out.Seconds = max(b.Duration, 0)
	if b.Usage.Seconds > 0 {
		out.Seconds = b.Usage.Seconds
	}
}

// lastCueEnd is the end time, in seconds, of the last cue of SRT or WebVTT
// subtitles ("00:00:01,000 --> 00:00:04,250"), 0 when there is none.
func lastCueEnd(body []byte) float64 {
	i := bytes.LastIndex(body, []byte("-->"))
	if i < 0 {
		return 0
	}
	rest := bytes.TrimLeft(body[i+3:], " \t")
	if j := bytes.IndexAny(rest, " \t\r\n"); j >= 0 {
		rest = rest[:j]
	}
	// [hh:]mm:ss(,|.)mmm
	parts := strings.Split(strings.ReplaceAll(string(rest), ",", "."), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0
	}
	var secs float64
	for _, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 {
			return 0
		}
		secs = secs*60 + v
	}
	return secs
}

// transcribeElevenLabs posts to {base}/speech-to-text and normalises the
// answer to {"text": ...}, to the bare text for response_format text, or
// to subtitles cut from its word timestamps for srt and vtt. Word
// timestamps are asked for whatever the format: the subtitles are cut from
// them and the duration is metered by them, so they are not left to the
// upstream's default.
func transcribeElevenLabs(w *watchdog, t routing.Target, c *dispatch.Conn, req TranscribeRequest, audio *Spool, out *Transcription) error {
	if req.ResponseFormat == "diarized_json" {
		return clientError("response_format", "invalid_value", "ElevenLabs transcriptions answer json, text, srt, vtt or verbose_json, not diarized_json")
	}
	fields := []Field{{"model_id", t.Model}, {"timestamps_granularity", "word"}}
	if req.Language != "" {
		fields = append(fields, Field{"language_code", req.Language})
	}
	if req.Temperature != nil {
		fields = append(fields, Field{"temperature", strconv.FormatFloat(float64(*req.Temperature), 'g', -1, 32)})
	}
	resp, err := postForm(w, c, c.BaseURL+"/speech-to-text", fields, req, audio)
	if err != nil {
		return err
	}
	body, err := readAll(resp)
	if err != nil {
		return w.err(err)
	}
	var b struct {
		Text         *string     `json:"text"`
		LanguageCode string      `json:"language_code"`
		Words        []timedWord `json:"words"`
	}
	if json.Unmarshal(body, &b) != nil || b.Text == nil {
		return badUpstream("transcription")
	}
	out.Seconds, out.spokenOnly = wordsEnd(b.Words), true
	switch req.ResponseFormat {
	case "text":
		out.Body, out.ContentType = []byte(*b.Text+"\n"), textPlain
		return nil
	case "srt", "vtt":
		words, err := timedWords(*b.Text, b.Words, audio)
		if err != nil {
			return err
		}
		out.Body, out.ContentType = subtitles(cuesOf(words), req.ResponseFormat == "vtt"), textPlain
		return nil
	case "verbose_json":
		words, err := timedWords(*b.Text, b.Words, audio)
		if err != nil {
			return err
		}
		out.meter(audio)
		out.Body, out.ContentType = verboseJSON(*b.Text, b.LanguageCode, out.Seconds, words, req.TimestampGranularities), "application/json"
		return nil
	}
	out.Body, _ = json.Marshal(struct {
		Text string `json:"text"`
	}{*b.Text})
	out.ContentType = "application/json"
	return nil
}

// timedWords are an ElevenLabs answer's words with their times. An answer
// without timestamps has its words (or its transcript's) spread over the
// audio's duration, else every cue would sit at 0; when that duration is
// not known either, the answer is a bad one.
func timedWords(text string, words []timedWord, audio *Spool) ([]timedWord, error) {
	if timed(words) || strings.TrimSpace(text) == "" {
		return words, nil
	}
	secs, ok := audio.Seconds()
	if !ok {
		return nil, badUpstream("transcription: it has no word timestamps to cut subtitles from")
	}
	if len(words) == 0 {
		words = untimedWords(text)
	}
	return spread(words, secs), nil
}

// verboseJSON is OpenAI's verbose_json answer made from ElevenLabs':
// the duration, the transcript's language as ElevenLabs names it, its
// segments (the cues subtitles are cut into) unless only words were asked
// for, and its words when timestamp_granularities asks for them.
func verboseJSON(text, language string, seconds float64, words []timedWord, granularities []string) []byte {
	type segment struct {
		ID    int     `json:"id"`
		Seek  int     `json:"seek"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
	}
	type word struct {
		Word  string  `json:"word"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	}
	v := struct {
		Task     string     `json:"task"`
		Language string     `json:"language"`
		Duration float64    `json:"duration"`
		Text     string     `json:"text"`
		Segments *[]segment `json:"segments,omitempty"`
		Words    *[]word    `json:"words,omitempty"`
	}{Task: "transcribe", Language: language, Duration: seconds, Text: text}
	if len(granularities) == 0 || slices.Contains(granularities, "segment") {
		segments := []segment{}
		for i, c := range cuesOf(words) {
			segments = append(segments, segment{ID: i, Start: c.start, End: c.end, Text: " " + c.text})
		}
		v.Segments = &segments
	}
	if slices.Contains(granularities, "word") {
		list := []word{}
		last := 0.0
		for _, w := range words {
			if w.Type != "word" || strings.TrimSpace(w.Text) == "" {
				continue
			}
			x := word{Word: w.Text, Start: last, End: last}
			if w.Start != nil {
				x.Start = *w.Start
			}
			x.End = x.Start
			if w.End != nil && *w.End > x.Start {
				x.End = *w.End
			}
			last = x.End
			list = append(list, x)
		}
		v.Words = &list
	}
	body, _ := json.Marshal(v)
	return body
}

// errAbandoned ends a multipart body whose request is over.
var errAbandoned = errors.New("upstream request finished")

// postForm streams a multipart/form-data body (fields, then the file from
// the spool) to url: the body is written on the fly through a pipe, so the
// upload is never assembled in memory. It returns the response of a 2xx,
// its body timed by w.
func postForm(w *watchdog, c *dispatch.Conn, url string, fields []Field, req TranscribeRequest, audio *Spool) (*http.Response, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeForm(mw, fields, req, audio))
	}()
	// The writer must be done with the spool before the attempt returns:
	// the next attempt, or the spool's removal, follows.
	defer func() {
		pr.CloseWithError(errAbandoned)
		<-done
	}()
	hreq, err := http.NewRequestWithContext(w.call, http.MethodPost, url, pr)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", mw.FormDataContentType())
	hreq.Header.Set("Accept", "application/json, text/plain, */*")
	return send(c, hreq, w)
}

var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", "", "\n", "")

// writeForm writes the form and closes it; it returns the first error.
func writeForm(mw *multipart.Writer, fields []Field, req TranscribeRequest, audio *Spool) error {
	for _, f := range fields {
		if err := mw.WriteField(f.Name, f.Value); err != nil {
			return err
		}
	}
	name := req.Filename
	if name == "" {
		name = "audio"
	}
	ct := "application/octet-stream"
	if mt, params, err := mime.ParseMediaType(req.ContentType); err == nil {
		if s := mime.FormatMediaType(mt, params); s != "" {
			ct = s // re-encoded: no header injection
		}
	}
	h := make(textproto.MIMEHeader, 2)
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+quoteEscaper.Replace(name)+`"`)
	h.Set("Content-Type", ct)
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, audio.Reader()); err != nil {
		return err
	}
	return mw.Close()
}
