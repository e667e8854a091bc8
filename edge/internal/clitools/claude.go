// Package clitools serves the desktop CLI settings routes: they point a
// coding tool installed on the machine the edge runs on at this gateway by
// editing the tool's own settings file. They touch that machine's file
// system, so they answer loopback callers only, and they need the admin
// token (they can create an API key).
package clitools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// ClaudeSettingsPath is the route of the Claude Code settings.
const ClaudeSettingsPath = "/api/cli-tools/claude-settings"

// The env keys of ~/.claude/settings.json the route manages.
const (
	EnvBaseURL   = "ANTHROPIC_BASE_URL"
	EnvAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvModel     = "ANTHROPIC_MODEL"
	EnvSmallFast = "ANTHROPIC_SMALL_FAST_MODEL"
	EnvOpus      = "ANTHROPIC_DEFAULT_OPUS_MODEL"
	EnvSonnet    = "ANTHROPIC_DEFAULT_SONNET_MODEL"
	EnvHaiku     = "ANTHROPIC_DEFAULT_HAIKU_MODEL"
	// EnvCompactWindow is the main model's context window, when the
	// gateway knows it (absent otherwise): Claude Code takes a model it
	// does not know for one of a million tokens, and compacts the
	// conversation before this many.
	EnvCompactWindow = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
	// EnvKeyID is the id of the API key the route created for
	// ANTHROPIC_AUTH_TOKEN (absent for a key the caller gave): the key the
	// route may reuse, and revokes when it replaces or removes the token.
	EnvKeyID = "SWITCHBOARD_KEY_ID"
)

// managedKeys are removed by DELETE, in this order.
var managedKeys = []string{EnvBaseURL, EnvAuthToken, EnvModel, EnvSmallFast, EnvOpus, EnvSonnet, EnvHaiku, EnvCompactWindow, EnvKeyID}

// maxBody caps a POST body.
const maxBody = 64 << 10

// Admin is the part of core's admin API the route needs: a cheap call that
// checks the admin token, and the API keys it creates, finds and revokes.
type Admin interface {
	GetSettings(ctx context.Context, in *corev1.GetSettingsRequest, opts ...grpc.CallOption) (*corev1.GetSettingsResponse, error)
	CreateAPIKey(ctx context.Context, in *corev1.CreateAPIKeyRequest, opts ...grpc.CallOption) (*corev1.CreateAPIKeyResponse, error)
	ListAPIKeys(ctx context.Context, in *corev1.ListAPIKeysRequest, opts ...grpc.CallOption) (*corev1.ListAPIKeysResponse, error)
	DeleteAPIKey(ctx context.Context, in *corev1.DeleteAPIKeyRequest, opts ...grpc.CallOption) (*corev1.DeleteAPIKeyResponse, error)
}

var _ Admin = (corev1.AdminClient)(nil)

// ClaudeSettings serves GET, POST and DELETE on ClaudeSettingsPath.
type ClaudeSettings struct {
	// Admin authenticates callers (core checks the admin token) and creates
	// API keys.
	Admin Admin
	// PublicURL is the gateway's public base URL, what ANTHROPIC_BASE_URL
	// is set to.
	PublicURL string
	// Home is the home directory holding .claude/settings.json.
	Home string
	// Models lists what the written key's machine can route; the model env
	// keys a POST leaves out are chosen from it (none are written when nil
	// or when the listing fails).
	Models Models
	// LookPath finds an executable (exec.LookPath when nil).
	LookPath func(string) (string, error)

	mu sync.Mutex // one read-modify-write of the file at a time
}

