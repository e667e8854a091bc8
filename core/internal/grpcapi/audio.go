package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/core/internal/audio"
	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Transcribe turns speech into text. The stream carries one options message
// and the audio in chunks; the options may come first or, for callers that
// read them after the file (a multipart form whose file part comes first),
// after the audio. The audio is spooled, bounded, so that a fallback sends
// it again whole. A transcription asked for as a stream is
// StreamTranscription's.
func (r *Router) Transcribe(stream grpc.ClientStreamingServer[corev1.TranscribeRequest, corev1.TranscribeResponse]) error {
	return r.transcribe(stream.Context(), stream.Recv, nil, func(out audio.Transcription) error {
		return stream.SendAndClose(&corev1.TranscribeResponse{Body: out.Body, ContentType: out.ContentType})
	})
}

// StreamTranscription is Transcribe with the answer sent back in parts: the
// events of a streamed transcription as the upstream sends them, the
// content type with the first message, or a whole answer in one message.
func (r *Router) StreamTranscription(stream grpc.BidiStreamingServer[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse]) error {
	recv := func() (*corev1.TranscribeRequest, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		switch part := msg.GetPart().(type) {
		case *corev1.StreamTranscriptionRequest_Options:
			return &corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Options{Options: part.Options}}, nil
		case *corev1.StreamTranscriptionRequest_Audio:
			return &corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Audio{Audio: part.Audio}}, nil
		}
		return &corev1.TranscribeRequest{}, nil
	}
	started := false
	events := func(c audio.Chunk) error {
		msg := &corev1.StreamTranscriptionResponse{Body: c.Data}
		if !started {
			started = true
			_ = stream.SetHeader(metadata.Pairs(MDUpstreamUs, strconv.FormatInt(c.Upstream.Microseconds(), 10)))
			msg.ContentType = c.ContentType
		}
		return stream.Send(msg)
	}
	return r.transcribe(stream.Context(), recv, events, func(out audio.Transcription) error {
		return stream.Send(&corev1.StreamTranscriptionResponse{Body: out.Body, ContentType: out.ContentType})
	})
}

// transcribe serves a transcription whose messages recv reads: events, when
// set, takes a streamed answer's events, whole answers whole. Without
// events a request to stream is refused before any upstream is called.
func (r *Router) transcribe(ctx context.Context, recv func() (*corev1.TranscribeRequest, error), events audio.Sink, whole func(audio.Transcription) error) error {
	start := time.Now()
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return err
	}
	spool := r.Audio.NewSpool()
	defer func() {
		if err := spool.Close(); err != nil {
			r.Log.Error("audio spool not removed", "err", err)
		}
	}()
	var opts *corev1.TranscribeOptions
	for {
		msg, err := recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch part := msg.GetPart().(type) {
		case *corev1.TranscribeRequest_Options:
			if opts != nil {
				return invalidParam("options", "invalid_value", "the options were sent twice")
			}
			opts = part.Options
		case *corev1.TranscribeRequest_Audio:
			if _, err := spool.Write(part.Audio); err != nil {
				if errors.Is(err, audio.ErrTooLarge) {
					return audioTooLarge(r.Audio.MaxBytes())
				}
				r.Log.Error("audio spool failed", "err", err)
				return internal("internal error")
			}
		}
	}
	if err := validTranscription(opts, spool.Size()); err != nil {
		return err
	}
	if opts.GetStream() && events == nil {
		return invalidParam("stream", "invalid_value", "a streamed transcription is answered by StreamTranscription, not Transcribe")
	}
	in := audio.TranscribeRequest{
		Model:                  opts.GetModel(),
		Filename:               opts.GetFilename(),
		ContentType:            opts.GetContentType(),
		Language:               opts.GetLanguage(),
		Prompt:                 opts.GetPrompt(),
		ResponseFormat:         opts.GetResponseFormat(),
		Temperature:            opts.Temperature,
		TimestampGranularities: opts.GetTimestampGranularities(),
		Stream:                 opts.GetStream(),
	}
	for _, f := range opts.GetExtraFields() {
		in.Extra = append(in.Extra, audio.Field{Name: f.GetName(), Value: f.GetValue()})
	}
	sent := false
	var sink audio.Sink
	if events != nil {
		sink = func(c audio.Chunk) error {
			sent = true
			return events(c)
		}
	}
	out, res, err := r.Audio.Transcribe(ctx, p.MachineID, in, spool, sink)
	if !sent {
		_ = grpc.SetHeader(ctx, metadata.Pairs(MDUpstreamUs, strconv.FormatInt(out.Upstream.Microseconds(), 10)))
	}
	err = gatewayError(r.Log, err, opts.GetModel())
	ev := &busv1.UsageEvent{Endpoint: "audio.transcriptions"}
	switch {
	case err == nil:
		ev.AudioSeconds = out.Seconds
		ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = out.InputTokens, out.OutputTokens, out.TotalTokens
	case sent:
		// A stream cut off, or left by its client, after its first event:
		// the upstream heard the audio, whose duration is billed as
		// partial; the tokens, which only the last event tells, are not
		// known.
		ev.Partial = true
		ev.AudioSeconds, _ = spool.Seconds()
	}
	r.record(ctx, p, res, start, err, ev)
	if err != nil || sent {
		return err
	}
	return whole(out)
}

