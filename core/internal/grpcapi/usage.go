package grpcapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/internal/requestid"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// record completes a request's usage event (ev carries the endpoint and
// the token counts) and publishes it, off the request path. A failed request
// is recorded with its status and no tokens (failed attempts are not
// billed), unless ev is partial: it failed after part of the answer reached
// the client, and that part is billed. Every failed request, partial or not,
// carries its error's reason, so that the request log says why it failed.
// The caller's request id is only a sanitised correlation field; the
// publisher mints the event's own id.
func (r *Router) record(ctx context.Context, p Principal, res dispatch.Result, start time.Time, err error, ev *busv1.UsageEvent) {
	ev.RequestId = requestid.From(mdValue(ctx, MDRequestID))
	ev.MachineId = p.MachineID
	ev.KeyId = p.KeyID
	ev.Provider = res.Target.Spec.ID
	ev.Model = res.Target.Model
	ev.Status = int32(httpStatusOf(err))
	ev.LatencyMs = time.Since(start).Milliseconds()
	ev.Attempts = int32(res.Attempts)
	ev.Time = timestamppb.New(start)
	if res.Conn != nil {
		ev.ConnectionId = res.Conn.Connection.GetId()
	}
	if err != nil {
		ev.ErrorCode = reasonOf(err)
		if !ev.GetPartial() {
			ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens, ev.CachedTokens, ev.ReasoningTokens = 0, 0, 0, 0, 0
			ev.CacheWriteTokens = 0
		}
		if errors.Is(context.Cause(ctx), contract.ErrShuttingDown) {
			// The edge's shutdown ended the call: its client got the 503
			// shutting_down, to send the request again, not a leave of its
			// own.
			ev.Status, ev.ErrorCode = http.StatusServiceUnavailable, contract.ReasonShuttingDown
		}
	}
	r.Metrics.observe(res, ev, start)
	r.Usage.Record(ev)
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
	return runtime.HTTPStatusFromCode(st.Code())
}
