// Package grpcapi is core's gRPC surface: the Router and Admin services, the
// authentication of their callers, and the one mapping from domain errors to
// gRPC status.
package grpcapi

import (
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// ErrorDomain is the errdetails.ErrorInfo domain of core's errors.
const ErrorDomain = contract.CoreErrorDomain

// Metadata keys of errdetails.ErrorInfo that the edge reads.
const (
	// MetaParam names the request parameter at fault.
	MetaParam = contract.MetaParam
	// MetaHTTPStatus carries an upstream status to pass through.
	MetaHTTPStatus = contract.MetaHTTPStatus
)

// statusError builds a status whose ErrorInfo reason is the stable snake_case
// code clients see as the OpenAI error "code".
func statusError(code codes.Code, reason, msg string, meta ...string) error {
	msg = capMessage(msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	if len(meta) > 0 {
		info.Metadata = make(map[string]string, len(meta)/2)
		for i := 0; i+1 < len(meta); i += 2 {
			info.Metadata[meta[i]] = meta[i+1]
		}
	}
	st, err := status.New(code, msg).WithDetails(info)
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// maxMessage bounds an error's message: one that quotes what a caller sent
// (a name, an id of megabytes) would otherwise answer megabytes, and, as a
// gRPC status message, travel in a trailer larger than a peer takes.
const maxMessage = 2 << 10

// capMessage cuts a message past maxMessage, on a character's boundary.
func capMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "… (cut)"
}

func invalidParam(param, reason, msg string) error {
	return statusError(codes.InvalidArgument, reason, msg, MetaParam, param)
}

func missingParam(param string) error {
	return invalidParam(param, "missing_required_parameter", "missing required parameter: '"+param+"'")
}

// storeUnavailable refuses a call the state store did not answer in time
// for: the caller may try again.
func storeUnavailable() error {
	return statusError(codes.Unavailable, "store_unavailable", "state store unavailable, try again")
}

func notFound(reason, msg string) error {
	return statusError(codes.NotFound, reason, msg)
}

func unauthenticated(reason, msg string) error {
	return statusError(codes.Unauthenticated, reason, msg)
}

func internal(msg string) error {
	return statusError(codes.Internal, "internal_error", msg)
}
