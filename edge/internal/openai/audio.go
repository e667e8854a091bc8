package openai

import (
	"context"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// DefaultMaxAudioBytes is the default upload limit of a transcription.
const DefaultMaxAudioBytes = 25 << 20

// Limits of the form around the audio file.
const (
	// audioChunk is the size of the audio messages sent to core.
	audioChunk = 64 << 10
	// maxFieldBytes caps one text field (a prompt is the longest).
	maxFieldBytes = 64 << 10
	// formSlack is what the form may add to the file: fields and part
	// headers. More is refused as it arrives (formBudget).
	formSlack = 1 << 20
)

// errFormTooLarge ends a form whose fields and part headers exceed
// formSlack.
var errFormTooLarge = errors.New("the form's fields and part headers are larger than " + strconv.Itoa(formSlack) + " bytes")

// formBudget reads a form's body, refusing it once more than formSlack of
// it is not the file's: the route streams its body outside the edge's body
// memory bound, so fields and part headers (multipart reads a part's
// headers whole, up to 10 MiB) must not grow with the upload limit.
type formBudget struct {
	r io.Reader
	// inFile is set while the file's bytes are read; the upload limit
	// bounds those.
	inFile bool
	other  int64
}

func (b *formBudget) Read(p []byte) (int, error) {
	if !b.inFile && b.other > formSlack {
		return 0, errFormTooLarge
	}
	n, err := b.r.Read(p)
	if !b.inFile {
		b.other += int64(n)
	}
	return n, err
}

// Transcriptions serves POST /v1/audio/transcriptions: it reads the
// multipart form as it arrives and streams the file to core in chunks, so
// the edge never holds the upload; the other fields follow as the options.
// A whole answer is written as core sends it; a streamed one (stream=true,
// from a model that streams) is relayed event by event, each flushed as it
// comes, and ends, when core's stream fails after its first event, with an
// OpenAI error event the official clients raise.
type Transcriptions struct {
	Router corev1.RouterClient
	// MaxBytes caps the file (zero: DefaultMaxAudioBytes).
	MaxBytes int64
	// Upstream records time core spent waiting upstream.
	Upstream func(r *http.Request, us int64)
}

func (h *Transcriptions) limit() int64 {
	if h.MaxBytes > 0 {
		return h.MaxBytes
	}
	return DefaultMaxAudioBytes
}

func (h *Transcriptions) tooLarge() Problem {
	return NewProblem(http.StatusRequestEntityTooLarge, "request_too_large",
		"the audio file is larger than "+strconv.FormatInt(h.limit(), 10)+" bytes", "file")
}

func (h *Transcriptions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		NewProblem(http.StatusUnsupportedMediaType, "invalid_content_type",
			"the request must be multipart/form-data with a 'file' and a 'model'", "").Write(w)
		return
	}
	if r.ContentLength > h.limit()+formSlack {
		h.tooLarge().Write(w)
		return
	}
	body := http.MaxBytesReader(w, r.Body, h.limit()+formSlack)
	ctx, id := Outgoing(r)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a stream left open is abandoned: core sends nothing upstream
	w.Header().Set("X-Request-Id", id)

	// The form says whether the answer is streamed only once it is read,
	// which may be after the file: every answer comes through core's
	// StreamTranscription.
	var stream grpc.BidiStreamingClient[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse]
	form, p := ReadTranscriptionForm(body, params["boundary"], h.limit(), func(chunk []byte) *Problem {
		if stream == nil {
			s, err := h.Router.StreamTranscription(ctx)
			if err != nil {
				p := FromCallError(r, err)
				return &p
			}
			stream = s
		}
		if err := stream.Send(&corev1.StreamTranscriptionRequest{Part: &corev1.StreamTranscriptionRequest_Audio{Audio: chunk}}); err != nil {
			// Core ended the stream (a bad key, the size limit): its status.
			_, err := stream.Recv()
			p := FromCallError(r, err)
			return &p
		}
		return nil
	})
	if p != nil {
		p.Write(w)
		return
	}
	switch {
	case form.Options.GetModel() == "":
		NewProblem(http.StatusBadRequest, "missing_required_parameter", "you must provide a model parameter", "model").Write(w)
		return
	case !form.HasFile:
		NewProblem(http.StatusBadRequest, "missing_required_parameter", "you must provide a file parameter", "file").Write(w)
		return
	case form.Size == 0:
		NewProblem(http.StatusBadRequest, "invalid_value", "the uploaded file is empty", "file").Write(w)
		return
	}
	// Sent after the file: a failed send shows in Recv's status.
	_ = stream.Send(&corev1.StreamTranscriptionRequest{Part: &corev1.StreamTranscriptionRequest_Options{Options: form.Options}})
	_ = stream.CloseSend()
	first, err := stream.Recv()
	if md, herr := stream.Header(); herr == nil && h.Upstream != nil {
		if us, ok := UpstreamMicros(md); ok {
			h.Upstream(r, us)
		}
	}
	if errors.Is(err, io.EOF) {
		NewProblem(http.StatusBadGateway, "bad_upstream_response", "the upstream sent no transcription", "").Write(w)
		return
	}
	if err != nil {
		FromError(shutdownOr(r, err)).Write(w)
		return
	}
	ct := first.GetContentType()
	if ct == "" {
		ct = "application/json"
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt == "text/event-stream" {
		relayTranscript(w, r, ct, first.GetBody(), stream)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(first.GetBody())))
	_, _ = w.Write(first.GetBody())
}

