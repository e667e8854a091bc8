package grpcapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/core/internal/embeddings"
	"github.com/switchboardhq/switchboard/internal/inproc"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// MDRequestID is the request id metadata; core makes one when it is absent.
const MDRequestID = contract.MDRequestID

// CreateEmbeddings embeds texts or token arrays.
func (r *Router) CreateEmbeddings(ctx context.Context, req *corev1.CreateEmbeddingsRequest) (*corev1.CreateEmbeddingsResponse, error) {
	growStack()
	start := time.Now()
	p, err := r.Auth.Gateway(ctx)
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
		Extra:      req.GetExtraJson(),
	}
	if len(req.GetTokens()) > 0 {
		in.Tokens = make([][]int64, len(req.GetTokens()))
		for i, t := range req.GetTokens() {
			in.Tokens[i] = t.GetTokens()
		}
	}
	out, res, err := r.Embeddings.Create(ctx, p.MachineID, in)
	_ = grpc.SetHeader(ctx, metadata.MD{MDUpstreamUs: {strconv.FormatInt(out.Upstream.Microseconds(), 10)}})
	err = gatewayError(r.Log, err, req.GetModel())
	ev := &busv1.UsageEvent{Endpoint: "embeddings"}
	if err == nil {
		ev.PromptTokens, ev.TotalTokens, ev.TokensEstimated = out.Billed(&in)
	}
	if err == nil && len(out.Body) > maxEmbeddingsAnswer {
		ev.Partial = true
		// Past what a call between roles carries, the answer would fail on
		// its way out as a "request too large" after being recorded as
		// served. The upstream did bill it: recorded as a failure, with the
		// tokens billed (partial).
		err = statusError(codes.Unavailable, "response_too_large",
			fmt.Sprintf("the upstream's answer (%d MiB) is larger than the gateway relays (%d MiB): ask for encoding_format base64, fewer inputs or fewer dimensions",
				len(out.Body)>>20, maxEmbeddingsAnswer>>20), MetaHTTPStatus, strconv.Itoa(http.StatusBadGateway))
	}
	r.record(ctx, p, res, start, err, ev)
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

// maxEmbeddingsAnswer is the largest upstream body an embeddings answer
// carries: the bound of a message between roles, less room for the rest of
// the response.
const maxEmbeddingsAnswer = inproc.MaxMessageBytes - 1<<20

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
	// The edge's bounds, in its words: a gRPC caller reaches core without
	// them.
	if n := len(req.GetTexts()) + len(req.GetTokens()); n > contract.MaxEmbeddingInputs {
		return invalidParam("input", contract.CodeArrayAboveMaxLength, contract.ArrayAboveMaxLength("input", contract.MaxEmbeddingInputs, n))
	}
	for i, t := range req.GetTokens() {
		if len(t.GetTokens()) == 0 {
			return invalidParam("input", "invalid_value", "input must not hold empty token arrays")
		}
		if n := len(t.GetTokens()); n > contract.MaxEmbeddingTokens {
			name := "input[" + strconv.Itoa(i) + "]"
			return invalidParam(name, contract.CodeArrayAboveMaxLength, contract.ArrayAboveMaxLength(name, contract.MaxEmbeddingTokens, n))
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
	switch key, err := embeddings.ValidExtra(req.GetExtraJson()); {
	case err != nil:
		return invalidParam("extra_json", "invalid_value", "extra_json must be a JSON object")
	case key != "":
		return invalidParam("extra_json", "invalid_value", "extra_json must not set "+strconv.Quote(key)+": the request's own field sets it")
	}
	return nil
}
