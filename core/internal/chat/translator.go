package chat

import (
	"errors"
	"net/http"
	"slices"

	"github.com/switchboardhq/switchboard/core/internal/caveman"
	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/internal/provider"
)

// translator carries one inbound dialect to one upstream format and back:
// the request, the whole answer, each stream event and each error. Adding a
// dialect or an upstream format is a new translator (files named
// <dialect>_<format>.go), not an edit of the attempt code.
type translator interface {
	// path is the upstream path after the connection's base URL.
	path() string
	// inject adds caveman's terse prompt to an upstream body.
	inject(body []byte, level string) ([]byte, error)
	// header adds the headers the upstream needs beyond the credential.
	header(h http.Header, in inbound)
	// request builds the upstream body for model.
	request(in inbound, model string) ([]byte, error)
	// whole converts a non-streamed answer and reads its usage.
	whole(in inbound, raw []byte, model string) ([]byte, Usage, error)
	// events returns the converter of one attempt's stream.
	events(in inbound, model string) eventTranslator
	// errorBody converts an upstream error body to the shape the client's
	// route passes through (OpenAI's, or Anthropic's on /v1/messages).
	errorBody(raw []byte) []byte
}

// refitter is a translator whose upstream may refuse, with a 400, what
// the gateway's own translation added, and say so: a max_tokens the
// gateway chose passing the model's context window (Anthropic says by how
// much), or reasoning_content sent back to a server that takes no such
// member (Groq, Cerebras). The attempt asks again, once, without it.
type refitter interface {
	// refit returns body, refused with raw, asked again without what the
	// gateway added (for a context window, asking for what the window
	// leaves); ok is false when raw is another refusal or the client
	// asked for it (its own cap).
	refit(in inbound, body, raw []byte) (fitted []byte, ok bool)
}

// names reports whether the request names field (null names nothing), in
// its own spelling or one that folds to it, as encoding/json and so the
// translation read the request ("Max_Tokens" is max_tokens).
func (in inbound) names(field string) bool {
	if raw, ok := in.fields[field]; ok && string(raw) != "null" {
		return true
	}
	for k, raw := range in.fields {
		if jsonscan.FoldsTo([]byte(k), field) && string(raw) != "null" {
			return true
		}
	}
	return false
}

// emitFunc sends one event of the client's dialect.
type emitFunc func(event string, data []byte) error

// eventTranslator converts a stream, event by event.
type eventTranslator interface {
	// event handles one upstream event; end reports the upstream's own
	// end-of-stream marker (nothing more is read).
	event(name string, data []byte, emit emitFunc) (end bool, err error)
	// finish runs once the upstream ended (marker or EOF): complete reports
	// whether the answer was whole; it may send closing events.
	finish(emit emitFunc) (complete bool, err error)
	// usage is what the upstream reported so far.
	usage() Usage
}

// Stream errors an event translator returns.
var (
	// errMalformedEvent: the upstream sent an event the gateway cannot read.
	errMalformedEvent = errors.New("the upstream sent a malformed event")
	// errUpstreamEvent: the upstream reported an error in the stream.
	errUpstreamEvent = errors.New("the upstream reported an error mid-stream")
)

// pick returns the translator of a dialect and an upstream's format, for
// the upstream's model.
func pick(d Dialect, spec provider.Spec, model string) translator {
	anthropic := spec.Format == provider.FormatAnthropic
	// A model the provider does not list may be text-only (a tool
	// result's image would make it refuse the request), and its output
	// limit is not known.
	listed, _ := spec.Model(model)
	anthOpts := translate.AnthropicOptions{MaxOutput: int64(listed.MaxOutput)}
	chatOpts := translate.ChatOptions{MaxCompletionTokens: spec.MaxCompletionTokens, ToolResultImages: slices.Contains(listed.Input, provider.ModalityImage),
		MaxStopSequences: spec.MaxStopSequences, ReasoningBack: spec.ReasoningBack}
	if spec.Format == provider.FormatResponses {
		switch d {
		case DialectMessages:
			// Every model of a Responses-only upstream (the ChatGPT backend
			// of codex) reasons: Claude Code's thinking is sent as
			// reasoning effort. For other upstreams the gateway knows no
			// model that reasons for certain (provider lists are short and
			// say nothing of it), and one that does not answers 400 to an
			// effort, so their thinking is left out.
			return messagesResponses{opts: translate.ChatOptions{Reasons: true}}
		case DialectResponses:
			return responsesNative{}
		}
		return chatResponses{}
	}
	switch d {
	case DialectMessages:
		if anthropic {
			return messagesAnthropic{}
		}
		return messagesOpenAI{toChatWith{opts: chatOpts}}
	case DialectResponses:
		switch {
		case spec.Responses:
			return responsesNative{}
		case anthropic:
			return responsesAnthropic{opts: translate.ChatOptions{ToolResultImages: chatOpts.ToolResultImages}, anth: anthOpts}
		}
		return responsesOpenAI{toChatWith{opts: chatOpts}}
	}
	if anthropic {
		return chatAnthropic{opts: anthOpts}
	}
	return chatOpenAI{}
}

