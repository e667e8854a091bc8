package edge

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/edge/internal/graphql"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/bearer"
)

// keyHeaders are the request headers that carry an API key (decisions.md:
// Authorization: Bearer, else x-api-key, else x-goog-api-key).
var keyHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// apiKey returns the API key a request presents, as core reads it: a
// Bearer credential, else x-api-key, else x-goog-api-key; "" when none.
func apiKey(h http.Header) string {
	if k := bearer.Token(h.Get("Authorization")); k != "" {
		return k
	}
	for _, name := range keyHeaders[1:] {
		if k := strings.TrimSpace(h.Get(name)); k != "" {
			return k
		}
	}
	return ""
}

// unreadableKey reports whether a request presents a credential no key
// can be read from: an Authorization header that is not a Bearer
// credential (a key sent without the scheme, Basic, ...) and no key in the
// headers read after it (key, as apiKey read it, is ""). Served keyless,
// its sender would believe their key was used ("a key that is sent is
// always checked").
func unreadableKey(key string, h http.Header) bool {
	return key == "" && bearer.NotBearer(h.Get("Authorization"))
}

// maxKeyLen bounds an API key's length: far above any key format's, far
// below a header limit.
const maxKeyLen = 256

// wellFormedKey reports whether a key could be one: printable ASCII with no
// spaces, of a sane length. Core checks the key itself.
func wellFormedKey(k string) bool {
	if len(k) < 8 || len(k) > maxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// cors lets browsers in on purpose only (decisions.md, browser callers). On
// the gateway routes a request that carries a well-formed API key is served
// from any origin (core checks the key), as OpenAI's API is; a request
// without one that comes from a page (it has an Origin) is refused unless
// that origin is in origins: keyless with origin_not_allowed, with a key
// header that holds no well-formed key with invalid_api_key (core might
// not see such a key at all: grpc-gateway drops a value that is not ASCII,
// which would run the request keyless). Command-line clients and SDKs send
// no Origin and are not affected. Preflights are granted to the allowed
// origins, and to any origin when the request to come will carry a key
// header.
//
// There is no same-origin exemption: a page reached through DNS rebinding
// has the gateway's own host in its Origin. A browser's same-origin GET
// carries no Origin at all, though: a keyless request a browser marks as a
// page's (Sec-Fetch-Site other than none) is served only when its Host is
// one the gateway answers to on purpose (an IP address, localhost, the
// public URL's host, an allowed origin's host), never the name of a page
// that rebound itself to the gateway's address (hosts lists the names).
func cors(origins, hosts []string, next http.Handler) http.Handler {
	allowed := func(o string) bool { return slices.Contains(origins, strings.ToLower(o)) }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isGatewayPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		// The answer depends on Origin: a cache must not hand an answer
		// made for no Origin to a page.
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		key := apiKey(r.Header)
		keyed := wellFormedKey(key)
		if origin == "" && fromPage(r) && !keyed && !knownHost(r.Host, hosts) {
			refuseHost(w, r)
			return
		}
		if origin == "" {
			// Not a page's cross-origin request: nothing to protect.
			h.Set("Access-Control-Allow-Origin", "*")
			next.ServeHTTP(w, r)
			return
		}
		// A keyed request may be read by any page ("*": never with
		// cookies); a keyless one only by an allowed origin's.
		grant := "*"
		if allowed(origin) {
			grant = origin
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Headers")
			reqHeaders := r.Header.Get("Access-Control-Request-Headers")
			if !allowed(origin) && !asksKeyHeader(reqHeaders) {
				refuseOrigin(w, r)
				return
			}
			h.Set("Access-Control-Allow-Origin", grant)
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			if reqHeaders == "" {
				reqHeaders = "Authorization, Content-Type, X-Api-Key, X-Goog-Api-Key, OpenAI-Organization, OpenAI-Project"
			}
			h.Set("Access-Control-Allow-Headers", reqHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !keyed && !allowed(origin) {
			switch {
			case key != "":
				refuseKey(w, r)
			case unreadableKey(key, r.Header):
				refuseScheme(w, r)
			default:
				refuseOrigin(w, r)
			}
			return
		}
		h.Set("Access-Control-Allow-Origin", grant)
		h.Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id, "+OverheadHeader)
		next.ServeHTTP(w, r)
	})
}

// asksKeyHeader reports whether a preflight's Access-Control-Request-Headers
// names a header that carries an API key.
func asksKeyHeader(list string) bool {
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		for _, k := range keyHeaders {
			if strings.EqualFold(name, k) {
				return true
			}
		}
	}
	return false
}

// fromPage reports whether a browser marks the request as made by a page
// (Sec-Fetch-Site: same-origin, same-site or cross-site; none is the user's
// own navigation).
func fromPage(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "none"
}

// knownHost reports whether a request's Host names the gateway on purpose:
// an IP address, localhost (or a name under it), or one of hosts.
func knownHost(hostport string, hosts []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return slices.Contains(hosts, host)
}

// hostsOf are the host names of a public URL and of allowed origins, for
// knownHost.
func hostsOf(publicURL string, origins []string) []string {
	var hosts []string
	for _, raw := range append([]string{publicURL}, origins...) {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			hosts = append(hosts, strings.ToLower(u.Hostname()))
		}
	}
	return hosts
}

