package clitools

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// fakeModels lists models for the created key only, as core lists the
// models of the key's machine.
type fakeModels struct {
	entries []*corev1.ModelEntry
	windows map[string]int32 // context windows by id
}

func (f *fakeModels) ListModels(ctx context.Context, in *corev1.ListModelsRequest, _ ...grpc.CallOption) (*corev1.ListModelsResponse, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+createdKey {
		return nil, status.Error(codes.Unauthenticated, "invalid API key")
	}
	out := &corev1.ListModelsResponse{Object: "list"}
	for _, e := range f.entries {
		if in.GetKind() == "" || e.GetKind() == in.GetKind() {
			out.Data = append(out.Data, e)
		}
	}
	return out, nil
}

func (f *fakeModels) GetModelInfo(ctx context.Context, in *corev1.GetModelInfoRequest, _ ...grpc.CallOption) (*corev1.GetModelInfoResponse, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+createdKey {
		return nil, status.Error(codes.Unauthenticated, "invalid API key")
	}
	for _, e := range f.entries {
		if e.GetId() == in.GetId() && (in.GetKind() == "" || e.GetKind() == in.GetKind()) {
			out := &corev1.GetModelInfoResponse{Id: e.GetId(), Kind: e.GetKind()}
			if w, ok := f.windows[e.GetId()]; ok {
				out.ContextWindow = &w
			}
			return out, nil
		}
	}
	return nil, status.Error(codes.NotFound, "model not found")
}

func llm(ids ...string) []*corev1.ModelEntry {
	out := make([]*corev1.ModelEntry, len(ids))
	for i, id := range ids {
		out[i] = &corev1.ModelEntry{Id: id, Object: "model", Kind: "llm"}
	}
	return out
}

func TestChooseClaudeModels(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ids         []string
		main, small string
		opus        string
	}{
		{"anthropic family", []string{"p/gpt-4o", "cc/claude-haiku-4-5", "cc/claude-opus-4-1", "cc/claude-sonnet-4-5"},
			"cc/claude-sonnet-4-5", "cc/claude-haiku-4-5", "cc/claude-opus-4-1"},
		{"no claude: a big and a small one", []string{"pfx/gpt-4o-mini", "pfx/gpt-4.1"}, "pfx/gpt-4.1", "pfx/gpt-4o-mini", "pfx/gpt-4.1"},
		{"claude beats a bigger other", []string{"o/gpt-5", "a/claude-3-5-haiku", "a/claude-opus-4"}, "a/claude-opus-4", "a/claude-3-5-haiku", "a/claude-opus-4"},
		{"one model for everything", []string{"pfx/gpt-4o-mini"}, "pfx/gpt-4o-mini", "pfx/gpt-4o-mini", "pfx/gpt-4o-mini"},
		{"flash is small", []string{"g/gemini-2.5-pro", "g/gemini-2.5-flash"}, "g/gemini-2.5-pro", "g/gemini-2.5-flash", "g/gemini-2.5-pro"},
		{"nothing", nil, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := chooseClaudeModels(tc.ids)
			assert.Equal(t, tc.main, m.main, "main")
			assert.Equal(t, tc.small, m.small, "small")
			assert.Equal(t, tc.small, m.haiku, "haiku")
			assert.Equal(t, tc.opus, m.opus, "opus")
		})
	}
}

