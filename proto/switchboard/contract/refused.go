package contract

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refused reports whether core refused a call as such (malformed, or too
// large for its store or its message bound): sending it again cannot help,
// where any other failure may pass.
func Refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted:
		return true
	}
	return false
}
