package grpcapi

import (
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/core/internal/caveman"
	"github.com/switchboardhq/switchboard/core/internal/chat"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// ChatCompletions answers a chat request, streamed or whole.
func (r *Router) ChatCompletions(req *corev1.ChatCompletionsRequest, stream grpc.ServerStreamingServer[corev1.ChatCompletionsResponse]) error {
	ctx := stream.Context()
	start := time.Now()
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return err
	}
	creq := chat.Request{MachineID: p.MachineID, Body: req.GetBody()}
	if !caveman.OptedOut(mdGetter(ctx)) && r.Caveman != nil {
		creq.Caveman = func(c *busv1.Connection) string { return r.Caveman(p.MachineID, c) }
	}
	out, res, err := r.Chat.Complete(ctx, creq, &chatSink{stream: stream})
	if err != nil {
		// The model is read again only to name it in the error.
		err = gatewayError(r.Log, err, chat.Model(req.GetBody()))
	}
	u := out.Usage
	r.record(ctx, p, res, start, err, &busv1.UsageEvent{
		Endpoint: "chat.completions", PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.TotalTokens, CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens,
		Partial: u.Partial, TokensEstimated: u.Estimated,
	})
	return err
}

// chatSink sends the answer on the gRPC stream; the header tells the edge
// how long the upstream took before it started.
type chatSink struct {
	stream grpc.ServerStreamingServer[corev1.ChatCompletionsResponse]
}

func (s *chatSink) Start(upstream time.Duration) error {
	return s.stream.SendHeader(metadata.Pairs(MDUpstreamUs, strconv.FormatInt(upstream.Microseconds(), 10)))
}

func (s *chatSink) Chunk(data []byte) error {
	return s.stream.Send(&corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Chunk{Chunk: data}})
}

func (s *chatSink) Completion(data []byte) error {
	return s.stream.Send(&corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Completion{Completion: data}})
}
