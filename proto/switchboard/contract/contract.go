// Package contract declares, once, the strings both ends of switchboard's
// gRPC boundaries must agree on and that the .proto files cannot type:
// metadata keys, google.rpc.ErrorInfo domains and metadata keys, and the
// HTTP headers the edge hands to core. It is hand-written and lives beside
// the protos (buf generate leaves it alone); import it at both ends instead
// of spelling a string out again.
package contract

// Metadata keys of every internal call (internal/rpcauth).
const (
	// MDInternalToken carries the internal service credential
	// (SWITCHBOARD_INTERNAL_TOKEN) that proves the caller is a role.
	MDInternalToken = "x-switchboard-internal-token"
	// MDUserID and MDUserEmail name the signed-in user a role (the edge)
	// vouches for. Billing reads them only from a caller that presented
	// MDInternalToken; values are percent-encoded UTF-8.
	MDUserID    = "x-switchboard-user-id"
	MDUserEmail = "x-switchboard-user-email"
	// MDAdmin ("1") says the caller presented the admin token to the edge:
	// billing's operator methods read it only from a caller that presented
	// MDInternalToken and vouched for no user.
	MDAdmin = "x-switchboard-admin"
)

// InternalKeys are the metadata keys only roles may set; the edge never
// forwards them from a client's request.
var InternalKeys = []string{MDInternalToken, MDUserID, MDUserEmail, MDAdmin}
