package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/switchboardhq/switchboard/node/nodetest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// rawCodec sends pre-encoded bytes as the request message and ignores the
// answer.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }
func (rawCodec) Name() string                       { return "proto" }

const healthCheck = "/grpc.health.v1.Health/Check"

// largeCalls makes calls concurrent calls of method to addr, each a
// request message with one unknown field of size bytes, with the internal
// token when token is set, and answers the count of each status code.
func largeCalls(t *testing.T, addr, method string, calls, size int, token bool) map[codes.Code]int {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(128<<20)))
	require.NoError(t, err)
	defer conn.Close()
	payload := protowire.AppendTag(nil, 99, protowire.BytesType)
	payload = protowire.AppendBytes(payload, make([]byte, size))
	ctx := context.Background()
	if token {
		ctx = metadata.AppendToOutgoingContext(ctx, contract.MDInternalToken, nodetest.InternalToken)
	}
	var mu sync.Mutex
	got := make(map[codes.Code]int)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			var out []byte
			err := conn.Invoke(ctx, method, &payload, &out)
			mu.Lock()
			got[status.Code(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// TestGRPCLargeCallsClient is the client half of the tests below, run in a
// process of its own so that its buffers are not counted with the
// server's.
func TestGRPCLargeCallsClient(t *testing.T) {
	addr := os.Getenv("GRPC_LARGE_CALLS_ADDR")
	if addr == "" {
		t.Skip("run by the tests below")
	}
	calls, _ := strconv.Atoi(os.Getenv("GRPC_LARGE_CALLS_N"))
	size, _ := strconv.Atoi(os.Getenv("GRPC_LARGE_CALLS_SIZE"))
	got := largeCalls(t, addr, os.Getenv("GRPC_LARGE_CALLS_METHOD"), calls, size, os.Getenv("GRPC_LARGE_CALLS_TOKEN") != "")
	for code, n := range got {
		fmt.Printf("code %s: %d\n", code, n)
	}
}

// heldWhile runs the client half against the instance's gRPC listener and
// answers its output and how far the server's heap in use rose meanwhile,
// in MiB.
func heldWhile(t *testing.T, sb *nodetest.Instance, method string, calls, size int, token bool) (string, uint64) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	peak.Store(base.HeapInuse)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGRPCLargeCallsClient$")
	cmd.Env = append(os.Environ(), "GRPC_LARGE_CALLS_ADDR="+sb.Node.GRPCAddr(), "GRPC_LARGE_CALLS_METHOD="+method,
		"GRPC_LARGE_CALLS_N="+strconv.Itoa(calls), "GRPC_LARGE_CALLS_SIZE="+strconv.Itoa(size))
	if token {
		cmd.Env = append(cmd.Env, "GRPC_LARGE_CALLS_TOKEN=1")
	}
	out, err := cmd.CombinedOutput()
	close(stop)
	<-stopped
	require.NoError(t, err, "%s", out)
	return string(out), (peak.Load() - base.HeapInuse) >> 20
}

// A caller holding no credential made the gRPC listener read and decode
// each 48 MiB message before the guard refused it, as many at once as it
// liked: 8 such calls to billing raised the server's heap by about 1 GiB.
// The guard now refuses them when their headers arrive, before their
// message is read; and a message above the largest the routes need (a
// 32 MiB body and its envelope) is refused from its length prefix, on the
// open health service too.
func TestGRPCAnonymousLargeCallsAreRefusedUnread(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())

	out, held := heldWhile(t, sb, billingv1.Billing_ListPrices_FullMethodName, 8, 48<<20, false)
	t.Logf("8 tokenless 48 MiB calls to billing: %s; the server's heap rose by %d MiB", strings.TrimSpace(out), held)
	require.Contains(t, out, "code Unauthenticated: 8")
	require.Less(t, held, uint64(96), "tokenless calls made the server hold %d MiB", held)

	out, held = heldWhile(t, sb, healthCheck, 8, 48<<20, false)
	t.Logf("8 tokenless 48 MiB health checks: %s; the server's heap rose by %d MiB", strings.TrimSpace(out), held)
	require.Contains(t, out, "code ResourceExhausted: 8")
	require.Less(t, held, uint64(96), "oversized health checks made the server hold %d MiB", held)
}

// A role (or a service calling the Router directly) still sends over the
// network a message carrying the largest body the HTTP routes accept
// (--max-body-bytes, 32 MiB by default).
func TestGRPCMessageOfTheLargestBodyIsRead(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	got := largeCalls(t, sb.Node.GRPCAddr(), healthCheck, 1, 32<<20+64<<10, true)
	require.Equal(t, map[codes.Code]int{codes.OK: 1}, got)
}

// openStreamsWithLargeHeaders opens calls streams of Health.Watch (open to
// anyone, and held for as long as the caller likes) on a connection of its
// own to addr, each with a metadata value of size bytes, as a client that
// ignores the header list size the server announces sends them. It
// returns once every stream's headers are written (or the server closed
// the connection), and closes the connection at the test's end.
func openStreamsWithLargeHeaders(t *testing.T, addr string, calls, size int) {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	fr := http2.NewFramer(conn, conn)
	go func() { // answers nothing: only keeps the server's writes flowing
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Watch"}, {":authority", "core"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"x-pad", strings.Repeat("p", size)},
	} {
		// Never indexed: the same block opens every stream.
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true}))
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return
	}
	if fr.WriteSettings() != nil {
		return
	}
	const frame = 16 << 10
	b := block.Bytes()
	for i := range calls {
		id := uint32(2*i + 1)
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:frame]}) != nil {
			return
		}
		for off := frame; off < len(b); off += frame {
			if fr.WriteContinuation(id, off+frame >= len(b), b[off:min(off+frame, len(b))]) != nil {
				return
			}
		}
	}
}

// A caller without any credential opened health watches with 8 MiB of
// metadata each and the listener held every byte for as long as the watch
// ran (grpc-go reads up to 16 MiB of headers a call by default): 16 such
// calls on one connection raised the server's heap by about 256 MiB. The
// listener now reads no more header bytes a call than the HTTP routes
// accept, which is all the edge ever forwards.
func TestGRPCLargeHeadersAreNotHeld(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	openStreamsWithLargeHeaders(t, sb.Node.GRPCAddr(), 16, 8<<20)
	var peak uint64
	var m runtime.MemStats
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
	}
	held := (peak - min(peak, base.HeapInuse)) >> 20
	t.Logf("16 tokenless health watches with 8 MiB of metadata: the server's heap rose by %d MiB", held)
	require.Less(t, held, uint64(64), "large metadata made the server hold %d MiB", held)

	// A call with as much metadata as the edge forwards (at most the
	// 64 KiB of headers its HTTP routes accept) is served.
	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("p", 64<<10))
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}
