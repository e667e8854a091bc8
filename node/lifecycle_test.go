package node_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Refresh tokens of the proactive refresh tests' other connections.
const (
	laterRefresh    = "rt-later-5be1d0"
	sentinelRefresh = "rt-sentinel-93a7c4"
)

// createExpiringConnection creates an OAuth connection whose access token
// expires at exp.
func createExpiringConnection(t *testing.T, sb *nodetest.Instance, upstreamURL, tokenURL, refreshToken string, exp time.Time) string {
	t.Helper()
	return sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-oauth", "name": "proactive",
		"providerSpecificData": map[string]any{"baseUrl": upstreamURL},
		"oauth": map[string]any{
			"accessToken": oauthOldAccess, "refreshToken": refreshToken,
			"tokenUrl": tokenURL, "clientId": oauthClientID,
			"expiresAt": exp.UTC().Format(time.RFC3339Nano),
		},
	})
}

// grantsFor counts the grants that sent refreshToken.
func grantsFor(f *fakeTokenEndpoint, refreshToken string) int {
	n := 0
	for _, g := range f.grants() {
		if g.Get("refresh_token") == refreshToken {
			n++
		}
	}
	return n
}

// expiresAt reads a connection's token expiry through the admin API.
func expiresAt(t *testing.T, sb *nodetest.Instance, id string) time.Time {
	t.Helper()
	s, _ := connection(t, sb, id)["expiresAt"].(string)
	if s == "" {
		return time.Time{}
	}
	exp, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return exp
}

// A token within its provider's lead time (compatible families: 5 minutes)
// is refreshed by the scheduler with no request arriving; a token further
// from expiry is left alone, and a refreshed one is not refreshed again.
func TestProactiveRefreshBeforeExpiry(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	cfg := nodetest.Config(t.TempDir())
	cfg.TokenScanEvery = 20 * time.Millisecond
	sb := nodetest.Start(t, cfg, node.AllRoles...)

	later := createExpiringConnection(t, sb, up.URL(), tokens.URL(), laterRefresh, time.Now().Add(30*time.Minute))
	due := createExpiringConnection(t, sb, up.URL(), tokens.URL(), oauthRefresh1, time.Now().Add(2*time.Minute))

	require.Eventually(t, func() bool {
		return expiresAt(t, sb, due).After(time.Now().Add(50 * time.Minute))
	}, 10*time.Second, 20*time.Millisecond, "the due token is refreshed to the new hour-long lifetime")
	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants(), "one grant, for the due connection")
	assert.Empty(t, up.Requests(), "no request reached the upstream")
	c := connection(t, sb, due)
	assert.Equal(t, false, c["needsRelogin"])

	// Scans go on: a connection created now is refreshed by a later scan,
	// which refreshes neither the refreshed connection nor the later one.
	createExpiringConnection(t, sb, up.URL(), tokens.URL(), sentinelRefresh, time.Now().Add(time.Minute))
	require.Eventually(t, func() bool { return grantsFor(tokens, sentinelRefresh) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, grantsFor(tokens, oauthRefresh1), "the refreshed token is not refreshed again")
	assert.Equal(t, 0, grantsFor(tokens, oauthRefresh2))
	assert.Equal(t, 0, grantsFor(tokens, laterRefresh), "30 minutes from expiry is outside the lead time")
	assert.WithinDuration(t, time.Now().Add(30*time.Minute), expiresAt(t, sb, later), time.Minute)
}

// Two core replicas scanning the same connections at once, each with its own
// worker, cause one refresh: their jobs share one message id per connection
// and token generation.
func TestProactiveRefreshAcrossCoreReplicasIsOne(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	secret := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

	// Count every job publication on the bus, duplicates the queue drops
	// included: a plain NATS subscriber sees them all.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	var published atomic.Int64
	sub, err := nc.Subscribe(spine.SubjectTokenRefresh+".>", func(*nats.Msg) { published.Add(1) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, nc.Flush())

	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	// The grant is held until both replicas have published the job over and
	// over, so that every scan overlaps the refresh in flight.
	gate := make(chan struct{})
	tokens.gate = gate

	var edge *nodetest.Instance
	for i := range 2 {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL, cfg.SecretKey = natsURL, secret
		cfg.TokenScanEvery = 10 * time.Millisecond
		core := nodetest.Start(t, cfg, node.RoleCore)
		wcfg := nodetest.Config(t.TempDir())
		wcfg.NATSURL, wcfg.CoreAddr = natsURL, core.Node.GRPCAddr()
		nodetest.Start(t, wcfg, node.RoleWorker)
		if i == 0 {
			ecfg := nodetest.Config(t.TempDir())
			ecfg.CoreAddr = core.Node.GRPCAddr()
			edge = nodetest.Start(t, ecfg, node.RoleEdge)
		}
	}

	id := createExpiringConnection(t, edge, up.URL(), tokens.URL(), oauthRefresh1, time.Now().Add(time.Minute))
	require.Eventually(t, func() bool { return len(tokens.grants()) == 1 }, 10*time.Second, 10*time.Millisecond,
		"a worker is in the grant")
	start := published.Load()
	require.Eventually(t, func() bool { return published.Load() >= start+20 }, 10*time.Second, 10*time.Millisecond,
		"the replicas keep publishing the job while the refresh is in flight")
	close(gate)

	require.Eventually(t, func() bool {
		return expiresAt(t, edge, id).After(time.Now().Add(50 * time.Minute))
	}, 10*time.Second, 20*time.Millisecond)
	// A later connection's refresh shows the scans went on after the
	// first refresh, without another grant for it.
	createExpiringConnection(t, edge, up.URL(), tokens.URL(), sentinelRefresh, time.Now().Add(time.Minute))
	require.Eventually(t, func() bool { return grantsFor(tokens, sentinelRefresh) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, grantsFor(tokens, oauthRefresh1), "one refresh across the fleet")
	assert.Equal(t, false, connection(t, edge, id)["needsRelogin"])
}

// A provider whose refreshed tokens live shorter than its lead (here three
// minutes against the compatible families' five) gets one refresh, not one
// at every scan: the scheduler refreshes such a token halfway through its
// life, which core records when it stores a refresh.
func TestShortLivedRefreshedTokenIsNotRefreshedAtEveryScan(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	short := func(access, refresh string) tokenAnswer {
		data, _ := json.Marshal(map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 180, "refresh_token": refresh})
		return tokenAnswer{status: http.StatusOK, body: string(data)}
	}
	tokens := newFakeTokenEndpoint(t, short(oauthNewAccess, oauthRefresh2), short(oauthNewAccess, "rt-third-0a1b2c"))
	cfg := nodetest.Config(t.TempDir())
	cfg.TokenScanEvery = 20 * time.Millisecond
	sb := nodetest.Start(t, cfg, node.AllRoles...)

	due := createExpiringConnection(t, sb, up.URL(), tokens.URL(), oauthRefresh1, time.Now().Add(2*time.Minute))
	require.Eventually(t, func() bool { return len(tokens.grants()) == 1 }, 10*time.Second, 20*time.Millisecond, "the due token is refreshed")
	require.Eventually(t, func() bool {
		return expiresAt(t, sb, due).After(time.Now().Add(2 * time.Minute))
	}, 10*time.Second, 20*time.Millisecond, "the refreshed token is stored")
	time.Sleep(time.Second) // fifty scans
	assert.Len(t, tokens.grants(), 1, "a token of three minutes is not due again at once")
}
