package clitools

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// CodexSettingsPath is the route of the Codex CLI settings.
const CodexSettingsPath = "/api/cli-tools/codex-settings"

// CodexProvider is the model provider entry the route writes to
// ~/.codex/config.toml.
const CodexProvider = "switchboard"

const codexTable = "model_providers." + CodexProvider

// CodexSettings serves GET, POST and DELETE on CodexSettingsPath: a
// provider entry on the gateway's /v1 with the Responses wire API, chosen
// as Codex's model provider. The user's other settings stay as they were.
type CodexSettings struct {
	// Admin authenticates callers and creates API keys.
	Admin Admin
	// PublicURL is the gateway's public base URL.
	PublicURL string
	// Home is the home directory holding .codex/config.toml.
	Home string
	// LookPath finds an executable (exec.LookPath when nil).
	LookPath func(string) (string, error)

	mu sync.Mutex
}

// CodexStatus is what the config says now; the key is never sent back.
type CodexStatus struct {
	Installed    bool   `json:"installed"`
	CLIPath      string `json:"cliPath,omitempty"`
	ConfigPath   string `json:"configPath"`
	ConfigExists bool   `json:"configExists"`
	// Configured is true when Codex's provider is our entry and the entry
	// points at this gateway.
	Configured bool   `json:"configured"`
	GatewayURL string `json:"gatewayUrl"`
	Model      string `json:"model,omitempty"`
	HasKey     bool   `json:"hasKey"`
	KeyCreated bool   `json:"keyCreated,omitempty"`
	KeyID      string `json:"keyId,omitempty"`
}

type codexPost struct {
	APIKey string `json:"apiKey"`
	Model  string `json:"model"`
}

func (h *CodexSettings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveSettings(w, r, settingsRoute[CodexStatus]{admin: h.Admin, mu: &h.mu, status: h.status, configure: h.configure, unconfigure: h.unconfigure})
}

func (h *CodexSettings) path() string { return filepath.Join(h.Home, ".codex", "config.toml") }

func (h *CodexSettings) apiBase() string { return strings.TrimRight(h.PublicURL, "/") + "/v1" }

func (h *CodexSettings) read() (tomlDoc, bool, error) {
	data, err := os.ReadFile(h.path())
	if errors.Is(err, fs.ErrNotExist) {
		return tomlDoc{}, false, nil
	}
	if err != nil {
		return tomlDoc{}, false, err
	}
	d := parseTOML(data)
	if err := d.check(); err != nil {
		return tomlDoc{}, true, problemError{openai.NewProblem(http.StatusConflict, "invalid_settings_file",
			"the Codex config.toml is not valid TOML (a string or a value is left open); fix or remove it first", "")}
	}
	return d, true, nil
}

func (h *CodexSettings) status() (CodexStatus, error) {
	st := CodexStatus{ConfigPath: h.path(), GatewayURL: h.apiBase()}
	look := h.LookPath
	if look == nil {
		look = exec.LookPath
	}
	if p, err := look("codex"); err == nil {
		st.CLIPath, st.Installed = p, true
	}
	d, exists, err := h.read()
	st.ConfigExists = exists
	if err != nil {
		return st, err
	}
	prov, _ := d.topValue("model_provider")
	base, _ := d.tableValue(codexTable, "base_url")
	st.Configured = tomlUnquote(prov) == CodexProvider && sameURL(tomlUnquote(base), st.GatewayURL)
	if m, ok := d.topValue("model"); ok {
		st.Model = tomlUnquote(m)
	}
	_, st.HasKey = d.tableValue(codexTable, "experimental_bearer_token")
	return st, nil
}

func (h *CodexSettings) configure(ctx context.Context, r *http.Request) (CodexStatus, error) {
	var body codexPost
	if err := readPost(r, &body); err != nil {
		return CodexStatus{}, err
	}
	model, err := tomlString(body.Model)
	if err != nil || body.Model == "" {
		return CodexStatus{}, problemError{openai.NewProblem(http.StatusBadRequest, "invalid_value", "model is required: the model Codex asks the gateway for", "model")}
	}
	d, _, err := h.read()
	if err != nil {
		return CodexStatus{}, err
	}
	key, keyID := body.APIKey, ""
	if key == "" {
		res, err := h.Admin.CreateAPIKey(ctx, &corev1.CreateAPIKeyRequest{Name: "codex"})
		if err != nil {
			return CodexStatus{}, problemError{openai.FromError(err)}
		}
		key, keyID = res.GetKey(), res.GetId()
	}
	keyRaw, err := tomlString(key)
	if err != nil {
		return CodexStatus{}, problemError{openai.NewProblem(http.StatusBadRequest, "invalid_value", "apiKey holds control characters", "apiKey")}
	}
	base, err := tomlString(h.apiBase())
	if err != nil {
		return CodexStatus{}, err
	}
	d.setTop("model_provider", `"`+CodexProvider+`"`)
	d.setTop("model", model)
	d.setTable(codexTable, [][2]string{
		{"name", `"Switchboard"`},
		{"base_url", base},
		{"wire_api", `"responses"`},
		{"experimental_bearer_token", keyRaw},
	})
	if err := writeFile(h.path(), d.bytes()); err != nil {
		return CodexStatus{}, err
	}
	st, err := h.status()
	st.KeyCreated, st.KeyID = keyID != "", keyID
	return st, err
}

// unconfigure removes our provider entry, and the provider choice when it
// names it; the model and everything else stay.
func (h *CodexSettings) unconfigure() (CodexStatus, error) {
	d, exists, err := h.read()
	if err != nil || !exists {
		st, serr := h.status()
		return st, errors.Join(err, serr)
	}
	changed := d.removeTable(codexTable, true)
	if v, ok := d.topValue("model_provider"); ok && tomlUnquote(v) == CodexProvider {
		changed = d.removeTop("model_provider") || changed
	}
	if changed {
		if err := writeFile(h.path(), d.bytes()); err != nil {
			return CodexStatus{}, err
		}
	}
	return h.status()
}
