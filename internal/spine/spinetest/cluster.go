package spinetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// Cluster is a NATS cluster of nats-servers on loopback with clustered
// JetStream, whose last member reaches the others over a link that can be
// made slow, as a member in another zone is. Where any replica may answer
// a client (a direct get of a key-value bucket), the member it is
// connected to may.
type Cluster struct {
	// name is the cluster's name, its own in the machine.
	name    string
	members []*server.Server
	// lag delays each byte between the last member and the others.
	lag atomic.Int64
}

// StartCluster starts a cluster of size members, named nats-0, nats-1, ...
// in order, stopped when t ends. The last member's link is fast until
// SetLag.
//
// The route ports are picked free before their members listen on them,
// and on a busy machine another process may take one meanwhile: the
// member cannot listen then, and the cluster is started again on other
// ports. Each start gives its cluster a name of its own, so that a member
// reaching such a port (another test's cluster member) is refused there
// instead of joining that cluster.
func StartCluster(t testing.TB, size int) *Cluster {
	t.Helper()
	require.GreaterOrEqual(t, size, 2)
	var err error
	for range 3 {
		var c *Cluster
		if c, err = startCluster(t, size); err == nil {
			return c
		}
		c.stop()
	}
	require.NoError(t, err)
	return nil
}

// startCluster is one try of StartCluster; on an error, the members it
// started are in the cluster it returns, to be stopped.
func startCluster(t testing.TB, size int) (*Cluster, error) {
	t.Helper()
	c := &Cluster{name: fmt.Sprintf("spinetest-%d-%d", os.Getpid(), clusters.Add(1))}
	var routes []string
	for range size - 1 {
		routes = append(routes, fmt.Sprintf("127.0.0.1:%d", routePort(t)))
	}
	for i := range size - 1 {
		if _, err := c.start(t, i, routes, ""); err != nil {
			return c, err
		}
	}
	// The last member dials the others through slow links, and they
	// reach it through one (it tells them to use that address).
	var slow []string
	for _, r := range routes {
		slow = append(slow, c.link(t, func() string { return r }))
	}
	var last atomic.Pointer[server.Server]
	back := c.link(t, func() string {
		if s := last.Load(); s != nil {
			return s.ClusterAddr().String()
		}
		return ""
	})
	srv, err := c.start(t, size-1, slow, back)
	if err != nil {
		return c, err
	}
	last.Store(srv)
	require.Eventually(t, func() bool {
		for _, s := range c.members {
			if s.NumRoutes() < size-1 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the cluster's routes")
	return c, nil
}

// clusters counts the clusters started in this process (their names).
var clusters atomic.Int64

// start starts member i, routed to the members at routes (host:port; its
// own route port is routes[i] where there is one), telling the others to
// reach it at advertise (when set). An error is a member that does not
// come up (its route port taken), stopped.
func (c *Cluster) start(t testing.TB, i int, routes []string, advertise string) (*server.Server, error) {
	t.Helper()
	port := server.RANDOM_PORT
	if i < len(routes) {
		_, p, err := net.SplitHostPort(routes[i])
		require.NoError(t, err)
		port, err = strconv.Atoi(p)
		require.NoError(t, err)
	}
	opts := &server.Options{
		ServerName: fmt.Sprintf("nats-%d", i),
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: port, Advertise: advertise},
		Routes:     server.RoutesFromStr("nats://" + strings.Join(routes, ",nats://")),
	}
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("member %d not ready (route port %d)", i, port)
	}
	c.members = append(c.members, srv)
	return srv, nil
}

// stop stops the members started.
func (c *Cluster) stop() {
	for _, s := range c.members {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// URL is the client URL of member i.
func (c *Cluster) URL(i int) string { return c.members[i].ClientURL() }

// Name is the server name of member i.
func (c *Cluster) Name(i int) string { return c.members[i].Name() }

// SetLag delays each byte between the last member and the others by d
// from now on (zero: no delay).
func (c *Cluster) SetLag(d time.Duration) { c.lag.Store(int64(d)) }

// Replica is a client of one member: JetStream on a connection to it, and
// a bucket as that member answers its gets.
type Replica struct {
	JS jetstream.JetStream
	KV jetstream.KeyValue
}

// LaggingBucket creates the key-value bucket named name as cfgs (a
// topology's buckets) define it, replicated on every member, and returns it
// through a client of the member leading it and through one of the slow
// last member, once the slow member lags (SetLag(50ms)): a get through the
// slow member misses a write made a moment before through the leader.
func (c *Cluster) LaggingBucket(t testing.TB, name string, cfgs []jetstream.KeyValueConfig) (leader, slow Replica) {
	t.Helper()
	ctx := context.Background()
	i := slices.IndexFunc(cfgs, func(c jetstream.KeyValueConfig) bool { return c.Bucket == name })
	require.GreaterOrEqual(t, i, 0, "no bucket %s in the topology", name)
	cfg := cfgs[i]
	cfg.Replicas = c.Size()
	replicas := make([]Replica, c.Size())
	for i := range replicas {
		nc, err := spine.Connect(ctx, c.URL(i), "test", nil)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		if i == 0 {
			require.NoError(t, spine.EnsureBuckets(ctx, js, cfg))
		}
		kv, err := js.KeyValue(ctx, name)
		require.NoError(t, err)
		replicas[i] = Replica{JS: js, KV: kv}
	}
	// The slow member is not the leader: another is asked to lead.
	last, lead := c.Size()-1, -1
	require.Eventually(t, func() bool {
		st, err := replicas[0].KV.Status(ctx)
		if err != nil {
			return false
		}
		info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		if info.Cluster == nil {
			return false
		}
		lead = slices.IndexFunc(c.members, func(s *server.Server) bool { return s.Name() == info.Cluster.Leader })
		if lead == last {
			_, _ = replicas[0].JS.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+name, nil, 5*time.Second)
		}
		return lead >= 0 && lead != last
	}, 30*time.Second, 50*time.Millisecond, "a leader of %s other than the slow member", name)
	leader, slow = replicas[lead], replicas[last]

	c.SetLag(50 * time.Millisecond)
	// The slow member answers gets (once it has caught up), and answers
	// them from what it has applied.
	require.Eventually(t, func() bool {
		if _, err := leader.KV.Put(ctx, "probe", []byte("x")); err != nil {
			return false
		}
		_, err := slow.KV.Get(ctx, "probe")
		_ = leader.KV.Purge(ctx, "probe")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, 30*time.Second, 100*time.Millisecond, "the slow member lags")
	return leader, slow
}

// link listens on loopback and forwards each connection to the address
// target answers then, delaying the bytes both ways by the cluster's lag.
func (c *Cluster) link(t testing.TB, target func() string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				out, err := net.Dial("tcp", target())
				if err != nil {
					_ = in.Close()
					return
				}
				go c.pipe(out, in)
				c.pipe(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// pipe copies what src sends to dst, each piece the cluster's lag after it
// arrived, in order, and closes both when either side ends.
func (c *Cluster) pipe(dst, src net.Conn) {
	type piece struct {
		b  []byte
		at time.Time
	}
	pieces := make(chan piece, 4096)
	go func() {
		defer close(pieces)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				pieces <- piece{b[:n], time.Now().Add(time.Duration(c.lag.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		for range pieces {
		}
	}()
	for p := range pieces {
		time.Sleep(time.Until(p.at))
		if _, err := dst.Write(p.b); err != nil {
			return
		}
	}
}

// freePort is a TCP port on 127.0.0.1 free at the time of the call, never
// handed out before in this test binary.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("no free TCP port")
	return 0
}

// routePort picks a member's route port (freePort).
var routePort = freePort

// handedOut are the ports freePort returned.
var handedOut sync.Map
