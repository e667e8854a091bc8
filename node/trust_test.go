package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

func grpcConn(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Anyone who reaches billing's network listener used to act as any user
// named in a request body. Now a call without the internal token is
// refused before billing sees it; with the token it is served; health
// checks stay open.
func TestBillingRefusesCallersWithoutInternalToken(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	cfg := nodetest.Config(t.TempDir())
	cfg.NATSURL = natsURL
	b := nodetest.Start(t, cfg, node.RoleBilling)

	anon := billingv1.NewBillingClient(grpcConn(t, b.Node.GRPCAddr()))
	victim := &billingv1.User{Id: "victim", Email: "victim@example.com"}
	calls := map[string]func(context.Context, billingv1.BillingClient) error{
		"portal": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: victim})
			return err
		},
		"cancel": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: victim})
			return err
		},
		"invoices": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.ListInvoices(ctx, &billingv1.ListInvoicesRequest{User: victim})
			return err
		},
		"webhook": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.IngestWebhook(ctx, &billingv1.IngestWebhookRequest{Payload: []byte("{}"), Signature: "t=1,v1=00"})
			return err
		},
		// The operator methods, claiming the edge's admin flag.
		"subscriptions": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.ListSubscriptions(rpcauth.VouchAdmin(ctx), &billingv1.ListSubscriptionsRequest{})
			return err
		},
		"dead letters": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.ListDeadEvents(rpcauth.VouchAdmin(ctx), &billingv1.ListDeadEventsRequest{})
			return err
		},
		"retry": func(ctx context.Context, c billingv1.BillingClient) error {
			_, err := c.RetryDeadEvent(rpcauth.VouchAdmin(ctx), &billingv1.RetryDeadEventRequest{Id: "evt_1"})
			return err
		},
	}
	for name, call := range calls {
		err := call(context.Background(), anon)
		assert.Equal(t, codes.Unauthenticated, status.Code(err), name)
		assert.NotContains(t, status.Convert(err).Message(), "BILLING_NOT_CONFIGURED", name)
	}
	wrong := billingv1.NewBillingClient(grpcConn(t, b.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(rpcauth.TokenCredentials("not-the-internal-token-0000"))))
	assert.Equal(t, codes.Unauthenticated, status.Code(calls["cancel"](context.Background(), wrong)))

	// The edge's credential gets through to billing (unconfigured here, so
	// it says so).
	edge := billingv1.NewBillingClient(grpcConn(t, b.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(nodetest.InternalToken))))
	ctx := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "victim"})
	assert.Equal(t, codes.FailedPrecondition, status.Code(calls["cancel"](ctx, edge)))

	h, err := healthpb.NewHealthClient(grpcConn(t, b.Node.GRPCAddr())).Check(context.Background(),
		&healthpb.HealthCheckRequest{Service: billingv1.Billing_ServiceDesc.ServiceName})
	require.NoError(t, err, "health checks need no credential")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())
}

// Split billing and edge processes need the internal token; without one
// they refuse to start with an error that names it.
func TestSplitRolesNeedInternalToken(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	for _, role := range []node.Role{node.RoleBilling, node.RoleEdge} {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL = natsURL
		cfg.InternalToken = ""
		n, err := node.Start(context.Background(), cfg, nodetest.Logger(), role)
		require.Error(t, err, role)
		assert.Nil(t, n)
		assert.Contains(t, err.Error(), "SWITCHBOARD_INTERNAL_TOKEN", role)
	}
}

// serve with no configuration generates the internal token into its data
// directory, once, and its in-process calls carry it.
func TestServeGeneratesInternalToken(t *testing.T) {
	dir := t.TempDir()
	cfg := nodetest.Config(dir)
	cfg.InternalToken = ""
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	tok, err := os.ReadFile(filepath.Join(dir, node.InternalTokenFile))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tok), rpcauth.MinTokenLen)
	gql := sb.Do(t, http.MethodPost, "/graphql", map[string]any{"query": "{ prices { plan } }"})
	assert.Contains(t, string(gql.Body), "BILLING_NOT_CONFIGURED", "the edge reaches billing in process")
	sb.Stop()

	sb = nodetest.Start(t, cfg, node.AllRoles...)
	again, err := os.ReadFile(filepath.Join(dir, node.InternalTokenFile))
	require.NoError(t, err)
	assert.Equal(t, tok, again, "the token is kept across restarts")
	// A network caller holding it is a role.
	c := billingv1.NewBillingClient(grpcConn(t, sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(strings.TrimSpace(string(tok))))))
	_, err = c.ListPrices(context.Background(), &billingv1.ListPricesRequest{})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, err = billingv1.NewBillingClient(grpcConn(t, sb.Node.GRPCAddr())).ListPrices(context.Background(), &billingv1.ListPricesRequest{})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
}

