package grpcapi

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

const (
	loginMachine    = "m1"
	loginAdminToken = "admin-token-5e2c"
)

// loginAdmin is the admin service of one core replica on an embedded NATS
// server, with the built-in OAuth logins; its default machine is m1.
func loginAdmin(t *testing.T) *Admin {
	t.Helper()
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.Topology{}.Ensure(ctx, js))
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, js, log)
	require.NoError(t, err)
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	providers, err := oauth.NewProviders(nil)
	require.NoError(t, err)
	keySecret := []byte("key-secret")
	a := NewAdmin(NewAuthenticator(st, keySecret, loginAdminToken, false, loginMachine), st, vault.New(box),
		store.NewCooldowns(st.Cooldowns), nil, keySecret, provider.NewRegistry(), log)
	return a.EnableOAuth(OAuthDeps{Providers: providers, Box: box, Clients: upstream.NewClients(upstream.Options{})})
}

// adminContext is an admin call's context.
func adminContext() context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+loginAdminToken))
}

// startLogin stores a login of provider in progress, as its start does.
func startLogin(t *testing.T, a *Admin, provider string) *busv1.OAuthFlow {
	t.Helper()
	now := time.Now()
	f := &busv1.OAuthFlow{
		Id: newFlowID(now.Add(authorizationTTL)), MachineId: loginMachine, Provider: provider, Kind: flowKindCode,
		CreatedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(authorizationTTL)),
		Status: flowPending, ConnectionId: uuid.NewString(), Name: provider,
	}
	require.NoError(t, a.newFlow(context.Background(), f, &busv1.OAuthFlowSecrets{}))
	return f
}

// login completes a login of provider with the access token access.
func login(t *testing.T, a *Admin, f *busv1.OAuthFlow, access string) *busv1.Connection {
	t.Helper()
	p, ok := a.logins.Providers.Lookup(f.GetProvider())
	require.True(t, ok)
	c, err := a.completeLogin(context.Background(), f, "", p, oauth.Token{AccessToken: access, RefreshToken: "rt-" + access, ExpiresIn: 3600})
	require.NoError(t, err)
	return c
}

// needsRelogin marks the connection as its refresh worker does when the
// provider refused its refresh token.
func needsRelogin(t *testing.T, a *Admin, c *busv1.Connection) {
	t.Helper()
	_, err := a.StoreTokens(adminContext(), &corev1.StoreTokensRequest{ConnectionId: c.GetId(), Generation: c.GetOauth().GetGeneration(),
		Error: "refresh token refused: token endpoint answered 400 (invalid_grant); sign in again", NeedsRelogin: true})
	require.NoError(t, err)
}

// accessToken is the stored access token of connection id.
func accessToken(t *testing.T, a *Admin, id string) string {
	t.Helper()
	e, ok := a.store.Connections.Get(store.ConnectionKey(loginMachine, id))
	require.True(t, ok)
	sec, err := a.open(e.Value)
	require.NoError(t, err)
	return sec.GetAccessToken()
}

// A refresh that started from the tokens a new login replaced (a job of
// the old generation, answered by the provider after the login) changes
// nothing: neither its tokens nor its refusal land on the renewed
// connection.
func TestStaleRefreshDoesNotUndoARenewal(t *testing.T) {
	a := loginAdmin(t)
	old := login(t, a, startLogin(t, a, "kimi"), "at-first")
	needsRelogin(t, a, old)

	renewed := login(t, a, startLogin(t, a, "kimi"), "at-renewed")
	require.Equal(t, old.GetId(), renewed.GetId(), "the login renews the connection that needs it")

	res, err := a.StoreTokens(adminContext(), &corev1.StoreTokensRequest{ConnectionId: old.GetId(),
		Generation: old.GetOauth().GetGeneration(), AccessToken: "at-stale-refresh"})
	require.NoError(t, err)
	assert.False(t, res.GetStored(), "a refresh of the replaced tokens is stale")
	_, err = a.StoreTokens(adminContext(), &corev1.StoreTokensRequest{ConnectionId: old.GetId(),
		Generation: old.GetOauth().GetGeneration(), Error: "refresh token refused", NeedsRelogin: true})
	require.NoError(t, err)

	assert.Equal(t, "at-renewed", accessToken(t, a, old.GetId()))
	e, _ := a.store.Connections.Get(store.ConnectionKey(loginMachine, old.GetId()))
	assert.False(t, e.Value.GetOauth().GetNeedsRelogin())
	assert.Empty(t, e.Value.GetOauth().GetLastError())
}

// A login completed twice (a completion that lost its lease, and the one
// that took the flow over) renews one connection, once: the second finds
// the connection the first wrote, though it no longer needs a login.
func TestLoginCompletedTwiceRenewsOnce(t *testing.T) {
	a := loginAdmin(t)
	old := login(t, a, startLogin(t, a, "kimi"), "at-first")
	needsRelogin(t, a, old)

	f := startLogin(t, a, "kimi")
	first := login(t, a, f, "at-renewed")
	second := login(t, a, f, "at-renewed-again")
	assert.Equal(t, old.GetId(), first.GetId())
	assert.Equal(t, old.GetId(), second.GetId())
	assert.Len(t, a.store.MachineConnections(loginMachine), 1)
	assert.Equal(t, "at-renewed", accessToken(t, a, old.GetId()), "the first completion's tokens stay")
}

