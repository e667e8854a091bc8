package grpcapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/embeddings"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// MDRequestID is the request id metadata; core makes one when it is absent.
const MDRequestID = "x-request-id"

// CreateEmbeddings embeds texts or token arrays.
func (r *Router) CreateEmbeddings(ctx context.Context, req *corev1.CreateEmbeddingsRequest) (*corev1.CreateEmbeddingsResponse, error) {
	start := time.Now()
	p, err := r.auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	if err := validEmbeddings(req); err != nil {
		return nil, err
	}
	in := embeddings.Request{
		Model:      req.GetModel(),
		Texts:      req.GetTexts(),
		Dimensions: req.Dimensions,
		User:       req.GetUser(),
		Format:     req.GetEncodingFormat(),
		JSON:       req.GetRawJson(),
	}
	if len(req.GetTokens()) > 0 {
		in.Tokens = make([][]int64, len(req.GetTokens()))
		for i, t := range req.GetTokens() {
			in.Tokens[i] = t.GetTokens()
		}
	}
	out, res, err := r.embeddings.Create(ctx, p.MachineID, in)
	_ = grpc.SetHeader(ctx, metadata.Pairs(MDUpstreamUs, strconv.FormatInt(out.Upstream.Microseconds(), 10)))
	err = gatewayError(r.log, err, req.GetModel())
	r.record(ctx, p, res, "embeddings", start, err, out.PromptTokens, out.TotalTokens)
	if err != nil {
		return nil, err
	}
	resp := &corev1.CreateEmbeddingsResponse{
		Model: out.Model,
		Json:  out.Body,
		Usage: &corev1.EmbeddingsUsage{PromptTokens: out.PromptTokens, TotalTokens: out.TotalTokens},
	}
	if res.Conn != nil {
		resp.ConnectionId = res.Conn.Connection.GetId()
	}
	if !req.GetRawJson() {
		resp.Data = make([]*corev1.Embedding, len(out.Vectors))
		for i, v := range out.Vectors {
			resp.Data[i] = &corev1.Embedding{Index: int32(i), Vector: v}
		}
	}
	return resp, nil
}

func validEmbeddings(req *corev1.CreateEmbeddingsRequest) error {
	if req.GetModel() == "" {
		return missingParam("model")
	}
	hasTexts, hasTokens := len(req.GetTexts()) > 0, len(req.GetTokens()) > 0
	if hasTexts == hasTokens {
		if !hasTexts {
			return missingParam("input")
		}
		return invalidParam("input", "invalid_value", "input holds either texts or token arrays, not both")
	}
	for _, t := range req.GetTokens() {
		if len(t.GetTokens()) == 0 {
			return invalidParam("input", "invalid_value", "input must not hold empty token arrays")
		}
	}
	switch req.GetEncodingFormat() {
	case "", embeddings.FormatFloat, embeddings.FormatBase64:
	default:
		return invalidParam("encoding_format", "invalid_value", "encoding_format must be 'float' or 'base64'")
	}
	if req.Dimensions != nil && req.GetDimensions() < 1 {
		return invalidParam("dimensions", "invalid_value", "dimensions must be a positive integer")
	}
	return nil
}

// record publishes the request's usage event, off the request path.
func (r *Router) record(ctx context.Context, p Principal, res dispatch.Result, endpoint string, start time.Time, err error, prompt, total int64) {
	id := mdGetter(ctx)(MDRequestID)
	if id == "" {
		id = uuid.NewString()
	}
	ev := &busv1.UsageEvent{
		RequestId:    id,
		MachineId:    p.MachineID,
		KeyId:        p.KeyID,
		Provider:     res.Target.Spec.ID,
		Model:        res.Target.Model,
		Endpoint:     endpoint,
		PromptTokens: prompt,
		TotalTokens:  total,
		Status:       int32(httpStatusOf(err)),
		LatencyMs:    time.Since(start).Milliseconds(),
		Attempts:     int32(res.Attempts),
		Time:         timestamppb.New(start),
	}
	if res.Conn != nil {
		ev.ConnectionId = res.Conn.Connection.GetId()
	}
	if err != nil {
		ev.PromptTokens, ev.TotalTokens = 0, 0
		ev.ErrorCode = reasonOf(err)
	}
	r.usage.Record(ev)
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return status.Code(err).String()
}

// httpStatusOf is the HTTP status the edge answers for err.
func httpStatusOf(err error) int {
	if err == nil {
		return http.StatusOK
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if s, err := strconv.Atoi(info.GetMetadata()[MetaHTTPStatus]); err == nil {
				return s
			}
		}
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return 499
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
