package node_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// storedKeys returns every key and value of the sb_keys bucket, as bytes.
func storedKeys(t *testing.T, sb *nodetest.Instance) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, spine.BucketKeys)
	require.NoError(t, err)
	lister, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	var out [][]byte
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		require.NoError(t, err)
		out = append(out, []byte(k), e.Value())
	}
	return out
}

// An attacker with a copy of the key store (and the key listing) must still
// search at least 2^128 secrets to recover a key: nothing stored or listed
// holds any part of the secret, and what is stored or listed leaves at
// least 128 bits of the key unknown.
func TestKeyStoreDoesNotRevealKeys(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	created := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "ci"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	key := created.JSON["key"].(string)
	id := created.JSON["id"].(string)
	machine := created.JSON["machineId"].(string)
	list := sb.Admin(t, http.MethodGet, "/api/keys", nil)
	require.Equal(t, http.StatusOK, list.Status)

	known := append(storedKeys(t, sb), list.Body)
	require.Greater(t, len(known), 1, "the key is stored")

	// Take off the parts of the key that the store or the listing shows:
	// what remains is what an attacker must guess.
	unknown := strings.TrimPrefix(key, "sk-"+machine+"-"+id+"-")
	require.NotEqual(t, key, unknown, "the key carries its machine id and key id")
	// At most log2(62) bits per character of [A-Za-z0-9].
	bits := float64(len(unknown)) * math.Log2(62)
	assert.GreaterOrEqual(t, bits, 128.0, "unknown part %d characters", len(unknown))
	for _, b := range known {
		lower := strings.ToLower(string(b))
		for i := 0; i+6 <= len(unknown); i++ {
			require.NotContains(t, lower, strings.ToLower(unknown[i:i+6]), "the store or listing holds part of the key's secret")
		}
	}

	// And the key works, and stops working once revoked.
	assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+key).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/keys/"+id, nil).Status)
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+key).Status)
}

// Keys issued in the earlier sk-{machine}-{keyId}-{crc} form, stored under
// their plain SHA-256, keep working until they are revoked, and move to a
// keyed lookup id when first used.
func TestOldFormatKeysKeepWorking(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	master := make([]byte, secrets.KeySize)
	for i := range master {
		master[i] = byte(i * 7)
	}
	cfg.SecretKey = base64.StdEncoding.EncodeToString(master)
	cfg.RequireAPIKey = true
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	machine := sb.Node.DefaultMachineID()

	// Build the key as the earlier releases did, and store its record.
	const keyID = "old9k2"
	mac := hmac.New(sha256.New, secrets.Derive(master, "api-key-checksum"))
	mac.Write([]byte(machine + keyID))
	raw := "sk-" + machine + "-" + keyID + "-" + hex.EncodeToString(mac.Sum(nil)[:4])
	sum := sha256.Sum256([]byte(raw))
	rec, err := proto.Marshal(&busv1.APIKey{Id: keyID, MachineId: machine, Name: "old", CreatedAt: timestamppb.Now()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, spine.BucketKeys)
	require.NoError(t, err)
	_, err = kv.Create(ctx, hex.EncodeToString(sum[:]), rec)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		return sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+raw).Status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "an old-format key is accepted")
	// Its first use moved it from its plain SHA-256, which a copy of the
	// store would let anyone test guesses against, to a keyed lookup id.
	require.Eventually(t, func() bool {
		stored := storedKeys(t, sb)
		return len(stored) == 2 && string(stored[0]) != hex.EncodeToString(sum[:])
	}, 10*time.Second, 20*time.Millisecond, "the old entry is replaced")
	assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+raw).Status,
		"the moved key works")
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil,
		"Authorization", "Bearer "+raw[:len(raw)-1]+map[bool]string{true: "1", false: "0"}[raw[len(raw)-1] == '0']).Status,
		"a wrong checksum is still refused")

	list := sb.Admin(t, http.MethodGet, "/api/keys", nil)
	require.Equal(t, http.StatusOK, list.Status)
	require.Len(t, list.JSON["keys"], 1)
	assert.Equal(t, keyID, list.JSON["keys"].([]any)[0].(map[string]any)["id"])
	assert.NotContains(t, string(list.Body), raw)

	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/keys/"+keyID, nil).Status)
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+raw).Status,
		"a revoked old-format key is refused")
}
