package clitools

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// codexSaved are the top-level keys POST sets: their values from before
// are saved in the route's table, and DELETE puts them back.
var codexSaved = []string{"model", "model_provider"}

// The comment lines the route writes at the head of its table: a note for
// the reader, then what it saved (a key's raw value, or the key alone when
// it was not set) and the id of the API key it created for the table (none
// for a key the caller gave).
const (
	codexNote = "Switchboard's provider entry. DELETE /api/cli-tools/codex-settings removes it and puts back the model and model_provider saved here."
	markSaved = "switchboard-saved "
	markKeyID = "switchboard-key-id "
)

// CodexSettings serves GET, POST and DELETE on CodexSettingsPath: a
// provider entry on the gateway's /v1 with the Responses wire API, chosen
// as Codex's model provider. The user's other settings stay as they were,
// and the model and provider they chose come back on DELETE.
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

// codexMarks is what the route recorded in its table.
type codexMarks struct {
	keyID string
	// saved holds the raw value a codexSaved key had before the route
	// set it, "" when it had none; a key missing from saved was not
	// recorded (an entry an earlier release wrote).
	saved map[string]string
}

func readMarks(d tomlDoc) codexMarks {
	m := codexMarks{saved: map[string]string{}}
	for _, c := range d.tableComments(codexTable) {
		if id, ok := strings.CutPrefix(c, markKeyID); ok {
			m.keyID = strings.TrimSpace(id)
			continue
		}
		rest, ok := strings.CutPrefix(c, markSaved)
		if !ok {
			continue
		}
		k, raw, _ := strings.Cut(rest, "=")
		if k = strings.TrimSpace(k); slices.Contains(codexSaved, k) {
			m.saved[k] = strings.TrimSpace(raw)
		}
	}
	return m
}

// lines are the comment lines that record m.
func (m codexMarks) lines() []string {
	out := []string{codexNote}
	for _, k := range codexSaved {
		if raw := m.saved[k]; raw != "" {
			out = append(out, markSaved+k+" = "+raw)
		} else {
			out = append(out, markSaved+k)
		}
	}
	if m.keyID != "" {
		out = append(out, markKeyID+m.keyID)
	}
	return out
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
	old := readMarks(d)
	marks := codexMarks{saved: map[string]string{}}
	prov, _ := d.topValue("model_provider")
	ours := tomlUnquote(prov) == CodexProvider
	for _, k := range codexSaved {
		raw, ok := d.topValue(k)
		switch {
		case ours:
			// The values are the route's own: keep what it saved
			// before it set them (nothing, for an entry of an earlier
			// release).
			marks.saved[k] = old.saved[k]
		case ok && !strings.Contains(raw, "\n"):
			// A value spanning lines (never a model or provider name)
			// cannot be kept in a comment line: it is not put back.
			marks.saved[k] = raw
		}
	}
	curRaw, _ := d.tableValue(codexTable, "experimental_bearer_token")
	cur := tomlUnquote(curRaw)
	own, err := ownKey(ctx, h.Admin, cur, old.keyID)
	if err != nil {
		return CodexStatus{}, err
	}
	key, keyID := body.APIKey, ""
	switch {
	case key != "":
	case own != "":
		key = cur
	default:
		res, err := h.Admin.CreateAPIKey(ctx, &corev1.CreateAPIKeyRequest{Name: "codex"})
		if err != nil {
			return CodexStatus{}, problemError{openai.FromError(err)}
		}
		key, keyID = res.GetKey(), res.GetId()
	}
	written := false
	defer revokeUnwritten(ctx, h.Admin, keyID, &written)
	marks.keyID = keyID
	if own != "" && key == cur {
		marks.keyID = own
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
	d.setTable(codexTable, marks.lines(), [][2]string{
		{"name", `"Switchboard"`},
		{"base_url", base},
		{"wire_api", `"responses"`},
		{"experimental_bearer_token", keyRaw},
	})
	if err := writeFile(h.path(), d.bytes()); err != nil {
		return CodexStatus{}, err
	}
	written = true
	// The route's key the table held before is in no file now.
	if own != "" && key != cur {
		if err := revokeKey(ctx, h.Admin, own); err != nil {
			return CodexStatus{}, notRevoked(own, err)
		}
	}
	st, err := h.status()
	st.KeyCreated, st.KeyID = keyID != "", keyID
	return st, err
}

// unconfigure removes our provider entry and revokes the key the route
// created for it. While Codex's provider is still ours, the model and
// model_provider the route set go back to what they were before (the
// values saved in the entry; removed when there were none, or when an
// earlier release wrote the entry and saved nothing). A provider the user
// chose since, and everything else, stay.
func (h *CodexSettings) unconfigure(ctx context.Context) (CodexStatus, error) {
	d, exists, err := h.read()
	if err != nil || !exists {
		st, serr := h.status()
		return st, errors.Join(err, serr)
	}
	marks := readMarks(d)
	tokenRaw, _ := d.tableValue(codexTable, "experimental_bearer_token")
	own, err := ownKey(ctx, h.Admin, tomlUnquote(tokenRaw), marks.keyID)
	if err != nil {
		return CodexStatus{}, err
	}
	if own != "" {
		// Revoked first, so that an error leaves the file as it was.
		if err := revokeKey(ctx, h.Admin, own); err != nil {
			return CodexStatus{}, problemError{openai.FromError(err)}
		}
	}
	changed := false
	if v, ok := d.topValue("model_provider"); ok && tomlUnquote(v) == CodexProvider {
		for _, k := range codexSaved {
			if raw := marks.saved[k]; raw != "" {
				d.setTop(k, raw)
			} else {
				d.removeTop(k)
			}
		}
		changed = true
	}
	changed = d.removeTable(codexTable, true) || changed
	if changed {
		if err := writeFile(h.path(), d.bytes()); err != nil {
			return CodexStatus{}, err
		}
	}
	return h.status()
}