// Two logins at once for a connection awaiting one, of accounts that
// cannot be told apart: one renews it, the other adds a connection rather
// than overwriting the tokens the first has just stored (it may be
// another account's login).
func TestTwoLoginsAtOnceRenewOneConnection(t *testing.T) {
	a := loginAdmin(t)
	old := login(t, a, startLogin(t, a, "kimi"), "at-first")
	needsRelogin(t, a, old)

	flows := []*busv1.OAuthFlow{startLogin(t, a, "kimi"), startLogin(t, a, "kimi")}
	p, _ := a.logins.Providers.Lookup("kimi")
	got := make([]*busv1.Connection, len(flows))
	errs := make([]error, len(flows))
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Go(func() {
			got[i], errs[i] = a.completeLogin(context.Background(), f, "", p, oauth.Token{AccessToken: "at-login-" + f.GetId()})
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	require.Len(t, a.store.MachineConnections(loginMachine), 2)
	var renewer *busv1.OAuthFlow
	for i, c := range got {
		if c.GetId() == old.GetId() {
			require.Nil(t, renewer, "one login renews the connection")
			renewer = flows[i]
		}
	}
	require.NotNil(t, renewer, "one login renews the connection")
	assert.Equal(t, "at-login-"+renewer.GetId(), accessToken(t, a, old.GetId()))
}

// A login renews a connection of its account only when both name the whole
// account: a Codex connection stored before the user was kept names the
// workspace alone, which a team's members share, and another member's
// login must not take it over while it works.
func TestSameAccountNeedsTheWholeAccount(t *testing.T) {
	names := []string{"chatgpt_account_id", "chatgpt_user_id"}
	login := map[string]string{"chatgpt_account_id": "ws-1", "chatgpt_user_id": "user-b"}
	for _, tc := range []struct {
		name        string
		stored      map[string]string
		known, same bool
	}{
		{"the same workspace and user", map[string]string{"chatgpt_account_id": "ws-1", "chatgpt_user_id": "user-b"}, true, true},
		{"another member of the workspace", map[string]string{"chatgpt_account_id": "ws-1", "chatgpt_user_id": "user-a"}, true, false},
		{"another workspace", map[string]string{"chatgpt_account_id": "ws-2", "chatgpt_user_id": "user-b"}, true, false},
		{"the workspace alone, stored before the user was kept", map[string]string{"chatgpt_account_id": "ws-1"}, false, false},
		{"another workspace alone", map[string]string{"chatgpt_account_id": "ws-2"}, true, false},
		{"nothing stored", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known, same := sameAccount(names, login, tc.stored)
			assert.Equal(t, tc.known, known, "known")
			assert.Equal(t, tc.same, same, "same")
		})
	}
}

// A Codex connection stored before the user was kept names its workspace
// alone: a login whose token names another workspace is another account's,
// though the user cannot be compared, and adds a connection of its own
// rather than taking over the one awaiting its own account's login.
func TestLoginOfAnotherWorkspaceDoesNotRenew(t *testing.T) {
	a := loginAdmin(t)
	p, ok := a.logins.Providers.Lookup("codex")
	require.True(t, ok)
	old, err := a.completeLogin(context.Background(), startLogin(t, a, "codex"), "", p, oauth.Token{AccessToken: "at-ws-1", RefreshToken: "rt-ws-1",
		IDToken: codexIDToken(`{"https://api.openai.com/auth":{"chatgpt_account_id":"ws-1"}}`)})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"chatgpt_account_id": "ws-1"}, old.GetData().GetValues())
	needsRelogin(t, a, old)

	other, err := a.completeLogin(context.Background(), startLogin(t, a, "codex"), "", p, oauth.Token{AccessToken: "at-ws-2", RefreshToken: "rt-ws-2",
		IDToken: codexIDToken(`{"https://api.openai.com/auth":{"chatgpt_account_id":"ws-2","chatgpt_user_id":"user-b"}}`)})
	require.NoError(t, err)
	assert.NotEqual(t, old.GetId(), other.GetId(), "another workspace's login adds its own connection")
	assert.Equal(t, "at-ws-1", accessToken(t, a, old.GetId()), "the connection awaiting its workspace's login keeps its tokens")
	assert.Len(t, a.store.MachineConnections(loginMachine), 2)
}

// A login of an account with several working connections renews none of
// them, nor a connection of an account it cannot compare that awaits a new
// login: it adds a connection of its own.
func TestLoginOfAnAccountWithSeveralConnectionsAddsOne(t *testing.T) {
	a := loginAdmin(t)
	p, ok := a.logins.Providers.Lookup("codex")
	require.True(t, ok)
	mine := `{"https://api.openai.com/auth":{"chatgpt_account_id":"ws-1","chatgpt_user_id":"user-a"}}`
	loginAs := func(access, claims string) *busv1.Connection {
		c, err := a.completeLogin(context.Background(), startLogin(t, a, "codex"), "", p, oauth.Token{AccessToken: access, RefreshToken: "rt-" + access, IDToken: codexIDToken(claims)})
		require.NoError(t, err)
		return c
	}
	first := loginAs("at-first", mine)
	second := proto.CloneOf(first)
	second.Id = "second"
	require.NoError(t, a.store.Connections.Create(context.Background(), store.ConnectionKey(loginMachine, "second"), second))
	// Stored before the account was kept: nothing to compare with.
	unknown := loginAs("at-unknown", `{}`)
	needsRelogin(t, a, unknown)

	again := loginAs("at-again", mine)
	assert.NotContains(t, []string{unknown.GetId(), first.GetId(), "second"}, again.GetId(), "a connection of its own")
	assert.Equal(t, "at-unknown", accessToken(t, a, unknown.GetId()), "the connection it cannot compare keeps its tokens")
	assert.Equal(t, "at-first", accessToken(t, a, first.GetId()))
}

// codexIDToken is an unsigned id token carrying claims, as a Codex login's
// token answer names its account.
func codexIDToken(claims string) string {
	return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
}
