package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := &Scheduler{lookup: provider.NewRegistry().Lookup}
	conn := func(providerID string, expiresIn time.Duration, edit ...func(*busv1.Connection)) *busv1.Connection {
		c := &busv1.Connection{
			Provider: providerID, IsActive: true,
			CreatedAt: timestamppb.New(now.Add(-time.Hour)), UpdatedAt: timestamppb.New(now.Add(-time.Hour)),
			Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", ExpiresAt: timestamppb.New(now.Add(expiresIn))},
		}
		for _, e := range edit {
			e(c)
		}
		return c
	}
	tests := []struct {
		name   string
		c      *busv1.Connection
		due    bool
		reason string
	}{
		{"compatible family inside 5 min", conn("openai-compatible-x", 4*time.Minute), true, "expiring"},
		{"compatible family outside 5 min", conn("openai-compatible-x", 6*time.Minute), false, ""},
		{"already expired", conn("openai", -time.Minute), true, "expiring"},
		{"builtin provider default lead", conn("openai", 6*time.Minute), false, ""},
		{"api key connection", conn("openai", time.Minute, func(c *busv1.Connection) { c.Oauth = nil }), false, ""},
		{"inactive", conn("openai", time.Minute, func(c *busv1.Connection) { c.IsActive = false }), false, ""},
		{"needs relogin", conn("openai", time.Minute, func(c *busv1.Connection) { c.Oauth.NeedsRelogin = true }), false, ""},
		{"no token URL", conn("openai", time.Minute, func(c *busv1.Connection) { c.Oauth.TokenUrl = "" }), false, ""},
		{"no expiry known", conn("openai", 0, func(c *busv1.Connection) { c.Oauth.ExpiresAt = nil }), false, ""},
		{"unknown provider", conn("nope", time.Minute), false, ""},
		{"recent failure backs off", conn("openai", time.Minute, func(c *busv1.Connection) {
			c.Oauth.LastError = "token endpoint answered 400"
			c.UpdatedAt = timestamppb.New(now.Add(-time.Minute))
		}), false, ""},
		{"old failure is retried", conn("openai", time.Minute, func(c *busv1.Connection) {
			c.Oauth.LastError = "token endpoint answered 400"
			c.UpdatedAt = timestamppb.New(now.Add(-FailureBackoff - time.Minute))
		}), true, "expiring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, reason := s.Due(tt.c, now)
			assert.Equal(t, tt.due, due)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

// The lead times of reference/gateway.md, and Codex's forced refresh.
func TestDueProviderLeadTimes(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := &Scheduler{lookup: provider.NewRegistry().Lookup}
	leads := map[string]time.Duration{
		"claude": 4 * time.Hour, "codex": 5 * 24 * time.Hour, "qwen": 20 * time.Minute,
		"gemini-cli": 5 * time.Minute, "antigravity": 5 * time.Minute, "iflow": 24 * time.Hour,
		"github-copilot": 5 * time.Minute, "anthropic-compatible-x": 5 * time.Minute,
	}
	for id, lead := range leads {
		spec, ok := s.lookup(id)
		if !ok {
			// Not registered (yet): the policy is the registry's all the
			// same.
			spec = provider.Spec{ID: id}
		}
		got, _ := spec.TokenRefresh()
		assert.Equal(t, lead, got, id)
	}

	codex := provider.Spec{ID: "codex"}
	lead, maxAge := codex.TokenRefresh()
	assert.Equal(t, 5*24*time.Hour, lead)
	assert.Equal(t, 8*24*time.Hour, maxAge)
	own := provider.Spec{ID: "codex", RefreshLead: time.Hour}
	lead, _ = own.TokenRefresh()
	assert.Equal(t, time.Hour, lead, "a spec's own lead wins")

	// Codex: refreshed when the last refresh is over 8 days old, even with
	// days of lifetime left.
	s.lookup = func(id string) (provider.Spec, bool) { return provider.Spec{ID: id}, true }
	codexConn := func(lastUpdate time.Duration) *busv1.Connection {
		return &busv1.Connection{
			Provider: "codex", IsActive: true,
			CreatedAt: timestamppb.New(now.Add(-30 * 24 * time.Hour)), UpdatedAt: timestamppb.New(now.Add(-lastUpdate)),
			Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", ExpiresAt: timestamppb.New(now.Add(6 * 24 * time.Hour))},
		}
	}
	due, reason := s.Due(codexConn(9*24*time.Hour), now)
	assert.True(t, due)
	assert.Equal(t, "max_age", reason)
	due, _ = s.Due(codexConn(7*24*time.Hour), now)
	assert.False(t, due)

	// A compatible family has no forced refresh.
	s.lookup = provider.NewRegistry().Lookup
	old := &busv1.Connection{
		Provider: "openai-compatible-x", IsActive: true,
		CreatedAt: timestamppb.New(now.Add(-30 * 24 * time.Hour)), UpdatedAt: timestamppb.New(now.Add(-30 * 24 * time.Hour)),
		Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", ExpiresAt: timestamppb.New(now.Add(24 * time.Hour))},
	}
	due, _ = s.Due(old, now)
	assert.False(t, due)
}

// A refreshed token that lives shorter than its provider's lead (hour-long
// tokens where the table leads by four hours) is refreshed halfway through
// its life: before, every scan found it due again, a refresh a minute. A
// token no refresh stored (an import, a login) keeps the provider's lead.
func TestDueShortLivedTokenHalfwayThroughItsLife(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := &Scheduler{lookup: func(id string) (provider.Spec, bool) { return provider.Spec{ID: id}, true }}
	conn := func(refreshedAgo, expiresIn time.Duration) *busv1.Connection {
		c := &busv1.Connection{
			Provider: "claude", IsActive: true,
			CreatedAt: timestamppb.New(now.Add(-24 * time.Hour)), UpdatedAt: timestamppb.New(now.Add(-refreshedAgo)),
			Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", ExpiresAt: timestamppb.New(now.Add(expiresIn))},
		}
		if refreshedAgo >= 0 {
			c.Oauth.RefreshedAt = c.UpdatedAt
		}
		return c
	}
	for _, tc := range []struct {
		name                    string
		refreshedAgo, expiresIn time.Duration
		due                     bool
	}{
		{"just refreshed, an hour to live", time.Minute, 59 * time.Minute, false},
		{"before half its life", 29 * time.Minute, 31 * time.Minute, false},
		{"past half its life", 31 * time.Minute, 29 * time.Minute, true},
		{"an eight-hour token keeps the provider's lead", 5 * time.Hour, 3 * time.Hour, true},
		{"outside the provider's lead", 3 * time.Hour, 5 * time.Hour, false},
		{"never refreshed here: the provider's lead", -1, 59 * time.Minute, true},
	} {
		due, _ := s.Due(conn(tc.refreshedAgo, tc.expiresIn), now)
		assert.Equal(t, tc.due, due, tc.name)
	}

	// Codex's forced refresh counts from the last refresh, not from the
	// last edit: a rename does not put it off.
	codex := &busv1.Connection{
		Provider: "codex", IsActive: true,
		CreatedAt: timestamppb.New(now.Add(-30 * 24 * time.Hour)), UpdatedAt: timestamppb.New(now.Add(-time.Hour)),
		Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", ExpiresAt: timestamppb.New(now.Add(20 * 24 * time.Hour)),
			RefreshedAt: timestamppb.New(now.Add(-9 * 24 * time.Hour))},
	}
	due, reason := s.Due(codex, now)
	assert.True(t, due)
	assert.Equal(t, "max_age", reason)
}
