package upstreamtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Paths of the routes the fake serves, for [Server.Enqueue],
// [Server.SetDefault] and [Server.Count].
const (
	PathModels          = "/v1/models"
	PathChatCompletions = "/v1/chat/completions"
	PathEmbeddings      = "/v1/embeddings"
	PathMessages        = "/v1/messages"
	PathTranscriptions  = "/v1/audio/transcriptions"
	PathTranslations    = "/v1/audio/translations"
	PathSpeech          = "/v1/audio/speech"
)

// Request is a request received by the fake, as recorded by
// [Server.Requests].
type Request struct {
	Method   string
	Path     string // URL path, e.g. "/v1/chat/completions"
	RawQuery string
	Header   http.Header
	Body     []byte    // the raw request body
	FileName string    // multipart audio routes: file name of the "file" part
	File     []byte    // multipart audio routes: content of the "file" part
	Time     time.Time // when the request was received
}

// Option configures a [Server].
type Option func(*config)

type config struct {
	models        []string
	keys          []string
	dims          int
	usageInFinish bool
	record        bool
	hook          func(Request)
	chunkDelay    time.Duration
	noToolCalls   bool
	onlyTools     []string
	streamOnly    bool
	cacheWrite    int
	cacheRead     int
	thinking      bool
	strictReason  bool
}

// WithModels sets the model ids listed by GET /v1/models. The default is
// gpt-4o-mini, text-embedding-3-small, whisper-1 and gpt-4o-mini-tts.
// Requests are answered whatever model they name.
func WithModels(ids ...string) Option {
	return func(c *config) { c.models = append([]string(nil), ids...) }
}

// WithAPIKey makes the fake require one of keys: "Authorization: Bearer
// <key>" on OpenAI routes, "x-api-key: <key>" on /v1/messages. Other requests
// get a 401 in the provider's error shape. Without this option any (or no)
// credential is accepted. Scripted faults take precedence over the check.
func WithAPIKey(keys ...string) Option {
	return func(c *config) { c.keys = append([]string(nil), keys...) }
}

// WithEmbeddingDims sets the vector length of embeddings for requests
// without "dimensions" (default 8).
func WithEmbeddingDims(n int) Option {
	return func(c *config) { c.dims = n }
}

// WithUsageInFinishChunk makes streaming chat completions carry the usage
// on the finish_reason chunk (with its non-empty choices) instead of on a
// separate final chunk with empty choices, as some OpenAI-compatible
// providers do. Usage is then sent whether or not the request asked for it
// with stream_options.include_usage.
func WithUsageInFinishChunk() Option {
	return func(c *config) { c.usageInFinish = true }
}

// WithoutRecording stops the fake from keeping requests (Requests returns
// nil); counts are still kept. Meant for benchmarks and long runs.
func WithoutRecording() Option {
	return func(c *config) { c.record = false }
}

// WithRequestHook calls fn with every request when it is received, before
// it is answered, on the handler's goroutine. It lets tests wait for a
// request without polling (for example by sending on a buffered channel).
// fn must not block until the response has been received by the client, nor
// modify the request (its header and body are shared with Requests).
func WithRequestHook(fn func(Request)) Option {
	return func(c *config) { c.hook = fn }
}

// WithChunkDelay waits d between two chunks of every streamed response, to
// mimic token-by-token generation.
func WithChunkDelay(d time.Duration) Option {
	return func(c *config) { c.chunkDelay = d }
}

// WithoutToolCalls makes the fake answer with text even when the request
// offers tools, as a model that needs none would; coding agents send dozens
// of tools with every request and would otherwise run them.
func WithoutToolCalls() Option {
	return func(c *config) { c.noToolCalls = true }
}

// WithStrictReasoning makes chat answers reason as Groq's reasoning models
// do (ThinkingText in a "reasoning" member, streamed first) and refuses, as
// Groq and Cerebras do, a request whose messages carry a reasoning_content
// member, which their schemas do not have.
func WithStrictReasoning() Option {
	return func(c *config) { c.strictReason = true }
}

// WithToolCallsOnly makes the fake call, of the tools a request offers,
// only those named (a coding agent's read-only one, say), and answer with
// text when it offers none of them.
func WithToolCallsOnly(names ...string) Option {
	return func(c *config) { c.onlyTools = names }
}

// WithChatGPTBackend makes /v1/responses refuse with a 400 what the
// ChatGPT backend of codex connections refuses: a request without
// "stream": true or without "store": false, and one with max_output_tokens,
// temperature or top_p ({"detail": "Unsupported parameter: ..."}).
func WithChatGPTBackend() Option {
	return func(c *config) { c.streamOnly = true }
}