func refuseHost(w http.ResponseWriter, r *http.Request) {
	openai.NewProblem(http.StatusUnauthorized, "host_not_allowed",
		"requests from web pages to this host name need an API key (Authorization: Bearer <key>); the gateway answers keyless pages only at localhost, an IP address, its public URL's host or an allowed origin's", "").WriteFor(w, r)
}

func refuseOrigin(w http.ResponseWriter, r *http.Request) {
	openai.NewProblem(http.StatusUnauthorized, "origin_not_allowed",
		"requests from web pages need an API key (Authorization: Bearer <key>) unless their origin is in SWITCHBOARD_CORS_ORIGINS", "").WriteFor(w, r)
}

func refuseKey(w http.ResponseWriter, r *http.Request) {
	openai.InvalidAPIKey().WriteFor(w, r)
}

// refuseScheme answers a request whose Authorization header holds no
// Bearer credential (unreadableKey), without its value.
func refuseScheme(w http.ResponseWriter, r *http.Request) {
	openai.NewProblem(http.StatusUnauthorized, "invalid_api_key",
		"the Authorization header holds no Bearer token: send the API key as Authorization: Bearer <key> (or in x-api-key)", "").WriteFor(w, r)
}

// checkKey refuses a gateway request before its body is read when it
// presents a key that is not well-formed, always: no such key is valid, and
// one that is not ASCII would not reach core at all on the routes
// grpc-gateway serves (it drops the value), so the request would run
// keyless ("a key that is sent is always checked"). So is one whose
// Authorization header holds no Bearer credential, where no other key
// header holds a key: core reads no key from it either. Without a key it
// refuses when every machine needs keys (REQUIRE_API_KEY), and on the
// legacy /{machineId}/v1/... paths, which always need one. Core checks the
// key itself; this only makes refusing cheap and sure.
func checkKey(all bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions || !isGatewayPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		k := apiKey(r.Header)
		switch {
		case k != "" && !wellFormedKey(k):
			refuseKey(w, r)
		case unreadableKey(k, r.Header):
			refuseScheme(w, r)
		case k == "" && (all || legacyPath(r.URL.Path)):
			// Both headers named: Anthropic's clients send x-api-key.
			openai.NewProblem(http.StatusUnauthorized, "missing_api_key", "an API key is required (Authorization: Bearer <key>, or x-api-key: <key>)", "").WriteFor(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// legacyPath reports whether p is a /{machineId}/v1/... path.
func legacyPath(p string) bool {
	return isGatewayPath(p) && !strings.HasPrefix(p, "/v1/") && p != "/v1"
}

// checkEncoding refuses, with 415 in the route's own error shape, a
// request whose body has a content coding (Content-Encoding other than
// identity): no route decodes one, and its compressed bytes read as plain
// would be refused as malformed JSON or text that is not UTF-8, sending
// the client looking at the wrong thing. Accept-Encoding: identity says
// what would have been accepted (RFC 9110, 415). A request without a body
// is not refused whatever it declares.
func checkEncoding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || identityOnly(r.Header.Values("Content-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Accept-Encoding", "identity")
		const msg = "compressed request bodies are not supported: send the body without Content-Encoding (or with Content-Encoding: identity)"
		refuse(w, r, http.StatusUnsupportedMediaType, msg, graphql.CodeUnsupportedMedia, "unsupported_content_encoding", "Content-Encoding")
	})
}

// refuse answers a request the edge refuses before its route runs, in the
// route's own error shape: GraphQL's (with gqlCode), the Stripe webhook's,
// else the gateway's (with code and param) in OpenAI's or Anthropic's
// shape.
func refuse(w http.ResponseWriter, r *http.Request, status int, msg, gqlCode, code, param string) {
	switch r.URL.Path {
	case "/graphql":
		graphql.TransportError(w, status, gqlCode, msg)
	case webhookPath:
		webhookAnswer(w, status, msg)
	default:
		openai.NewProblem(status, code, msg, param).WriteFor(w, r)
	}
}

// identityOnly reports whether Content-Encoding values name no coding but
// identity (none at all included).
func identityOnly(values []string) bool {
	for _, v := range values {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// guardBody puts every request body under the body guard: its bytes count
// against the memory bound while the handler runs (except on streaming
// routes, which hold none), and it must arrive at the minimum rate.
func guardBody(g *openai.BodyGuard, streaming func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, body := g.Guard(w, r, !streaming(r))
		defer body.Release()
		next.ServeHTTP(w, r)
	})
}

// maxHeaderBytes is the most header bytes a request may carry; a larger
// one is answered 431 in the OpenAI shape. The server reads up to
// serverMaxHeaderBytes before answering it in Go's own plain text.
const (
	maxHeaderBytes       = 64 << 10
	serverMaxHeaderBytes = 1 << 20
)

// limitHeaders answers 431, in the route's own error shape, to a request whose headers
// (names, values, the request line) exceed maxHeaderBytes.
func limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(r.Method) + len(r.RequestURI) + len(r.Host)
		for k, vs := range r.Header {
			for _, v := range vs {
				n += len(k) + len(v) + 4
			}
		}
		if n > maxHeaderBytes {
			w.Header().Set("Connection", "close")
			msg := "the request headers are larger than " + strconv.Itoa(maxHeaderBytes) + " bytes"
			refuse(w, r, http.StatusRequestHeaderFieldsTooLarge, msg, graphql.CodeRequestTooLarge, "headers_too_large", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
