package grpcapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/core/internal/caveman"
	"github.com/switchboardhq/switchboard/core/internal/chat"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// dialects maps the wire enum to the chat path's dialect.
var dialects = map[corev1.ChatDialect]chat.Dialect{
	corev1.ChatDialect_CHAT_DIALECT_UNSPECIFIED: chat.DialectChat,
	corev1.ChatDialect_CHAT_DIALECT_MESSAGES:    chat.DialectMessages,
	corev1.ChatDialect_CHAT_DIALECT_RESPONSES:   chat.DialectResponses,
}

// ChatCompletions answers a chat request of any dialect, streamed or whole.
func (r *Router) ChatCompletions(req *corev1.ChatCompletionsRequest, stream grpc.ServerStreamingServer[corev1.ChatCompletionsResponse]) error {
	var sink chat.Sink = &chatSink{stream: stream}
	if req.GetBatchEvents() {
		sink = &batchSink{chatSink{stream: stream}}
	}
	return r.complete(stream.Context(), req.GetDialect(), req.GetBody(), req.GetHeaders(), false, sink)
}

// CompleteChat answers a chat request of any dialect that is not streamed.
func (r *Router) CompleteChat(ctx context.Context, req *corev1.CompleteChatRequest) (*corev1.CompleteChatResponse, error) {
	sink := &wholeSink{ctx: ctx}
	if err := r.complete(ctx, req.GetDialect(), req.GetBody(), req.GetHeaders(), true, sink); err != nil {
		return nil, err
	}
	return &corev1.CompleteChatResponse{Completion: sink.completion}, nil
}

// complete answers a chat request into sink and records its usage; whole
// refuses a streaming request.
func (r *Router) complete(ctx context.Context, dialect corev1.ChatDialect, body []byte, header map[string]string, whole bool, sink chat.Sink) error {
	growStack()
	start := time.Now()
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return err
	}
	d, ok := dialects[dialect]
	if !ok {
		return invalidParam("dialect", "invalid_value", "unknown chat dialect")
	}
	creq := r.chatRequest(ctx, p, d, body, header)
	creq.Whole = whole
	out, res, err := r.Chat.Complete(ctx, creq, sink)
	if err != nil {
		// The model is read again only to name it in the error.
		err = gatewayError(r.Log, err, chat.Model(body))
	}
	u := out.Usage
	r.record(ctx, p, res, start, err, &busv1.UsageEvent{
		Endpoint: d.String(), PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.TotalTokens, CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens,
		CacheWriteTokens: u.CacheWriteTokens, Partial: u.Partial, TokensEstimated: u.Estimated,
	})
	return err
}

// CountTokens answers an Anthropic count_tokens request.
func (r *Router) CountTokens(ctx context.Context, req *corev1.CountTokensRequest) (*corev1.CountTokensResponse, error) {
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	creq := r.chatRequest(ctx, p, chat.DialectMessages, req.GetBody(), req.GetHeaders())
	body, _, err := r.Chat.CountTokens(ctx, creq)
	if err != nil {
		return nil, gatewayError(r.Log, err, chat.Model(req.GetBody()))
	}
	return &corev1.CountTokensResponse{Body: body}, nil
}

func (r *Router) chatRequest(ctx context.Context, p Principal, d chat.Dialect, body []byte, header map[string]string) chat.Request {
	creq := chat.Request{MachineID: p.MachineID, Dialect: d, Body: body, Header: header}
	if !caveman.OptedOut(mdGetter(ctx)) && r.Caveman != nil {
		creq.Caveman = func(c *busv1.Connection) string { return r.Caveman(p.MachineID, c) }
	}
	return creq
}

// chatSink sends the answer on the gRPC stream; the header tells the edge
// how long the upstream took before it started.
type chatSink struct {
	stream grpc.ServerStreamingServer[corev1.ChatCompletionsResponse]
}

func (s *chatSink) Start(upstream time.Duration) error {
	return s.stream.SendHeader(metadata.MD{MDUpstreamUs: {strconv.FormatInt(upstream.Microseconds(), 10)}})
}

// chunkMessage and completionMessage are a response and its event made in
// one allocation: a stream sends one per event.
type (
	chunkMessage struct {
		resp  corev1.ChatCompletionsResponse
		event corev1.ChatCompletionsResponse_Chunk
	}
	completionMessage struct {
		resp  corev1.ChatCompletionsResponse
		event corev1.ChatCompletionsResponse_Completion
	}
)

func (s *chatSink) Chunk(event string, data []byte) error {
	m := &chunkMessage{event: corev1.ChatCompletionsResponse_Chunk{Chunk: data}}
	m.resp.Event, m.resp.EventName = &m.event, event
	return s.stream.Send(&m.resp)
}

// wholeSink keeps the whole answer of a CompleteChat call; the header
// tells the edge how long the upstream took.
type wholeSink struct {
	ctx        context.Context
	completion []byte
}

func (s *wholeSink) Start(upstream time.Duration) error {
	return grpc.SetHeader(s.ctx, metadata.MD{MDUpstreamUs: {strconv.FormatInt(upstream.Microseconds(), 10)}})
}

func (s *wholeSink) Chunk(string, []byte) error {
	// Complete refuses a streaming request before this could happen.
	return statusError(codes.Internal, "internal_error", "a streamed answer on CompleteChat")
}

func (s *wholeSink) Completion(data []byte) error {
	s.completion = data
	return nil
}

// batchSink is a chatSink for a caller that reads ChatEvents (it asked
// for batch_events).
type batchSink struct{ chatSink }

// Events sends events the upstream sent together in one message (one on
// its own as a chunk).
func (s *batchSink) Events(evs []chat.Event) error {
	if len(evs) == 1 {
		return s.Chunk(evs[0].Name, evs[0].Data)
	}
	out := make([]corev1.ChatEvent, len(evs))
	list := make([]*corev1.ChatEvent, len(evs))
	for i, ev := range evs {
		out[i].Data, out[i].Name = ev.Data, ev.Name
		list[i] = &out[i]
	}
	return s.stream.Send(&corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Events{Events: &corev1.ChatEvents{Events: list}}})
}

func (s *chatSink) Completion(data []byte) error {
	m := &completionMessage{event: corev1.ChatCompletionsResponse_Completion{Completion: data}}
	m.resp.Event = &m.event
	return s.stream.Send(&m.resp)
}

// GetResponse returns a stored Responses answer of the caller's machine.
func (r *Router) GetResponse(ctx context.Context, req *corev1.GetResponseRequest) (*corev1.GetResponseResponse, error) {
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, missingParam("id")
	}
	body, err := r.Chat.GetResponse(ctx, p.MachineID, req.GetId())
	if errors.Is(err, chat.ErrResponseNotFound) {
		return nil, statusError(codes.NotFound, "not_found", "Response with id '"+req.GetId()+"' not found.", MetaHTTPStatus, "404")
	}
	if err != nil {
		return nil, gatewayError(r.Log, err, "")
	}
	return &corev1.GetResponseResponse{Body: body}, nil
}
