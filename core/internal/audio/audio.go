// Package audio serves the audio routes: transcriptions (an upload spooled
// so it can be sent again to the next connection, streamed to the upstream
// as multipart), speech (audio streamed back as the upstream sends it) and
// voice listings. OpenAI-style upstreams (OpenAI, Groq, the OpenAI-compatible
// family, ...) get OpenAI's wire format; ElevenLabs gets its own.
package audio

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// DefaultMaxBytes is the default upload limit of a transcription (OpenAI's).
const DefaultMaxBytes = 25 << 20

// maxResponse caps an upstream transcription or voice listing body.
const maxResponse = 32 << 20

// Options configure a Service.
type Options struct {
	// MaxBytes caps an upload (zero: DefaultMaxBytes).
	MaxBytes int64
	// SpoolDir holds the temporary files of large uploads (empty: the
	// system's temporary directory).
	SpoolDir string
	// SpoolMemory is how much of an upload stays in memory (zero:
	// DefaultSpoolMemory).
	SpoolMemory int
	// StallTimeout ends an upstream call that, its headers sent, sends no
	// byte of its body for this long: the next connection gets the request,
	// or a speech answer already started ends there (zero:
	// upstream.DefaultStallTimeout).
	StallTimeout time.Duration
}

// Service serves the audio routes over the dispatcher.
type Service struct {
	d    *dispatch.Dispatcher
	opts Options
}

// New returns a Service.
func New(d *dispatch.Dispatcher, opts Options) *Service {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.SpoolMemory <= 0 {
		opts.SpoolMemory = DefaultSpoolMemory
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = upstream.DefaultStallTimeout
	}
	return &Service{d: d, opts: opts}
}

// MaxBytes is the upload limit.
func (s *Service) MaxBytes() int64 { return s.opts.MaxBytes }

// NewSpool returns an empty spool for one upload, bounded by MaxBytes. The
// caller closes it.
func (s *Service) NewSpool() *Spool {
	return NewSpool(s.opts.SpoolDir, s.opts.SpoolMemory, s.opts.MaxBytes)
}

// openAIStyle reports whether a provider speaks OpenAI's audio API.
func openAIStyle(spec provider.Spec) bool {
	return spec.Format == provider.FormatOpenAI
}

func elevenLabs(spec provider.Spec) bool {
	return spec.Format == provider.FormatElevenLabs
}

// SupportsTranscription reports whether a provider transcribes audio.
func SupportsTranscription(spec provider.Spec) bool {
	return spec.Serves(provider.KindSTT) && (openAIStyle(spec) || elevenLabs(spec))
}

// SupportsSpeech reports whether a provider speaks text.
func SupportsSpeech(spec provider.Spec) bool {
	return spec.Serves(provider.KindTTS) && (openAIStyle(spec) || elevenLabs(spec))
}

// send makes an upstream request, made with w.call, and returns the
// response of a 2xx answer, its body timed by w; an error answer is read
// (bounded, and what came before a stall is what there is) into a
// *credential.UpstreamError.
func send(c *dispatch.Conn, req *http.Request, w *watchdog) (*http.Response, error) {
	c.Authorize(req.Header)
	resp, err := c.Client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = w.body(resp.Body)
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: c.Scrub(raw)}
	}
	return resp, nil
}

// readAll reads a success body, bounded.
func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, maxResponse))
}

func badUpstream(what string) *credential.UpstreamError {
	return &credential.UpstreamError{Status: http.StatusBadGateway,
		Body: []byte(`{"error":{"message":"upstream returned an invalid ` + what + `","type":"api_error","code":"bad_upstream_response"}}`)}
}

// clientError is a 400 in OpenAI's shape that an attempt returns for a
// request the upstream cannot take: it is passed to the client as it is.
func clientError(param, code, msg string) error {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": param, "code": code,
	}})
	return &credential.UpstreamError{Status: http.StatusBadRequest, Body: body}
}