func validTranscription(opts *corev1.TranscribeOptions, size int64) error {
	switch {
	case opts.GetModel() == "":
		return missingParam("model")
	case size == 0 && opts.GetFilename() == "":
		return missingParam("file")
	case size == 0:
		return invalidParam("file", "invalid_value", "the uploaded file is empty")
	case !audio.ValidTranscriptionFormat(opts.GetResponseFormat()):
		return invalidParam("response_format", "invalid_value",
			"'response_format' must be one of "+strings.Join(audio.TranscriptionFormats, ", "))
	case opts.Temperature != nil && (opts.GetTemperature() < 0 || opts.GetTemperature() > 1):
		return invalidParam("temperature", "invalid_value", "'temperature' must be between 0 and 1")
	}
	for _, g := range opts.GetTimestampGranularities() {
		if g != "word" && g != "segment" {
			return invalidParam("timestamp_granularities", "invalid_value", "'timestamp_granularities[]' items must be 'word' or 'segment'")
		}
	}
	if len(opts.GetExtraFields()) > contract.MaxTranscriptionExtraFields {
		return invalidParam("extra_fields", contract.CodeArrayAboveMaxLength,
			contract.ArrayAboveMaxLength("extra_fields", contract.MaxTranscriptionExtraFields, len(opts.GetExtraFields())))
	}
	for _, f := range opts.GetExtraFields() {
		if !audio.ValidExtraField(f.GetName()) {
			return invalidParam("extra_fields", "invalid_value", "'extra_fields' must name fields other than the options' own: "+strconv.Quote(f.GetName()))
		}
	}
	return nil
}

// audioTooLarge is the 413 of an upload past the limit.
func audioTooLarge(limit int64) error {
	return statusError(codes.InvalidArgument, "request_too_large",
		fmt.Sprintf("the audio file is larger than %d bytes", limit),
		MetaParam, "file", MetaHTTPStatus, strconv.Itoa(http.StatusRequestEntityTooLarge))
}

// Speech turns text into audio, streamed as the upstream sends it: the
// content type first, then the audio. A failure after the first chunk ends
// the stream with an error status.
func (r *Router) Speech(req *corev1.SpeechRequest, stream grpc.ServerStreamingServer[corev1.SpeechResponse]) error {
	start := time.Now()
	ctx := stream.Context()
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return err
	}
	in, err := audio.ParseSpeech(req.GetBody())
	if err != nil {
		return audioInvalid(err)
	}
	started := false
	out, res, err := r.Audio.Speech(ctx, p.MachineID, in, func(c audio.Chunk) error {
		if !started {
			started = true
			_ = stream.SetHeader(metadata.Pairs(MDUpstreamUs, strconv.FormatInt(c.Upstream.Microseconds(), 10)))
			if err := stream.Send(&corev1.SpeechResponse{Part: &corev1.SpeechResponse_ContentType{ContentType: c.ContentType}}); err != nil {
				return err
			}
		}
		if len(c.Data) == 0 {
			return nil
		}
		return stream.Send(&corev1.SpeechResponse{Part: &corev1.SpeechResponse_Audio{Audio: c.Data}})
	})
	err = gatewayError(r.Log, err, in.Model)
	ev := &busv1.UsageEvent{Endpoint: "audio.speech"}
	if err == nil || started {
		// Audio that reached the client was made from the whole input,
		// which the upstream bills: a speech cut off, or left by its
		// client, is billed as partial, not as nothing.
		ev.Characters = in.Characters()
		ev.Partial = err != nil
		// A token-billed model's usage, when its events told it.
		ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = out.InputTokens, out.OutputTokens, out.TotalTokens
	}
	r.record(ctx, p, res, start, err, ev)
	return err
}

// audioInvalid maps a request the audio package refused.
func audioInvalid(err error) error {
	var inv *audio.InvalidError
	if errors.As(err, &inv) {
		return invalidParam(inv.Param, inv.Code, inv.Message)
	}
	return internal("internal error")
}

// ListVoices lists a provider's text-to-speech voices.
func (r *Router) ListVoices(ctx context.Context, req *corev1.ListVoicesRequest) (*corev1.ListVoicesResponse, error) {
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	supported := strings.Join(audio.VoiceProviders, ", ")
	switch {
	case req.GetProvider() == "":
		return nil, invalidParam("provider", "missing_required_parameter", "missing required parameter: 'provider' (one of "+supported+")")
	case !audio.SupportedVoiceProvider(req.GetProvider()):
		return nil, invalidParam("provider", "unsupported_provider",
			fmt.Sprintf("voices are not listed for provider '%s'; supported providers: %s", req.GetProvider(), supported))
	}
	out, _, err := r.Audio.Voices(ctx, p.MachineID, req.GetProvider(), req.GetLang())
	_ = grpc.SetHeader(ctx, metadata.Pairs(MDUpstreamUs, strconv.FormatInt(out.Upstream.Microseconds(), 10)))
	var notEnabled *routing.NotEnabledError
	switch {
	case errors.As(err, &notEnabled):
		models := audio.VoiceModels(req.GetProvider())
		named := "'" + models[0] + "', which is"
		if n := len(models); n > 1 {
			named = "'" + strings.Join(models[:n-1], "', '") + "' or '" + models[n-1] + "', none of which is"
		}
		return nil, invalidParam("provider", "model_not_found", fmt.Sprintf("provider '%s' speaks its voices with %s among the enabled models of any active '%s' connection",
			req.GetProvider(), named, notEnabled.Provider))
	case errors.Is(err, routing.ErrNoCredentials), errors.Is(err, credential.ErrNoCredentials):
		return nil, invalidParam("provider", "no_credentials", fmt.Sprintf("no active credentials for provider '%s'", req.GetProvider()))
	}
	if err != nil {
		return nil, gatewayError(r.Log, err, req.GetProvider())
	}
	resp := &corev1.ListVoicesResponse{Object: "list", Data: make([]*corev1.Voice, len(out.Voices))}
	for i, v := range out.Voices {
		resp.Data[i] = &corev1.Voice{Id: v.ID, Name: v.Name, Lang: v.Lang, Gender: v.Gender, Model: v.Model}
	}
	return resp, nil
}
