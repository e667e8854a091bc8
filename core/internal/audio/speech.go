package audio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// InvalidError is a request the client got wrong (400).
type InvalidError struct {
	Param, Code, Message string
}

func (e *InvalidError) Error() string { return e.Message }

func invalid(param, code, msg string) *InvalidError {
	return &InvalidError{Param: param, Code: code, Message: msg}
}

// SpeechFormats are the response formats of /v1/audio/speech (OpenAI's).
var SpeechFormats = []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}

// SpeechRequest is a speech request after validation.
type SpeechRequest struct {
	// Model is the model to dispatch to, its voice suffix removed.
	Model string
	Input string
	// Voice is a voice id; VoiceRaw is the client's voice member when it is
	// not a plain string (OpenAI's {"id": ...} custom voices).
	Voice    string
	VoiceRaw json.RawMessage
	Format   string
	Speed    *float64
	// StreamFormat is "audio" (the default, as empty) or "sse" (OpenAI's
	// speech.audio.delta events).
	StreamFormat string
	// fields is the client's body, passed through to OpenAI-style upstreams.
	fields map[string]json.RawMessage
}

// Characters is the length of the input, in characters.
func (r SpeechRequest) Characters() int64 { return int64(utf8.RuneCountInString(r.Input)) }

// VoiceModel is the model string of a voice: "{alias}/{model}:{voice}". It
// is usable as the model of /v1/audio/speech without a voice (see
// SplitVoice).
func VoiceModel(alias, model, voice string) string {
	return alias + "/" + model + ":" + voice
}

// SplitVoice reads a voice suffix off a speech model: "openai/tts-1:alloy"
// is model "openai/tts-1" with voice "alloy". A model whose last path
// segment has no colon, or whose suffix differs from a voice the request
// names (a model id with a colon of its own), is taken as it is.
func SplitVoice(model, voice string) (string, string) {
	slash := strings.LastIndexByte(model, '/')
	colon := strings.LastIndexByte(model, ':')
	if colon <= slash+1 || colon == len(model)-1 {
		return model, voice
	}
	if suffix := model[colon+1:]; voice == "" || voice == suffix {
		return model[:colon], suffix
	}
	return model, voice
}

// ParseSpeech validates an OpenAI speech request body.
func ParseSpeech(body []byte) (SpeechRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return SpeechRequest{}, invalid("", "invalid_json", "the request body is not a JSON object")
	}
	req := SpeechRequest{fields: fields}
	str := func(name string, required bool) (string, error) {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			if required {
				return "", invalid(name, "missing_required_parameter", "you must provide a "+name+" parameter")
			}
			return "", nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", invalid(name, "invalid_type", "'"+name+"' must be a string")
		}
		if required && s == "" {
			return "", invalid(name, "invalid_value", "'"+name+"' must not be empty")
		}
		return s, nil
	}
	var err error
	if req.Model, err = str("model", true); err != nil {
		return req, err
	}
	if req.Input, err = str("input", true); err != nil {
		return req, err
	}
	if raw, ok := fields["voice"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &req.Voice) != nil {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &v) != nil || v.ID == "" {
				return req, invalid("voice", "invalid_type", "'voice' must be a string or an object with an id")
			}
			req.Voice, req.VoiceRaw = v.ID, raw
		}
	}
	if req.Format, err = str("response_format", false); err != nil {
		return req, err
	}
	if req.Format != "" && !contains(SpeechFormats, req.Format) {
		return req, invalid("response_format", "invalid_value", "'response_format' must be one of "+strings.Join(SpeechFormats, ", "))
	}
	if req.StreamFormat, err = str("stream_format", false); err != nil {
		return req, err
	}
	if req.StreamFormat != "" && req.StreamFormat != "audio" && req.StreamFormat != "sse" {
		return req, invalid("stream_format", "invalid_value", "'stream_format' must be 'audio' or 'sse'")
	}
	if raw, ok := fields["speed"]; ok && string(raw) != "null" {
		var sp float64
		if json.Unmarshal(raw, &sp) != nil || sp < 0.25 || sp > 4 {
			return req, invalid("speed", "invalid_value", "'speed' must be a number from 0.25 to 4.0")
		}
		req.Speed = &sp
	}
	model, voice := SplitVoice(req.Model, req.Voice)
	if voice != req.Voice {
		req.VoiceRaw = nil
	}
	req.Model, req.Voice = model, voice
	if req.Voice == "" {
		return req, invalid("voice", "missing_required_parameter", "you must provide a voice parameter (or a model of the form {provider}/{model}:{voice})")
	}
	if req.Voice == "." || req.Voice == ".." {
		// A voice is a path segment of some providers' URLs (ElevenLabs'
		// /text-to-speech/{voice}/stream): a dot segment would name
		// another path of theirs, sent the connection's key.
		return req, invalid("voice", "invalid_value", "'voice' must name a voice")
	}
	return req, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SpeechResult reports a finished speech request.