// transcriptEvents ends a streamed transcription: the upstream's own events
// end it cleanly, a failure with an error event as a chat stream's.
var transcriptEvents = dialectEvents{failure: chatEvents.failure}

// relayTranscript writes a streamed transcription, in the upstream's
// content type, as core sends it: first's events, then each message's, each
// flushed at once, keep-alive comments in long silences.
func relayTranscript(w http.ResponseWriter, r *http.Request, ct string, first []byte, stream grpc.BidiStreamingClient[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse]) {
	rl := startRelay(w, r, KeepAliveEvery, transcriptEvents)
	w.Header().Set("Content-Type", ct)
	body := first
	for {
		if err := rl.writeRaw(body); err != nil {
			rl.close(nil) // the client left: returning cancels core's call
			return
		}
		msg, err := stream.Recv()
		if err != nil {
			rl.close(err)
			return
		}
		body = msg.GetBody()
	}
}

// TranscriptionForm is what ReadTranscriptionForm read.
type TranscriptionForm struct {
	Options *corev1.TranscribeOptions
	HasFile bool
	// Size is the file's size.
	Size int64
}

// ReadTranscriptionForm reads a transcription form (body, a multipart form
// with boundary) part by part: the file's bytes go to send in chunks as
// they arrive (never more than limit of them), the other fields into the
// options; fields and part headers may add formSlack bytes. It returns the
// form, or the problem to answer. Fields the gateway does not read (OpenAI
// adds some over time) are kept in the options' extra fields, in their
// order, for the upstream.
func ReadTranscriptionForm(body io.Reader, boundary string, limit int64, send func([]byte) *Problem) (TranscriptionForm, *Problem) {
	bad := func(status int, code, msg, param string) (TranscriptionForm, *Problem) {
		p := NewProblem(status, code, msg, param)
		return TranscriptionForm{}, &p
	}
	readErr := func(err error) (TranscriptionForm, *Problem) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return bad(http.StatusRequestEntityTooLarge, "request_too_large", "the request body is larger than "+strconv.FormatInt(tooBig.Limit, 10)+" bytes", "file")
		}
		if errors.Is(err, errFormTooLarge) {
			return bad(http.StatusRequestEntityTooLarge, "request_too_large", errFormTooLarge.Error(), "")
		}
		if errors.Is(err, ErrBodySlow) || errors.Is(err, ErrBodyMemory) {
			p := BodyProblem(nil, err)
			return TranscriptionForm{}, &p
		}
		return bad(http.StatusBadRequest, "invalid_body", "the request body is not a well-formed multipart form", "")
	}
	budget := &formBudget{r: body}
	mr := multipart.NewReader(budget, boundary)
	form := TranscriptionForm{Options: &corev1.TranscribeOptions{}}
	opts := form.Options
	buf := make([]byte, audioChunk)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readErr(err)
		}
		name := part.FormName()
		if name == "file" {
			if form.HasFile {
				return bad(http.StatusBadRequest, "invalid_value", "the form holds more than one file", "file")
			}
			form.HasFile = true
			// Both travel in protobuf strings, which must be UTF-8: a
			// name in another encoding is mended, a content type that is
			// not UTF-8 names no type anyone knows and is dropped.
			opts.Filename = strings.ToValidUTF8(part.FileName(), "\uFFFD")
			if ct := part.Header.Get("Content-Type"); utf8.ValidString(ct) {
				opts.ContentType = ct
			}
			budget.inFile = true
			for {
				n, err := fill(part, buf)
				if n > 0 {
					form.Size += int64(n)
					if form.Size > limit {
						return bad(http.StatusRequestEntityTooLarge, "request_too_large",
							"the audio file is larger than "+strconv.FormatInt(limit, 10)+" bytes", "file")
					}
					if p := send(buf[:n]); p != nil {
						return TranscriptionForm{}, p
					}
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return readErr(err)
				}
			}
			budget.inFile = false
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil {
			return readErr(err)
		}
		if len(raw) > maxFieldBytes {
			return bad(http.StatusBadRequest, "invalid_value", "the field '"+name+"' is too long", name)
		}
		if !utf8.Valid(raw) {
			return bad(http.StatusBadRequest, "invalid_encoding", "the field '"+name+"' is not valid UTF-8", name)
		}
		v := string(raw)
		switch name {
		case "model":
			opts.Model = v
		case "language":
			opts.Language = v
		case "prompt":
			opts.Prompt = v
		case "response_format":
			opts.ResponseFormat = v
		case "stream":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad(http.StatusBadRequest, "invalid_type", "'stream' must be a boolean", "stream")
			}
			opts.Stream = b
		case "temperature":
			f, err := strconv.ParseFloat(v, 32)
			if err != nil || math.IsNaN(f) {
				return bad(http.StatusBadRequest, "invalid_type", "'temperature' must be a number", "temperature")
			}
			t := float32(f)
			opts.Temperature = &t
		case "timestamp_granularities[]", "timestamp_granularities":
			opts.TimestampGranularities = append(opts.TimestampGranularities, v)
		default:
			// Another of OpenAI's fields (include[], chunking_strategy,
			// known_speaker_names[], ...): sent on as it came.
			if !utf8.ValidString(name) {
				return bad(http.StatusBadRequest, "invalid_encoding", "a field name is not valid UTF-8", "")
			}
			if name == "" {
				continue
			}
			if len(opts.ExtraFields) == contract.MaxTranscriptionExtraFields {
				return bad(http.StatusBadRequest, contract.CodeArrayAboveMaxLength, "the form holds more than "+strconv.Itoa(contract.MaxTranscriptionExtraFields)+" fields the gateway does not read", name)
			}
			opts.ExtraFields = append(opts.ExtraFields, &corev1.FormField{Name: name, Value: v})
		}
	}
	return form, nil
}

