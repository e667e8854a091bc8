package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// heldTokenEndpoint is an OAuth token endpoint that never answers the first
// refresh-token grant: it holds it until its caller goes away (the worker
// that sent it died). Later grants get new tokens.
type heldTokenEndpoint struct {
	*httptest.Server
	// arrived gets a value as each grant arrives.
	arrived chan struct{}

	mu       sync.Mutex
	forms    []url.Values
	answered int
	aborted  int
}

func newHeldTokenEndpoint(t *testing.T) *heldTokenEndpoint {
	t.Helper()
	f := &heldTokenEndpoint{arrived: make(chan struct{}, 16)}
	done := make(chan struct{})
	answer := tokensAnswer(oauthNewAccess, oauthRefresh2)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" || r.ParseForm() != nil {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.forms = append(f.forms, r.PostForm)
		first := len(f.forms) == 1
		f.mu.Unlock()
		f.arrived <- struct{}{}
		if first {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			f.mu.Lock()
			f.aborted++
			f.mu.Unlock()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answer.status)
		_, _ = w.Write([]byte(answer.body))
		f.mu.Lock()
		f.answered++
		f.mu.Unlock()
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(done) }) // runs first: releases a held grant
	return f
}

func (f *heldTokenEndpoint) URL() string { return f.Server.URL + "/oauth/token" }

// state is the grants received, and how many were answered and abandoned
// by their caller.
func (f *heldTokenEndpoint) state() (grants []url.Values, answered, aborted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.forms...), f.answered, f.aborted
}

// tokenGeneration reads a connection's token generation from core's admin
// API.
func tokenGeneration(t *testing.T, admin corev1.AdminClient, id string) uint64 {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+nodetest.AdminToken)
	res, err := admin.GetConnectionCredentials(ctx, &corev1.GetConnectionCredentialsRequest{ConnectionId: id})
	require.NoError(t, err)
	return res.GetGeneration()
}

// A worker that dies in the middle of a token-refresh job never
// acknowledges it: once the ack wait has passed, the queue hands the job to
// another worker, which does the refresh. The killed attempt stored nothing,
// the refresh is done once, and the token generation rises by one.
func TestWorkerKilledMidJobIsRedeliveredAndDoneOnce(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newHeldTokenEndpoint(t)

	cfg := nodetest.Config(t.TempDir())
	cfg.NATSURL = natsURL
	cfg.TokenScanEvery = 20 * time.Millisecond
	core := nodetest.Start(t, cfg, node.RoleCore, node.RoleEdge)
	// Workers with a short job bound, hence a short ack wait (bound + 10 s).
	wcfg := func() config.Config {
		c := nodetest.Config(t.TempDir())
		c.NATSURL, c.CoreAddr = natsURL, core.Node.GRPCAddr()
		c.JobTimeout = 2 * time.Second
		return c
	}
	workerA := nodetest.Start(t, wcfg(), node.RoleWorker)

	conn, err := grpc.NewClient(core.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	admin := corev1.NewAdminClient(conn)

	// A token near expiry: core's scheduler enqueues its refresh, and
	// worker A, the only worker, takes the job.
	id := createExpiringConnection(t, core, up.URL(), tokens.URL(), oauthRefresh1, time.Now().Add(time.Minute))
	gen := tokenGeneration(t, admin, id)
	expBefore := expiresAt(t, core, id)
	select {
	case <-tokens.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A did not start the refresh")
	}

	// Worker A dies mid-job: its NATS connection drops with the job
	// unacknowledged (nothing can ack or nak it any more), and the process
	// goes. Its grant is never answered, so it had nothing to store.
	workerA.Node.NATS().Close()
	workerA.Stop()
	require.Eventually(t, func() bool { _, _, aborted := tokens.state(); return aborted == 1 },
		10*time.Second, 10*time.Millisecond, "the killed worker's grant was abandoned")
	grants, answered, _ := tokens.state()
	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, grants)
	assert.Equal(t, 0, answered)
	assert.Equal(t, gen, tokenGeneration(t, admin, id), "the killed attempt stored nothing")
	assert.Equal(t, expBefore, expiresAt(t, core, id))

	// Worker B joins the fleet and gets the job once the ack wait is over.
	nodetest.Start(t, wcfg(), node.RoleWorker)
	require.Eventually(t, func() bool { return tokenGeneration(t, admin, id) > gen },
		30*time.Second, 50*time.Millisecond, "the job is redelivered and done")

	// The job was acknowledged: nothing pending, nothing to redeliver.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cons, err := js.Consumer(context.Background(), spine.StreamJobs, "token-refresh")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	}, 10*time.Second, 20*time.Millisecond, "the job is acknowledged")
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.Delivered.Consumer, "delivered to worker A, then once to worker B")

	grants, answered, aborted := tokens.state()
	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1), refreshGrant(oauthRefresh1)}, grants,
		"the redelivered job refreshes from the untouched refresh token")
	assert.Equal(t, 1, answered, "one refresh done to completion")
	assert.Equal(t, 1, aborted)
	assert.Equal(t, gen+1, tokenGeneration(t, admin, id), "the generation rose by exactly one")
	c := connection(t, core, id)
	assert.Equal(t, false, c["needsRelogin"])
	assert.WithinDuration(t, time.Now().Add(time.Hour), expiresAt(t, core, id), 5*time.Minute)
	assert.Empty(t, up.Requests(), "no request reached the upstream")
}