// pki is a throwaway CA and a certificate it signed for 127.0.0.1, usable
// both as server and as client certificate.
type pki struct {
	caFile, certFile, keyFile string
	other                     string // a CA that signed nothing here
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		cert, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		return cert, key, der
	}
	ca, caKey, caDER := newCA("switchboard test CA")
	_, _, otherDER := newCA("another CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "switchboard role"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pki{
		caFile:   write("ca.pem", "CERTIFICATE", caDER),
		certFile: write("cert.pem", "CERTIFICATE", der),
		keyFile:  write("key.pem", "PRIVATE KEY", keyDER),
		other:    write("other-ca.pem", "CERTIFICATE", otherDER),
	}
}

// Roles on different machines talk over TLS with client certificates: the
// split deployment works end to end, and a listener that requires client
// certificates refuses a client without one, and a plaintext client.
func TestSplitModeOverMutualTLS(t *testing.T) {
	p := newPKI(t)
	natsURL := nodetest.StartNATS(t)
	up := upstreamtest.New(t, upstreamtest.WithModels("qwen2.5-coder"))
	withTLS := func(c *config.Config) {
		c.GRPCTLSCert, c.GRPCTLSKey, c.GRPCClientCA, c.GRPCTLSCA = p.certFile, p.keyFile, p.caFile, p.caFile
	}

	coreCfg := nodetest.Config(t.TempDir())
	coreCfg.NATSURL = natsURL
	coreCfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	withTLS(&coreCfg)
	coreNode := nodetest.Start(t, coreCfg, node.RoleCore)

	workerCfg := nodetest.Config(t.TempDir())
	workerCfg.NATSURL, workerCfg.CoreAddr = natsURL, coreNode.Node.GRPCAddr()
	withTLS(&workerCfg)
	nodetest.Start(t, workerCfg, node.RoleWorker)

	billingCfg := nodetest.Config(t.TempDir())
	billingCfg.NATSURL = natsURL
	withTLS(&billingCfg)
	billingNode := nodetest.Start(t, billingCfg, node.RoleBilling)

	edgeCfg := nodetest.Config(t.TempDir())
	edgeCfg.CoreAddr, edgeCfg.BillingAddr = coreNode.Node.GRPCAddr(), billingNode.Node.GRPCAddr()
	withTLS(&edgeCfg)
	edgeNode := nodetest.Start(t, edgeCfg, node.RoleEdge)

	edgeNode.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})
	assert.Equal(t, []string{"openai-compatible-lab/qwen2.5-coder"}, edgeNode.ModelIDs(t), "edge, core and worker talk over mTLS")
	ready := edgeNode.Do(t, http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusOK, ready.Status, "%s", ready.Body)
	gql := edgeNode.Do(t, http.MethodPost, "/graphql", map[string]any{"query": "{ prices { plan } }"})
	assert.Contains(t, string(gql.Body), "BILLING_NOT_CONFIGURED", "edge and billing talk over mTLS")

	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(p.caFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	require.NoError(t, err)
	check := func(opts ...grpc.DialOption) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(grpcConn(t, billingNode.Node.GRPCAddr(), opts...)).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	assert.NoError(t, check(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}))))
	assert.Equal(t, codes.Unavailable, status.Code(check(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))),
		"a client without a certificate is refused")
	assert.Equal(t, codes.Unavailable, status.Code(check(grpc.WithTransportCredentials(insecure.NewCredentials()))),
		"a plaintext client is refused")

	// An edge that trusts another CA does not talk to these listeners.
	badCfg := nodetest.Config(t.TempDir())
	badCfg.CoreAddr, badCfg.BillingAddr = coreNode.Node.GRPCAddr(), billingNode.Node.GRPCAddr()
	withTLS(&badCfg)
	badCfg.GRPCTLSCA = p.other
	bad := nodetest.Start(t, badCfg, node.RoleEdge)
	notReady := bad.Do(t, http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusServiceUnavailable, notReady.Status, "%s", notReady.Body)
}