// fill reads into buf until it is full or the reader ends; unlike
// io.ReadFull it reports a clean end as io.EOF even after some bytes, and
// passes io.ErrUnexpectedEOF (a truncated form) through.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Speech serves POST /v1/audio/speech: the audio is written as core relays
// it, flushed chunk by chunk, with the upstream's content type.
type Speech struct {
	Router corev1.RouterClient
	// Upstream records time core spent waiting upstream.
	Upstream func(r *http.Request, us int64)
}

func (h *Speech) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	ctx, id := Outgoing(r)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.Header().Set("X-Request-Id", id)
	stream, err := h.Router.Speech(ctx, &corev1.SpeechRequest{Body: body})
	if err != nil {
		FromError(shutdownOr(r, err)).Write(w)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			NewProblem(http.StatusBadGateway, "bad_upstream_response", "the upstream sent no audio", "").Write(w)
			return
		}
		FromError(shutdownOr(r, err)).Write(w)
		return
	}
	if md, err := stream.Header(); err == nil && h.Upstream != nil {
		if us, ok := UpstreamMicros(md); ok {
			h.Upstream(r, us)
		}
	}
	ct := first.GetContentType()
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) {
		if len(b) == 0 {
			return
		}
		if _, err := w.Write(b); err != nil {
			panic(http.ErrAbortHandler)
		}
		_ = rc.Flush()
	}
	write(first.GetAudio())
	_ = rc.Flush()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			// The status line is gone: cut the response so the client sees
			// a truncated body rather than a short file that looks whole.
			panic(http.ErrAbortHandler)
		}
		write(msg.GetAudio())
	}
}