// WithPromptCache makes /v1/messages answers report write tokens written to
// and read tokens read from the prompt cache (cache_creation_input_tokens
// and cache_read_input_tokens), as Anthropic does for cache_control.
func WithPromptCache(write, read int) Option {
	return func(c *config) { c.cacheWrite, c.cacheRead = write, read }
}

// WithThinkingMode makes chat answers reason, as DeepSeek's thinking
// mode does: each carries ThinkingText as its reasoning_content (streamed
// first). And as DeepSeek, a chat request with tools whose history holds
// an assistant message with tool_calls but no reasoning_content member is
// refused with DeepSeek's 400 (MsgReasoningNotPassedBack).
func WithThinkingMode() Option {
	return func(c *config) { c.thinking = true }
}

// Server is a fake upstream provider: an HTTP test server speaking the
// OpenAI API under /v1 and the Anthropic Messages API at /v1/messages, whose
// answers can be scripted with faults. It is safe for concurrent use.
type Server struct {
	ts        *httptest.Server
	cfg       config
	models    []byte // pre-encoded GET /v1/models answer
	done      chan struct{}
	closeOnce sync.Once
	ids       atomic.Uint64
	// vectors caches encoded embeddings (see encodedVector).
	vectors sync.Map
	cached  atomic.Int64

	mu     sync.Mutex
	routes map[string]*route
	reqs   []Request
}

// route holds the scripted behaviour and request count of one path.
type route struct {
	queue []Fault
	def   Fault
	count int
}

// New starts a fake server and closes it when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := NewServer(opts...)
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a fake server outside of a test; the caller must Close
// it.
func NewServer(opts ...Option) *Server {
	cfg := config{
		models: []string{"gpt-4o-mini", "text-embedding-3-small", "whisper-1", "gpt-4o-mini-tts"},
		dims:   8,
		record: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{
		cfg:    cfg,
		models: encodeModelList(cfg.models),
		done:   make(chan struct{}),
		routes: make(map[string]*route),
	}
	s.ts = httptest.NewServer(s)
	return s
}

// URL returns the base URL of the API, including /v1, e.g.
// "http://127.0.0.1:1234/v1".
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Close releases hanging, stalled and delayed requests, drops every client
// connection and shuts the server down, waiting for its handlers to return.
// It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		// Also unblock handlers writing to clients that stopped reading.
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqs == nil {
		return nil
	}
	return append([]Request(nil), s.reqs...)
}

// Count returns how many requests were received on path, including those
// answered with a fault.
func (s *Server) Count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.routes[path]; r != nil {
		return r.count
	}
	return 0
}

// Enqueue scripts the next responses of path (for example
// PathChatCompletions): each request takes the next fault in order; once
// the queue is empty the default behaviour resumes. Each retry made by a
// client consumes a fault too.
func (s *Server) Enqueue(path string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.route(path)
	r.queue = append(r.queue, faults...)
}

// SetDefault sets the behaviour of path when its queue is empty, until
// changed; SetDefault(path, OK()) restores the normal answers.
func (s *Server) SetDefault(path string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route(path).def = f
}

// route returns the state of path, creating it. s.mu must be held.
func (s *Server) route(path string) *route {
	r := s.routes[path]
	if r == nil {
		r = &route{}
		s.routes[path] = r
	}
	return r
}

// take counts and records req and returns the fault that applies to it.
func (s *Server) take(req *Request) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.record {
		s.reqs = append(s.reqs, *req)
	}
	r := s.route(req.Path)
	r.count++
	if len(r.queue) > 0 {
		f := r.queue[0]
		r.queue[0] = Fault{}
		r.queue = r.queue[1:]
		return f
	}
	return r.def
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		abort()
	}
	path := r.URL.Path
	req := Request{Method: r.Method, Path: path, Body: body}
	var up *upload
	if r.Method == http.MethodPost && (path == PathTranscriptions || path == PathTranslations) {
		up = parseUpload(r.Header.Get("Content-Type"), body)
		req.FileName, req.File = up.fileName, up.file
	}
	if s.cfg.record || s.cfg.hook != nil {
		req.RawQuery = r.URL.RawQuery
		req.Header = r.Header.Clone()
		req.Time = time.Now()
	}
	f := s.take(&req)
	if s.cfg.hook != nil {
		s.cfg.hook(req)
	}

	o := &output{s: s, w: w, r: r, rc: http.NewResponseController(w), fault: f, prov: providerOf(path)}
	if f.delay > 0 && !s.wait(r.Context(), f.delay) {
		abort()
	}
	switch f.kind {
	case faultStatus:
		h := w.Header()
		for k, v := range f.header {
			h[k] = append([]string(nil), v...)
		}
		o.send(f.status[o.prov], "", f.body[o.prov])
		return
	case faultReset:
		o.reset()
		return
	case faultHang:
		s.wait(r.Context(), -1)
		abort()
	}
	if !s.authorized(o, r) {
		return
	}
	s.dispatch(o, r, body, up)
}

