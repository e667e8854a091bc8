package upstreamtest

import "strings"

// provider identifies the API dialect of a route; it selects the error shape.
type provider uint8

const (
	providerOpenAI provider = iota
	providerAnthropic
	numProviders
)

// providerOf reports which provider's API path belongs to.
func providerOf(path string) provider {
	if path == PathMessages || strings.HasPrefix(path, PathMessages+"/") {
		return providerAnthropic
	}
	return providerOpenAI
}

// Messages of the real providers, reused by faults and validation.
const (
	msgOpenAIBadJSON = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. " +
		"The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, " +
		"please contact us through our help center at help.openai.com.)"
	msgOpenAINoModel      = "you must provide a model parameter"
	msgOpenAINoKey        = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from https://platform.openai.com/account/api-keys."
	msgOpenAIBadKey       = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
	msgOpenAIRateLimit    = "Rate limit reached for requests. Please try again later. Visit https://platform.openai.com/account/rate-limits to learn more."
	msgOpenAIOverloaded   = "The server is overloaded or not ready yet."
	msgAnthropicBadKey    = "invalid x-api-key"
	msgAnthropicExpired   = "OAuth token has expired. Please obtain a new token or refresh your existing token."
	msgAnthropicRateLimit = "This request would exceed the rate limit for your organization. Please try again later."
	msgAnthropicOverload  = "Overloaded"
	msgAnthropicNoVersion = "anthropic-version: header is required"
)

// openAIErrorBody returns OpenAI's error shape
// {"error":{"message","type","param","code"}}; empty param or code encode as null.
func openAIErrorBody(typ, code, param, msg string) []byte {
	b := make([]byte, 0, 96+len(msg))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":`...)
	b = appendStringOrNull(b, param)
	b = append(b, `,"code":`...)
	b = appendStringOrNull(b, code)
	return append(b, "}}\n"...)
}

// invalidRequest is the common OpenAI 400 body.
func invalidRequest(code, param, msg string) []byte {
	return openAIErrorBody("invalid_request_error", code, param, msg)
}

// anthropicErrorBody returns Anthropic's error shape
// {"type":"error","error":{"type","message"}}.
func anthropicErrorBody(typ, msg string) []byte {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	return append(b, "}}"...)
}
