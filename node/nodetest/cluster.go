package nodetest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// NATSCluster is a real NATS cluster of embedded nats-servers on loopback,
// with clustered JetStream: members can be killed and restarted on their
// own store, as a production three-node cluster loses and regains a node.
type NATSCluster struct {
	t       testing.TB
	mu      sync.Mutex
	members []*clusterMember
}

type clusterMember struct {
	cfg spine.EmbeddedConfig
	srv *spine.Embedded // nil while down
}

// NewNATSCluster prepares a cluster of size members (ports chosen, nothing
// started yet: Start starts them), stopped when the test ends.
func NewNATSCluster(t testing.TB, size int) *NATSCluster {
	t.Helper()
	c := &NATSCluster{t: t}
	var routes []string
	clientPorts := make([]int, size)
	routePorts := make([]int, size)
	for i := range size {
		clientPorts[i], routePorts[i] = FreePort(t), FreePort(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	for i := range size {
		c.members = append(c.members, &clusterMember{cfg: spine.EmbeddedConfig{
			DataDir: t.TempDir(),
			Listen:  true,
			Port:    clientPorts[i],
			Name:    fmt.Sprintf("nats-%d", i),
			Logger:  Logger(),
			Cluster: &spine.ClusterConfig{Name: "switchboard-test", Port: routePorts[i], Routes: routes},
		}})
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Kill(i)
		}
	})
	return c
}

// StartNATSCluster starts a cluster of size members and returns it.
func StartNATSCluster(t testing.TB, size int) *NATSCluster {
	c := NewNATSCluster(t, size)
	c.Start()
	return c
}

// Start starts every member that is not running, at once.
func (c *NATSCluster) Start() {
	c.t.Helper()
	var wg sync.WaitGroup
	for i := range c.members {
		wg.Add(1)
		go func() { defer wg.Done(); c.Restart(i) }()
	}
	wg.Wait()
}

// URLs is the client URL list of every member, comma separated, as
// SWITCHBOARD_NATS_URL takes it.
func (c *NATSCluster) URLs() string {
	var urls []string
	for _, m := range c.members {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", m.cfg.Port))
	}
	return strings.Join(urls, ",")
}

// Kill stops member i (its clients lose their connections at once).
func (c *NATSCluster) Kill(i int) {
	c.mu.Lock()
	m := c.members[i]
	srv := m.srv
	m.srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
	}
}

// Restart starts member i again on its own store and ports.
func (c *NATSCluster) Restart(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.srv != nil {
		return
	}
	srv, err := spine.StartEmbedded(m.cfg)
	if err != nil {
		c.t.Errorf("start nats member %d: %v", i, err)
		return
	}
	m.srv = srv
}

// Member is the index of the member named name (-1 when none is).
func (c *NATSCluster) Member(name string) int {
	for i, m := range c.members {
		if m.cfg.Name == name {
			return i
		}
	}
	return -1
}

// JetStream is JetStream on a connection (named name) to the running
// members, closed when t ends.
func (c *NATSCluster) JetStream(t testing.TB, name string) jetstream.JetStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := spine.Connect(ctx, c.URLs(), name, nil)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// StreamInfo reads a stream's state through any running member.
func (c *NATSCluster) StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := spine.Connect(ctx, c.URLs(), "nodetest-observer", nil)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// StreamLeader is the index of the member leading stream.
func (c *NATSCluster) StreamLeader(t testing.TB, stream string) int {
	t.Helper()
	var leader int
	require.Eventually(t, func() bool {
		info, err := c.StreamInfo(context.Background(), stream)
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = c.Member(info.Cluster.Leader)
		return leader >= 0
	}, 30*time.Second, 100*time.Millisecond, "no leader for stream %s", stream)
	return leader
}

// FreePort is a TCP port on 127.0.0.1 free at the time of the call and
// never handed out before in this test binary (the kernel may offer a port
// again once its probe listener closed, before its first user binds it).
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("no fresh TCP port")
	return 0
}

// handedOut are the ports FreePort returned.
var handedOut sync.Map