type SpeechResult struct {
	ContentType string
	Bytes       int64
	// InputTokens, OutputTokens and TotalTokens are the usage a token-billed
	// model (gpt-4o-mini-tts) reported in the speech.audio.done event of a
	// speech streamed as server-sent events, 0 when none.
	InputTokens, OutputTokens, TotalTokens int64
	// Upstream is the time spent waiting on upstreams.
	Upstream time.Duration
}

// Chunk is a piece of audio as the upstream sent it.
type Chunk struct {
	// ContentType is the upstream's, the same for a whole answer.
	ContentType string
	// Data is nil for an empty answer.
	Data []byte
	// Upstream is the time spent waiting on upstreams so far.
	Upstream time.Duration
}

// Sink takes the audio as it arrives. It is called at least once for a
// successful answer.
type Sink func(Chunk) error

// Speech sends the request to the model's provider and passes the audio to
// sink as the upstream sends it. Fallback to the next connection happens
// only before the first byte reaches sink.
func (s *Service) Speech(ctx context.Context, machineID string, req SpeechRequest, sink Sink) (SpeechResult, dispatch.Result, error) {
	var out SpeechResult
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: machineID, Model: req.Model, Supports: SupportsSpeech},
		func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
			start := time.Now()
			call := ctx
			if !elevenLabs(t.Spec) && req.StreamFormat != "sse" {
				// An OpenAI-style server may send its headers only once the
				// audio is spoken (ElevenLabs' stream endpoint, and events,
				// start at once).
				call = upstream.WholeAnswer(ctx)
			}
			w := s.watch(call)
			defer w.close()
			var hreq *http.Request
			var err error
			if elevenLabs(t.Spec) {
				hreq, err = elevenLabsSpeech(w.call, t, c, req)
			} else if err = openAIVoice(t, req); err != nil {
				return err
			} else {
				hreq, err = openAISpeech(w.call, t, c, req)
			}
			if err != nil {
				return err
			}
			resp, err := send(c, hreq, w)
			out.Upstream += time.Since(start)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			ct := resp.Header.Get("Content-Type")
			if ct == "" {
				ct = "application/octet-stream"
			}
			out.ContentType = ct
			var body io.Reader = resp.Body
			if mt, _, _ := mime.ParseMediaType(ct); mt == "text/event-stream" {
				done := &speechDone{out: &out}
				body = io.TeeReader(body, done)
			}
			return relay(ctx, body, sink, &out, w)
		})
	return out, res, err
}

// relay copies an upstream's audio to sink chunk by chunk. An error after
// the first chunk is marked committed: no fallback once bytes went out, and
// the answer ends there (cut off), a stalled one too.
func relay(ctx context.Context, body io.Reader, sink Sink, out *SpeechResult, w *watchdog) error {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := body.Read(buf)
		if rerr != nil && rerr != io.EOF {
			rerr = w.err(rerr)
		}
		if n > 0 {
			if err := sink(Chunk{ContentType: out.ContentType, Data: buf[:n], Upstream: out.Upstream}); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return credential.Committed(err)
			}
			out.Bytes += int64(n)
		}
		switch {
		case rerr == io.EOF:
			if out.Bytes == 0 {
				return sink(Chunk{ContentType: out.ContentType, Upstream: out.Upstream})
			}
			return nil
		case rerr != nil && out.Bytes > 0:
			if ctx.Err() == nil {
				rerr = cutOff(rerr)
			}
			return credential.Committed(rerr)
		case rerr != nil:
			return rerr
		}
	}
}