// Status is the answer of every method: what the settings say now. The auth
// token itself is never sent back.
type Status struct {
	// Installed is true when the claude CLI is on PATH (or in Claude
	// Code's local install directory).
	Installed bool   `json:"installed"`
	CLIPath   string `json:"cliPath,omitempty"`
	// SettingsPath is the settings file; SettingsExists whether it exists.
	SettingsPath   string `json:"settingsPath"`
	SettingsExists bool   `json:"settingsExists"`
	// Configured is true when ANTHROPIC_BASE_URL points at this gateway.
	Configured   bool   `json:"configured"`
	GatewayURL   string `json:"gatewayUrl"`
	BaseURL      string `json:"baseUrl,omitempty"`
	HasAuthToken bool   `json:"hasAuthToken"`
	// Models are the model env keys that are set, by key.
	Models map[string]string `json:"models"`
	// KeyCreated is true when POST created an API key for the CLI; KeyID
	// names it.
	KeyCreated bool   `json:"keyCreated,omitempty"`
	KeyID      string `json:"keyId,omitempty"`
}

// postBody is what POST takes: an API key to use (when absent, the key the
// route created for the file before while core still has it, else a new
// one) and the default model names.
type postBody struct {
	APIKey         string `json:"apiKey"`
	Model          string `json:"model"`
	SmallFastModel string `json:"smallFastModel"`
	OpusModel      string `json:"opusModel"`
	SonnetModel    string `json:"sonnetModel"`
	HaikuModel     string `json:"haikuModel"`
}

func (h *ClaudeSettings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveSettings(w, r, settingsRoute[Status]{admin: h.Admin, mu: &h.mu, status: h.status, configure: h.configure, unconfigure: h.unconfigure})
}

// settingsRoute is what a CLI settings route does for each method; the
// shared request handling is serveSettings.
type settingsRoute[S any] struct {
	admin       Admin
	mu          *sync.Mutex
	status      func() (S, error)
	configure   func(ctx context.Context, r *http.Request) (S, error)
	unconfigure func(ctx context.Context) (S, error)
}

