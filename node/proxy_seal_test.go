package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// connectionsKV opens the sb_connections bucket of a running instance.
func connectionsKV(t *testing.T, sb *nodetest.Instance) jetstream.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, spine.BucketConnections)
	require.NoError(t, err)
	return kv
}

// A connection written by an earlier release, with its proxy URL (and the
// proxy's password) in plain text, keeps working through that proxy, and is
// sealed when core next starts; an update seals it too.
func TestPlainProxyURLsOfEarlierReleasesAreSealed(t *testing.T) {
	const pass = "pp-LEGACY-4b5c6d7e"
	dir := t.TempDir()
	master := bytes.Repeat([]byte{0x5a}, secrets.KeySize)
	cfg := nodetest.Config(dir)
	cfg.SecretKey = base64.StdEncoding.EncodeToString(master)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-legacy-conn"))
	proxy := newAuthProxy(t, "legacy", pass)
	pu, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	pu.User = url.UserPassword("legacy", pass)

	sb := nodetest.Start(t, cfg, node.AllRoles...)
	machine := sb.Node.DefaultMachineID()
	box, err := secrets.NewBox(master)
	require.NoError(t, err)
	ids := []string{uuid.NewString(), uuid.NewString()}
	kv := connectionsKV(t, sb)
	for i, id := range ids {
		sealed, err := proto.Marshal(&busv1.Secrets{ApiKey: "sk-legacy-conn"})
		require.NoError(t, err)
		sealed, err = box.Seal(sealed, []byte(id))
		require.NoError(t, err)
		prefix := []string{"lega", "legb"}[i]
		c := &busv1.Connection{
			Id: id, MachineId: machine, Provider: "openai-compatible-" + prefix, Name: prefix, Priority: 1, IsActive: true,
			Data:          &busv1.ProviderData{BaseUrl: up.URL(), Prefix: prefix, ProxyUrl: pu.String()},
			SealedSecrets: sealed, CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
		}
		data, err := proto.Marshal(c)
		require.NoError(t, err)
		_, err = kv.Create(context.Background(), machine+"."+id, data)
		require.NoError(t, err)
	}

	// It works as it is, through the proxy and its password.
	require.Eventually(t, func() bool {
		return sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "lega/text-embedding-3-small", "input": "hi"}).Status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	assert.True(t, proxy.saw("POST "+up.URL()+"/embeddings"))
	get := sb.Admin(t, http.MethodGet, "/api/providers/"+ids[0], nil)
	require.Equal(t, http.StatusOK, get.Status)
	assert.Equal(t, "http://legacy:***@"+pu.Host, get.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["proxyUrl"])

	// An update seals it (sending the redacted form back keeps the proxy).
	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+ids[1], map[string]any{"name": "renamed",
		"providerSpecificData": map[string]any{"proxyUrl": "http://legacy:***@" + pu.Host}})
	require.Equal(t, http.StatusOK, patch.Status, "%s", patch.Body)
	e, err := kv.Get(context.Background(), machine+"."+ids[1])
	require.NoError(t, err)
	assert.NotContains(t, string(e.Value()), pass, "sealed on update")
	resp := sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "legb/text-embedding-3-small", "input": "hi"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)

	// The next start seals the other one.
	sb.Stop()
	sb = nodetest.Start(t, cfg, node.AllRoles...)
	e, err = connectionsKV(t, sb).Get(context.Background(), machine+"."+ids[0])
	require.NoError(t, err)
	assert.NotContains(t, string(e.Value()), pass, "sealed at start")
	var c busv1.Connection
	require.NoError(t, proto.Unmarshal(e.Value(), &c))
	assert.Empty(t, c.GetData().GetProxyUrl())
	before := proxy.forwarded()
	resp = sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "lega/text-embedding-3-small", "input": "hi"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Greater(t, proxy.forwarded(), before, "still through the proxy")
	assert.Zero(t, proxy.refusals(), "with its password")
}

// A proxy set, changed or removed by an update is sealed, shown redacted
// and used at once.
func TestProxyURLSetByUpdateIsSealed(t *testing.T) {
	const pass = "pp-PATCHED-0a9b8c7d"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("k"))
	proxy := newAuthProxy(t, "patched", pass)
	pu, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	pu.User = url.UserPassword("patched", pass)
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-up", "name": "u", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "up"}})
	embed := func() int {
		return sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "up/text-embedding-3-small", "input": "hi"}).Status
	}
	require.Equal(t, http.StatusOK, embed())
	assert.Zero(t, proxy.forwarded())

	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"proxyUrl": pu.String()}})
	require.Equal(t, http.StatusOK, patch.Status, "%s", patch.Body)
	assert.NotContains(t, string(patch.Body), pass)
	assert.Equal(t, "http://patched:***@"+pu.Host, patch.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["proxyUrl"])
	e, err := connectionsKV(t, sb).Get(context.Background(), sb.Node.DefaultMachineID()+"."+id)
	require.NoError(t, err)
	assert.NotContains(t, string(e.Value()), pass)
	require.Equal(t, http.StatusOK, embed())
	assert.Equal(t, 1, proxy.forwarded(), "through the proxy")
	assert.Zero(t, proxy.refusals(), "with its password")

	// The redacted form sent back with another host name (a console edit
	// of the host alone) keeps the password, rather than storing "***".
	moved := "http://patched:***@" + strings.Replace(pu.Host, "127.0.0.1", "localhost", 1)
	edit := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"proxyUrl": moved}})
	require.Equal(t, http.StatusOK, edit.Status, "%s", edit.Body)
	assert.Equal(t, moved, edit.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["proxyUrl"])
	require.Equal(t, http.StatusOK, embed())
	assert.Equal(t, 2, proxy.forwarded(), "through the proxy at its new name")
	assert.Zero(t, proxy.refusals(), "still with its password")

	bad := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"proxyUrl": "ftp://x:" + pass + "@p"}})
	assert.Equal(t, http.StatusBadRequest, bad.Status)
	assert.NotContains(t, string(bad.Body), pass, "the refused URL is not echoed")

	clear := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"proxyUrl": ""}})
	require.Equal(t, http.StatusOK, clear.Status, "%s", clear.Body)
	assert.Equal(t, "", clear.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["proxyUrl"])
	require.Equal(t, http.StatusOK, embed())
	assert.Equal(t, 2, proxy.forwarded(), "direct again")
}