// cutOff is the error of a speech its upstream stopped sending after audio
// went out (read's error): it tells the client how the answer ended, as a
// chat stream's does, and the engine judges it a network failure.
func cutOff(read error) error {
	var stalled *upstream.StallError
	if errors.As(read, &stalled) {
		return &credential.StreamError{Code: "stream_stalled", Message: stalled.Error()}
	}
	return &credential.StreamError{Code: "stream_interrupted", Message: "the upstream stream broke off"}
}

// openAISpeech is the client's body with the upstream model and the voice,
// to {base}/audio/speech.
func openAISpeech(ctx context.Context, t routing.Target, c *dispatch.Conn, req SpeechRequest) (*http.Request, error) {
	fields := make(map[string]json.RawMessage, len(req.fields)+2)
	for k, v := range req.fields {
		fields[k] = v
	}
	fields["model"], _ = json.Marshal(t.Model)
	if req.VoiceRaw != nil {
		fields["voice"] = req.VoiceRaw
	} else {
		fields["voice"], _ = json.Marshal(req.Voice)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/audio/speech", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "*/*")
	return hreq, nil
}

// openAIVoice refuses, in OpenAI's words, one of OpenAI's built-in voices
// that its model does not speak (tts-1's ballad): an error answer, not
// the connection's fault. A custom voice, or a voice or model not known
// here, is the upstream's to judge.
func openAIVoice(t routing.Target, req SpeechRequest) error {
	voices, known := openAIModelVoices[t.Model]
	if t.Spec.ID != "openai" || req.VoiceRaw != nil || !known || openAISpeaks(t.Model, req.Voice) || !builtInVoice(req.Voice) {
		return nil
	}
	return clientError("voice", "invalid_value", "'"+t.Model+"' does not speak the voice '"+req.Voice+"': its voices are "+
		strings.Join(voices[:len(voices)-1], ", ")+" and "+voices[len(voices)-1]+" (gpt-4o-mini-tts speaks every built-in voice)")
}

// elevenLabsFormats maps OpenAI's response formats to ElevenLabs'
// output_format.
var elevenLabsFormats = map[string]string{
	"":     "mp3_44100_128",
	"mp3":  "mp3_44100_128",
	"opus": "opus_48000_64",
	"pcm":  "pcm_24000",
	"wav":  "wav_44100",
}

// elevenLabsSpeech is POST {base}/text-to-speech/{voice}/stream.
func elevenLabsSpeech(ctx context.Context, t routing.Target, c *dispatch.Conn, req SpeechRequest) (*http.Request, error) {
	if req.StreamFormat == "sse" {
		// Its audio would reach a client that reads events from it.
		return nil, clientError("stream_format", "invalid_value", "ElevenLabs voices answer audio, not server-sent events: leave 'stream_format' out or set it to 'audio'")
	}
	format, ok := elevenLabsFormats[req.Format]
	if !ok {
		// An error answer, not a plain error: not the connection's fault, so
		// no fallback and no cooldown.
		return nil, clientError("response_format", "invalid_value", "ElevenLabs voices speak mp3, opus, pcm or wav, not "+req.Format)
	}
	type settings struct {
		Speed float64 `json:"speed"`
	}
	body, err := json.Marshal(struct {
		Text          string    `json:"text"`
		ModelID       string    `json:"model_id"`
		VoiceSettings *settings `json:"voice_settings,omitempty"`
	}{Text: req.Input, ModelID: t.Model, VoiceSettings: func() *settings {
		if req.Speed == nil {
			return nil
		}
		return &settings{Speed: *req.Speed}
	}()})
	if err != nil {
		return nil, err
	}
	u := c.BaseURL + "/text-to-speech/" + url.PathEscape(req.Voice) + "/stream?output_format=" + url.QueryEscape(format)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "audio/*")
	return hreq, nil
}