// serveSettings answers a CLI settings route: loopback callers only, GET,
// POST or DELETE, the admin token checked by core, one read-modify-write of
// the file at a time, and the status (or the problem) as JSON.
func serveSettings[S any](w http.ResponseWriter, r *http.Request, rt settingsRoute[S]) {
	if !Loopback(r) {
		openai.NewProblem(http.StatusForbidden, "loopback_only",
			"this route only answers requests from the machine the gateway runs on", "").Write(w)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		openai.NewProblem(http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed on "+r.URL.Path, "").Write(w)
		return
	}
	ctx := adminContext(r)
	if _, err := rt.admin.GetSettings(ctx, &corev1.GetSettingsRequest{}); err != nil {
		openai.FromError(err).Write(w)
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var (
		st  S
		err error
	)
	switch r.Method {
	case http.MethodGet:
		st, err = rt.status()
	case http.MethodPost:
		st, err = rt.configure(ctx, r)
	case http.MethodDelete:
		st, err = rt.unconfigure(ctx)
	}
	if err != nil {
		var p problemError
		if errors.As(err, &p) {
			p.Problem.Write(w)
			return
		}
		openai.NewProblem(http.StatusInternalServerError, "settings_file_error", "the settings file could not be updated", "").Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// problemError carries a Problem to answer.
type problemError struct{ openai.Problem }

func (p problemError) Error() string { return p.Body.Error.Message }

// Loopback reports whether the request's TCP peer is a loopback address.
// Headers (X-Forwarded-For and the like) are not read: a proxy in front of
// the edge makes every caller look remote, which is the safe side.
func Loopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminContext passes the caller's credentials and machine to core.
func adminContext(r *http.Request) context.Context {
	md := metadata.MD{}
	if v := r.Header.Get("Authorization"); v != "" {
		md.Set("authorization", v)
	}
	if v := r.Header.Get("X-Switchboard-Machine"); v != "" {
		md.Set(contract.MDMachine, v)
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

func (h *ClaudeSettings) file() settingsFile {
	return settingsFile{path: filepath.Join(h.Home, ".claude", "settings.json")}
}

// status reads the settings file.
func (h *ClaudeSettings) status() (Status, error) {
	f := h.file()
	st := Status{SettingsPath: f.path, GatewayURL: h.gatewayURL(), Models: map[string]string{}}
	st.CLIPath, st.Installed = h.cli()
	o, exists, err := f.read()
	st.SettingsExists = exists
	if err != nil {
		return st, h.fileProblem(err)
	}
	e, err := env(o)
	if err != nil {
		return st, problemError{openai.NewProblem(http.StatusConflict, "invalid_settings_file", err.Error(), "")}
	}
	st.BaseURL = envString(e, EnvBaseURL)
	st.Configured = st.BaseURL != "" && sameURL(st.BaseURL, st.GatewayURL)
	st.HasAuthToken = envString(e, EnvAuthToken) != ""
	for _, k := range []string{EnvModel, EnvSmallFast, EnvOpus, EnvSonnet, EnvHaiku} {
		if v := envString(e, k); v != "" {
			st.Models[k] = v
		}
	}
	return st, nil
}

// readPost reads a settings route's optional JSON body into v: an empty
// body leaves v as it is; one over maxBody is 413.
func readPost(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return problemError{openai.NewProblem(http.StatusBadRequest, "invalid_body", "the request body could not be read", "")}
	}
	if len(data) > maxBody {
		return problemError{openai.NewProblem(http.StatusRequestEntityTooLarge, "request_too_large", "request body is too large", "")}
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, v); err != nil {
			return problemError{openai.NewProblem(http.StatusBadRequest, "invalid_json", "request body is not a valid JSON object", "")}
		}
	}
	return nil
}

// configure merges the gateway's env keys into the settings file.
func (h *ClaudeSettings) configure(ctx context.Context, r *http.Request) (Status, error) {
	var body postBody
	if err := readPost(r, &body); err != nil {
		return Status{}, err
	}
	f := h.file()
	o, _, err := f.read()
	if err != nil {
		return Status{}, h.fileProblem(err)
	}
	e, err := env(o)
	if err != nil {
		return Status{}, problemError{openai.NewProblem(http.StatusConflict, "invalid_settings_file", err.Error(), "")}
	}
	cur := envString(e, EnvAuthToken)
	own, err := ownKey(ctx, h.Admin, cur, envString(e, EnvKeyID))
	if err != nil {
		return Status{}, err
	}
	key, keyID := body.APIKey, ""
	switch {
	case key != "":
	case own != "":
		key = cur
	default:
		res, err := h.Admin.CreateAPIKey(ctx, &corev1.CreateAPIKeyRequest{Name: "claude-code"})
		if err != nil {
			return Status{}, problemError{openai.FromError(err)}
		}
		key, keyID = res.GetKey(), res.GetId()
	}
	written := false
	defer revokeUnwritten(ctx, h.Admin, keyID, &written)
	// The file records the route's own key only.
	recorded := keyID
	if own != "" && key == cur {
		recorded = own
	}
	sets := []struct{ key, value string }{
		{EnvBaseURL, h.gatewayURL()},
		{EnvAuthToken, key},
		{EnvModel, body.Model},
		{EnvSmallFast, body.SmallFastModel},
		{EnvOpus, body.OpusModel},
		{EnvSonnet, body.SonnetModel},
		{EnvHaiku, body.HaikuModel},
	}
	// Model keys not posted get models the machine routes, so Claude Code
	// works out of the box on a gateway whose ids are prefix/model (its
	// own defaults, claude-sonnet-…, resolve nowhere). A value already in
	// the file is kept while it is still routable.
	if body.Model == "" || body.SmallFastModel == "" || body.OpusModel == "" || body.SonnetModel == "" || body.HaikuModel == "" {
		if ids := h.routableLLMs(ctx, key); len(ids) > 0 {
			routable := make(map[string]bool, len(ids))
			for _, id := range ids {
				routable[id] = true
			}
			c := chooseClaudeModels(ids)
			chosen := map[string]string{EnvModel: c.main, EnvSmallFast: c.small, EnvOpus: c.opus, EnvSonnet: c.sonnet, EnvHaiku: c.haiku}
			for i := range sets {
				def, ok := chosen[sets[i].key]
				if !ok || sets[i].value != "" {
					continue
				}
				if cur := envString(e, sets[i].key); cur != "" && routable[cur] {
					continue
				}
				sets[i].value = def
			}
		}
	}
	for _, s := range sets {
		if s.value == "" {
			continue
		}
		v, err := marshalString(s.value)
		if err != nil {
			return Status{}, err
		}
		e = e.set(s.key, v)
	}
	if n := h.compactWindow(ctx, key, envString(e, EnvModel)); n > 0 {
		v, err := marshalString(strconv.Itoa(n))
		if err != nil {
			return Status{}, err
		}
		e = e.set(EnvCompactWindow, v)
	} else {
		// A window written for another model would be wrong for this one.
		e, _ = e.remove(EnvCompactWindow)
	}
	if recorded != "" {
		v, err := marshalString(recorded)
		if err != nil {
			return Status{}, err
		}
		e = e.set(EnvKeyID, v)
	} else {
		e, _ = e.remove(EnvKeyID)
	}
	ev, err := e.marshal()
	if err != nil {
		return Status{}, err
	}
	o = o.set("env", ev)
	if err := f.write(o); err != nil {
		return Status{}, h.fileProblem(err)
	}
	written = true
	// The route's key the file held before is in no file now.
	if own != "" && key != cur {
		if err := revokeKey(ctx, h.Admin, own); err != nil {
			return Status{}, notRevoked(own, err)
		}
	}
	st, err := h.status()
	st.KeyCreated, st.KeyID = keyID != "", keyID
	return st, err
}

// unconfigure removes the gateway's env keys; an env left empty goes too.
// The key the route created for the file is revoked first, so that an
// error leaves the file as it was.
func (h *ClaudeSettings) unconfigure(ctx context.Context) (Status, error) {
	f := h.file()
	o, exists, err := f.read()
	if err != nil {
		return Status{}, h.fileProblem(err)
	}
	if !exists {
		return h.status()
	}
	e, err := env(o)
	if err != nil {
		return Status{}, problemError{openai.NewProblem(http.StatusConflict, "invalid_settings_file", err.Error(), "")}
	}
	own, err := ownKey(ctx, h.Admin, envString(e, EnvAuthToken), envString(e, EnvKeyID))
	if err != nil {
		return Status{}, err
	}
	if own != "" {
		if err := revokeKey(ctx, h.Admin, own); err != nil {
			return Status{}, problemError{openai.FromError(err)}
		}
	}
	changed := false
	for _, k := range managedKeys {
		var removed bool
		if e, removed = e.remove(k); removed {
			changed = true
		}
	}
	if !changed {
		return h.status()
	}
	if len(e) == 0 {
		o, _ = o.remove("env")
	} else {
		ev, err := e.marshal()
		if err != nil {
			return Status{}, err
		}
		o = o.set("env", ev)
	}
	if err := f.write(o); err != nil {
		return Status{}, h.fileProblem(err)
	}
	return h.status()
}

// fileProblem answers a settings file that cannot be read, parsed or
// written, without its content.
func (h *ClaudeSettings) fileProblem(err error) error {
	if errors.Is(err, errNotObject) {
		return problemError{openai.NewProblem(http.StatusConflict, "invalid_settings_file",
			"the settings file is not a JSON object; fix or remove it first", "")}
	}
	return err
}

// cli finds the claude executable.
func (h *ClaudeSettings) cli() (string, bool) {
	look := h.LookPath
	if look == nil {
		look = exec.LookPath
	}
	if p, err := look("claude"); err == nil {
		return p, true
	}
	// Claude Code's own "local" installation is not always on PATH.
	local := filepath.Join(h.Home, ".claude", "local", "claude")
	if fi, err := os.Stat(local); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return local, true
	}
	return "", false
}

func (h *ClaudeSettings) gatewayURL() string {
	return strings.TrimRight(h.PublicURL, "/")
}

// sameURL compares base URLs, ignoring a trailing slash.
func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