func TestClaudeSettingsChoosesRoutableModels(t *testing.T) {
	h, _, path := newHandler(t)
	h.Models = &fakeModels{entries: append(llm("pfx/gpt-4.1", "pfx/gpt-4o-mini"),
		&corev1.ModelEntry{Id: "pfx/text-embedding-3-small", Kind: "embedding"})}
	w, out := serve(t, h, http.MethodPost, "127.0.0.1:40000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	e := readEnv(t, path)
	assert.Equal(t, "pfx/gpt-4.1", e[EnvModel])
	assert.Equal(t, "pfx/gpt-4o-mini", e[EnvSmallFast])
	assert.Equal(t, "pfx/gpt-4o-mini", e[EnvHaiku])
	assert.Equal(t, "pfx/gpt-4.1", e[EnvSonnet])
	assert.Equal(t, "pfx/gpt-4.1", e[EnvOpus])
	assert.Equal(t, "pfx/gpt-4.1", out["models"].(map[string]any)[EnvModel])

	// Posted models win; a routable model already in the file stays, an
	// unroutable one is replaced.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var o map[string]any
	require.NoError(t, json.Unmarshal(raw, &o))
	o["env"].(map[string]any)[EnvSonnet] = "pfx/gpt-4o-mini"
	o["env"].(map[string]any)[EnvOpus] = "claude-opus-4-1"
	raw, err = json.Marshal(o)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:40000", `{"model":"mine/own"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	e = readEnv(t, path)
	assert.Equal(t, "mine/own", e[EnvModel])
	assert.Equal(t, "pfx/gpt-4o-mini", e[EnvSonnet], "routable value kept")
	assert.Equal(t, "pfx/gpt-4.1", e[EnvOpus], "unroutable value replaced")
}

func TestClaudeSettingsWritesNoModelWhenListingFails(t *testing.T) {
	h, _, path := newHandler(t)
	h.Models = &fakeModels{entries: llm("pfx/gpt-4.1")}
	// A posted key the fake does not know: the listing fails, the route
	// still configures the base URL and key, and writes no guessed model.
	w, _ := serve(t, h, http.MethodPost, "127.0.0.1:40000", `{"apiKey":"sk-other"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	e := readEnv(t, path)
	assert.Equal(t, "sk-other", e[EnvAuthToken])
	for _, k := range []string{EnvModel, EnvSmallFast, EnvOpus, EnvSonnet, EnvHaiku} {
		assert.NotContains(t, e, k)
	}
}

func readEnv(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var o struct {
		Env map[string]any `json:"env"`
	}
	require.NoError(t, json.Unmarshal(raw, &o))
	return o.Env
}

// Claude Code takes a model it does not know (any gateway id such as
// pfx/gpt-4.1) for one with a window of a million tokens and would not
// compact before the upstream refuses the request: the route writes the
// main model's window as CLAUDE_CODE_AUTO_COMPACT_WINDOW when the gateway
// knows it and Claude Code can use it (100k tokens at least), none for
// another model, and DELETE removes it with the other keys.
func TestClaudeSettingsWritesTheModelsContextWindow(t *testing.T) {
	h, _, path := newHandler(t)
	h.Models = &fakeModels{entries: llm("pfx/gpt-4.1", "pfx/gpt-4o-mini", "pfx/small-window", "pfx/unknown-window"),
		windows: map[string]int32{"pfx/gpt-4.1": 1047576, "pfx/gpt-4o-mini": 128000, "pfx/small-window": 32768}}
	for _, tc := range []struct{ body, want string }{
		{``, "1047576"},
		{`{"model":"pfx/gpt-4o-mini"}`, "128000"},
		{`{"model":"pfx/small-window"}`, ""},
		{`{"model":"pfx/gpt-4o-mini"}`, "128000"},
		{`{"model":"pfx/unknown-window"}`, ""},
	} {
		w, _ := serve(t, h, http.MethodPost, "127.0.0.1:40000", tc.body, true)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		e := readEnv(t, path)
		if tc.want == "" {
			assert.NotContains(t, e, EnvCompactWindow, "%s", tc.body)
			continue
		}
		assert.Equal(t, tc.want, e[EnvCompactWindow], "%s", tc.body)
	}

	w, _ := serve(t, h, http.MethodPost, "127.0.0.1:40000", `{"model":"pfx/gpt-4o-mini"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:40000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	_, err := os.Stat(path)
	if err == nil {
		assert.NotContains(t, readEnv(t, path), EnvCompactWindow)
	}
}
