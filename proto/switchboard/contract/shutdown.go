package contract

import "errors"

// ErrShuttingDown is the cause the edge cancels the requests still in
// flight with once its shutdown's grace period is over, their calls to core
// included. Core, serving such a call in the same process (internal/inproc
// keeps the caller's context), reads it as the context's cause and records
// the request with what its client got, the 503 ReasonShuttingDown, not as
// one its client left; gRPC over the network carries no cause.
var ErrShuttingDown = errors.New("the gateway is shutting down")

// ReasonShuttingDown is the ErrorInfo reason, and the error code, of a
// request the gateway's shutdown ended: a 503 the client may send again,
// to another replica.
const ReasonShuttingDown = "shutting_down"
