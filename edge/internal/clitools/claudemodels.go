package clitools

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/provider"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Models is the part of core's router the Claude route needs: the models a
// key's machine can route, and what it knows of one.
type Models interface {
	ListModels(ctx context.Context, in *corev1.ListModelsRequest, opts ...grpc.CallOption) (*corev1.ListModelsResponse, error)
	GetModelInfo(ctx context.Context, in *corev1.GetModelInfoRequest, opts ...grpc.CallOption) (*corev1.GetModelInfoResponse, error)
}

var _ Models = (corev1.RouterClient)(nil)

// smallHints mark a small, fast model in an id, best first.
var smallHints = []string{"haiku", "flash-lite", "flash", "mini", "nano", "lite", "small", "fast"}

// claudeModels are the defaults chosen for the model env keys: one of the
// ids the machine routes for each.
type claudeModels struct{ main, small, opus, sonnet, haiku string }

// chooseClaudeModels picks, among routable llm ids, an Anthropic-shaped one
// for the main model (a sonnet first) and a small, fast one for the small
// model, falling back to any llm id. Empty when there is no llm id.
func chooseClaudeModels(ids []string) claudeModels {
	if len(ids) == 0 {
		return claudeModels{}
	}
	find := func(pred func(string) bool) string {
		for _, id := range ids {
			if pred(strings.ToLower(id)) {
				return id
			}
		}
		return ""
	}
	has := func(subs ...string) func(string) bool {
		return func(id string) bool {
			for _, s := range subs {
				if !strings.Contains(id, s) {
					return false
				}
			}
			return true
		}
	}
	isSmall := func(id string) bool {
		for _, h := range smallHints {
			if strings.Contains(id, h) {
				return true
			}
		}
		return false
	}
	first := func(cands ...string) string {
		for _, c := range cands {
			if c != "" {
				return c
			}
		}
		return ""
	}
	var m claudeModels
	m.main = first(
		find(has("claude", "sonnet")),
		find(has("claude", "opus")),
		find(func(id string) bool { return strings.Contains(id, "claude") && !isSmall(id) }),
		find(has("claude")),
		find(func(id string) bool { return !isSmall(id) }),
		ids[0])
	var small string
	for _, h := range smallHints {
		if small = find(has("claude", h)); small != "" {
			break
		}
	}
	if small == "" {
		for _, h := range smallHints {
			if small = find(has(h)); small != "" {
				break
			}
		}
	}
	m.small = first(small, m.main)
	m.haiku = m.small
	m.sonnet = first(find(has("claude", "sonnet")), m.main)
	m.opus = first(find(has("claude", "opus")), m.main)
	return m
}

// minCompactWindow is the least auto-compact window Claude Code takes: a
// smaller one reads as this many tokens, with a warning on every run.
const minCompactWindow = 100_000

// compactWindow is the context window of the llm model id as the key's
// machine knows it, when Claude Code can compact before it; 0 otherwise.
func (h *ClaudeSettings) compactWindow(ctx context.Context, key, id string) int {
	if h.Models == nil || id == "" {
		return 0
	}
	md := metadata.Pairs("authorization", "Bearer "+key)
	res, err := h.Models.GetModelInfo(metadata.NewOutgoingContext(ctx, md), &corev1.GetModelInfoRequest{Id: id, Kind: provider.KindLLM})
	if err != nil || res.ContextWindow == nil || res.GetContextWindow() < minCompactWindow {
		return 0
	}
	return int(res.GetContextWindow())
}

// routableLLMs lists the llm ids the key's machine routes; nil when the
// listing fails (the route then writes no model it could not check).
func (h *ClaudeSettings) routableLLMs(ctx context.Context, key string) []string {
	if h.Models == nil {
		return nil
	}
	// The key Claude Code will use names the machine, so the listing is
	// exactly what Claude Code can route.
	md := metadata.Pairs("authorization", "Bearer "+key)
	res, err := h.Models.ListModels(metadata.NewOutgoingContext(ctx, md), &corev1.ListModelsRequest{Kind: provider.KindLLM})
	if err != nil {
		return nil
	}
	ids := make([]string, 0, len(res.GetData()))
	for _, m := range res.GetData() {
		if m.GetId() != "" && (m.GetKind() == "" || m.GetKind() == provider.KindLLM) {
			ids = append(ids, m.GetId())
		}
	}
	return ids
}