// The upstream shapes: where a translator sends its body and how caveman's
// prompt goes into it. Translators embed one.
type (
	toChat      struct{}
	toAnthropic struct{}
	toResponses struct{}
)

// toChatWith is a translation of another dialect to a chat upstream
// (messagesOpenAI, responsesOpenAI): errors stay in OpenAI's shape (the
// edge renders them in the client's), and a request refused for the
// reasoning it sent back (ChatOptions.ReasoningBack) is asked again
// without it.
type toChatWith struct {
	toChat
	opts translate.ChatOptions
}

var _ refitter = toChatWith{}

func (toChatWith) header(http.Header, inbound) {}
func (toChatWith) errorBody(raw []byte) []byte { return raw }

func (t toChatWith) refit(_ inbound, body, raw []byte) ([]byte, bool) {
	if !t.opts.ReasoningBack {
		return nil, false
	}
	return translate.WithoutRefusedReasoning(body, raw)
}

func (toChat) path() string      { return "/chat/completions" }
func (toAnthropic) path() string { return "/messages" }
func (toResponses) path() string { return "/responses" }

func (toChat) inject(b []byte, level string) ([]byte, error) { return caveman.InjectOpenAI(b, level) }
func (toAnthropic) inject(b []byte, level string) ([]byte, error) {
	return caveman.InjectAnthropic(b, level)
}
func (toResponses) inject(b []byte, level string) ([]byte, error) {
	return caveman.InjectResponses(b, level)
}

// requestError turns a translation failure into the client's 400.
func requestError(err error, param string) error {
	var re *translate.RequestError
	if errors.As(err, &re) {
		return &RequestError{Param: re.Param, Code: "invalid_value", Message: re.Message}
	}
	return &RequestError{Param: param, Code: "invalid_value", Message: err.Error()}
}

// usageJSON is OpenAI's usage object, read in place (scan.go).
type usageJSON translate.ChatUsage

func (u *usageJSON) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return fromTranslate((*translate.ChatUsage)(u).Usage())
}

// anthropicUsage is Anthropic's usage object; input_tokens excludes cache
// reads and writes.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge takes the counts u reports (message_delta repeats or updates some).
func (u *anthropicUsage) merge(o *anthropicUsage) {
	if o == nil {
		return
	}
	for _, p := range []struct{ dst, src **int64 }{
		{&u.InputTokens, &o.InputTokens}, {&u.OutputTokens, &o.OutputTokens},
		{&u.CacheCreationInputTokens, &o.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &o.CacheReadInputTokens},
	} {
		if *p.src != nil {
			*p.dst = *p.src
		}
	}
}

func (u *anthropicUsage) usage() Usage {
	v := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	read, write := v(u.CacheReadInputTokens), v(u.CacheCreationInputTokens)
	prompt := v(u.InputTokens) + read + write
	out := v(u.OutputTokens)
	return Usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out, CachedTokens: read, CacheWriteTokens: write}
}

// toTranslate is fromTranslate's inverse.
func toTranslate(u Usage) translate.Usage {
	return translate.Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens, CacheCreationTokens: u.CacheWriteTokens,
	}
}

func fromTranslate(u translate.Usage) Usage {
	return Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens, CacheWriteTokens: u.CacheCreationTokens,
	}
}