// authorized checks the credential of r if WithAPIKey was given, and
// answers 401 if it is wrong.
func (s *Server) authorized(o *output, r *http.Request) bool {
	if len(s.cfg.keys) == 0 {
		return true
	}
	var got string
	if o.prov == providerAnthropic {
		got = r.Header.Get("X-Api-Key")
	} else {
		got = r.Header.Get("Authorization")
		if len(got) > 7 && strings.EqualFold(got[:7], "bearer ") {
			got = got[7:]
		} else {
			got = ""
		}
	}
	for _, k := range s.cfg.keys {
		if got != "" && got == k {
			return true
		}
	}
	switch {
	case o.prov == providerAnthropic:
		o.sendJSON(http.StatusUnauthorized, anthropicErrorBody("authentication_error", msgAnthropicBadKey))
	case got == "":
		o.sendJSON(http.StatusUnauthorized, openAIErrorBody("invalid_request_error", "", "", msgOpenAINoKey))
	default:
		o.sendJSON(http.StatusUnauthorized, openAIErrorBody("invalid_request_error", "invalid_api_key", "", msgOpenAIBadKey))
	}
	return false
}

// dispatch answers r normally according to its route.
func (s *Server) dispatch(o *output, r *http.Request, body []byte, up *upload) {
	path := r.URL.Path
	switch r.Method {
	case http.MethodGet:
		switch {
		case path == PathModels:
			o.sendJSON(http.StatusOK, s.models)
			return
		case strings.HasPrefix(path, PathModels+"/"):
			s.serveModel(o, strings.TrimPrefix(path, PathModels+"/"))
			return
		}
	case http.MethodPost:
		switch path {
		case PathChatCompletions:
			s.serveChat(o, r, body)
			return
		case PathEmbeddings:
			s.serveEmbeddings(o, body)
			return
		case PathMessages:
			s.serveMessages(o, r, body)
			return
		case PathResponses:
			s.serveResponses(o, body)
			return
		case PathCountTokens:
			s.serveCountTokens(o, r, body)
			return
		case PathTranscriptions:
			s.serveTranscription(o, up, "transcribe")
			return
		case PathTranslations:
			s.serveTranscription(o, up, "translate")
			return
		case PathSpeech:
			s.serveSpeech(o, body)
			return
		}
	}
	if o.prov == providerAnthropic {
		o.sendJSON(http.StatusNotFound, anthropicErrorBody("not_found_error", "Not Found"))
		return
	}
	o.sendJSON(http.StatusNotFound, invalidRequest("", "", "Invalid URL ("+r.Method+" "+path+")"))
}

// modelCreated is the "created" time of every listed model.
const modelCreated = 1686935002

func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = appendInt(b, modelCreated)
	return append(b, `,"owned_by":"openai"}`...)
}

func encodeModelList(ids []string) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, id)
	}
	return append(b, "]}"...)
}

// serveModel answers GET /v1/models/{id}.
func (s *Server) serveModel(o *output, id string) {
	for _, m := range s.cfg.models {
		if m == id {
			o.sendJSON(http.StatusOK, appendModel(nil, id))
			return
		}
	}
	o.sendJSON(http.StatusNotFound, invalidRequest("model_not_found", "model",
		"The model `"+id+"` does not exist or you do not have access to it."))
}

// newID returns a fresh identifier made of prefix and n characters, unique
// within the server.
func (s *Server) newID(prefix string, n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	v := s.ids.Add(1)
	b := make([]byte, len(prefix)+n)
	copy(b, prefix)
	// Scramble the counter so that ids do not all share a long prefix,
	// while staying unique (the multiplier is odd, hence invertible).
	x := v * 0x9e3779b97f4a7c15
	for i := len(b) - 1; i >= len(prefix); i-- {
		if i >= len(b)-11 {
			b[i] = alphabet[x%62]
			x /= 62
		} else {
			b[i] = alphabet[(v+uint64(i)*7)%62]
		}
	}
	return string(b)
}
