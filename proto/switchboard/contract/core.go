package contract

import "strconv"

// Request metadata core's Router and Admin read.
const (
	// MDMachine names the machine an admin call acts on.
	MDMachine = "x-switchboard-machine"
	// MDPathMachine carries the machine id of a legacy /{machineId}/v1/...
	// route; the edge sets it, and the key must belong to that machine.
	MDPathMachine = "x-switchboard-path-machine"
	// MDCatalogFetch marks a request made by another instance's catalog
	// fetch; such a request never triggers a fetch itself.
	MDCatalogFetch = "x-switchboard-catalog-fetch"
	// MDRequestID is the request id; core makes one when it is absent.
	MDRequestID = "x-request-id"
	// MDTokenSaver and MDTokenSaverLegacy switch the chat token saver
	// (the legacy name is the source system's).
	MDTokenSaver       = "x-switchboard-token-saver"
	MDTokenSaverLegacy = "x-9router-token-saver"
)

// Response metadata core sets for the edge.
const (
	// MDUpstreamUs is the microseconds core spent waiting on upstreams,
	// left out of the edge's overhead figure.
	MDUpstreamUs = "x-switchboard-upstream-us"
	// MDHTTPCode asks the HTTP gateway for a status other than 200.
	MDHTTPCode = "x-http-code"
)

// CoreErrorDomain is the errdetails.ErrorInfo domain of core's errors.
const CoreErrorDomain = "switchboard.core"

// ErrorInfo metadata keys core sets and the edge reads.
const (
	// MetaParam names the request parameter at fault.
	MetaParam = "param"
	// MetaHTTPStatus is the HTTP status to answer with (core and billing).
	MetaHTTPStatus = "http_status"
	// MetaUpstreamBody carries an upstream error body passed through to the
	// client (truncated, valid UTF-8).
	MetaUpstreamBody = "upstream_body"
)

// ReasonStreamedRequest is the ErrorInfo reason of CompleteChat refusing a
// request that asks for a stream (as core reads its body). No upstream was
// called: the caller may send it again on ChatCompletions.
const ReasonStreamedRequest = "streamed_request"

// ForwardedHeaders are the request headers (lower case) the edge hands to
// core as metadata of the same name, on every route: the API key headers,
// the admin machine, the loop breaker of catalog fetches, the token saver
// switches and the idempotency key.
var ForwardedHeaders = []string{
	"authorization",
	"x-api-key",
	"x-goog-api-key",
	MDMachine,
	MDCatalogFetch,
	MDTokenSaver,
	MDTokenSaverLegacy,
	"idempotency-key",
}

// HeaderUsageEvents marks a SB_USAGE message that is a busv1.UsageBatch and
// carries its events' count (decimal); a message without it is one
// busv1.UsageEvent.
const HeaderUsageEvents = "Switchboard-Usage-Events"

// HeaderUsageEncoding names the compression of a batch's payload:
// UsageEncodingS2 for S2's block format (github.com/klauspost/compress/s2);
// without it the payload is the batch itself.
const HeaderUsageEncoding = "Switchboard-Usage-Encoding"

// UsageEncodingS2 is HeaderUsageEncoding's value for an S2 block.
const UsageEncodingS2 = "s2"

// EmbeddingsMembers are the members of an embeddings request the gateway
// reads itself; the others travel in CreateEmbeddingsRequest.extra_json,
// which may not hold these (in any case, as encoding/json matches keys).
var EmbeddingsMembers = []string{"model", "input", "encoding_format", "dimensions", "user"}

// The most inputs an embeddings request may hold (OpenAI's 2,048), and the
// most ids one token-id input may hold, on HTTP and on gRPC alike.
const (
	MaxEmbeddingInputs = 2048
	MaxEmbeddingTokens = 1 << 16
)

// TranscriptionFields are the fields of a transcription form the gateway
// reads itself (the file among them); the others travel in
// TranscribeOptions.extra_fields, which may not name these.
var TranscriptionFields = []string{"file", "model", "language", "prompt", "response_format", "temperature",
	"timestamp_granularities", "timestamp_granularities[]", "stream"}

// MaxTranscriptionExtraFields bounds TranscribeOptions.extra_fields.
const MaxTranscriptionExtraFields = 64

// The most stop sequences a chat request (OpenAI's 4) and a Messages
// request may carry, on HTTP and on gRPC alike: the gateway's own stop
// filter does work per sequence for every byte of an answer.
const (
	MaxChatStop     = 4
	MaxMessagesStop = 256
)

// CodeArrayAboveMaxLength is OpenAI's error code of a request member that
// holds more items than it may: the edge answers it on HTTP for every list
// the gateway bounds, and core on gRPC for the stop lists and an embeddings
// request's inputs (a gRPC caller's other lists reach the upstream, which
// answers for them).
const CodeArrayAboveMaxLength = "array_above_max_length"

// ArrayAboveMaxLength is OpenAI's message for CodeArrayAboveMaxLength: the
// member's name, its bound, and how many items it holds.
func ArrayAboveMaxLength(name string, max, n int) string {
	return "Invalid '" + name + "': array too long. Expected an array with maximum length " +
		strconv.Itoa(max) + ", but got an array with length " + strconv.Itoa(n) + " instead."
}

// CodeEmptyArray is OpenAI's error code of a list member that must hold an
// item and holds none.
const CodeEmptyArray = "empty_array"

// EmptyArray is OpenAI's message for CodeEmptyArray: the member's name.
func EmptyArray(name string) string {
	return "Invalid '" + name + "': empty array. Expected an array with minimum length 1, but got an empty array instead."
}

// OpenAI's error codes of an integer member past its bounds.
const (
	CodeIntegerAboveMaxValue = "integer_above_max_value"
	CodeIntegerBelowMinValue = "integer_below_min_value"
)

// IntegerAboveMaxValue is OpenAI's message for CodeIntegerAboveMaxValue:
// the member's name, its bound, and the value it got.
func IntegerAboveMaxValue(name string, max, got int64) string {
	return "Invalid '" + name + "': integer above maximum value. Expected a value <= " +
		strconv.FormatInt(max, 10) + ", but got " + strconv.FormatInt(got, 10) + " instead."
}

// IntegerBelowMinValue is OpenAI's message for CodeIntegerBelowMinValue:
// the member's name, its bound, and the value it got.
func IntegerBelowMinValue(name string, min, got int64) string {
	return "Invalid '" + name + "': integer below minimum value. Expected a value >= " +
		strconv.FormatInt(min, 10) + ", but got " + strconv.FormatInt(got, 10) + " instead."
}
