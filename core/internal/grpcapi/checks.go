package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// CheckTimeout bounds one provider check, connecting included.
const CheckTimeout = 10 * time.Second

// checkAnswerLimit caps how much of an upstream's answer a check reads.
const checkAnswerLimit = 64 << 10

// WithUpstream gives the provider checks the clients they call upstream
// with (the gateway's own, so a connection's proxy and the proxy
// environment variables apply alike), and returns a.
func (a *Admin) WithUpstream(c *upstream.Clients) *Admin {
	a.upstream = c
	return a
}

// checkResult is the outcome of one cheap real call upstream.
type checkResult struct {
	ok      bool
	status  int // 0: the upstream was not reached
	latency time.Duration
	err     string
}

// check calls GET {base}/models with credential through proxyURL. Its error
// text never holds the credential or the proxy's password.
func (a *Admin) check(ctx context.Context, spec provider.Spec, baseOverride, proxyURL, credential string, values map[string]string) checkResult {
	base := spec.BaseURL(baseOverride)
	if base == "" {
		return checkResult{err: "the provider has no base URL; set providerSpecificData.baseUrl"}
	}
	if a.upstream == nil {
		return checkResult{err: "provider checks are not available"}
	}
	client, err := a.upstream.For(base, proxyURL)
	if err != nil {
		return checkResult{err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return checkResult{err: "invalid base URL"}
	}
	req.Header.Set("Accept", "application/json")
	spec.AuthorizeWith(req.Header, credential, values)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return checkResult{latency: time.Since(start), err: string(secrets.Redact([]byte(unreachable(ctx, err)), credential))}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, checkAnswerLimit))
	r := checkResult{status: resp.StatusCode, latency: time.Since(start)}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		r.ok = true
		return r
	}
	r.err = fmt.Sprintf("upstream answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if msg := upstreamMessage(body, credential); msg != "" {
		r.err += ": " + msg
	}
	return r
}

// unreachable describes a failed call without its URL.
func unreachable(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("upstream did not answer within %s", CheckTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "upstream unreachable: " + err.Error()
}

// upstreamMessage reads the message of an upstream's error answer (OpenAI,
// Anthropic and most others nest it in "error"), the credential redacted,
// then shortened: shortened first, a key cut at the end would no longer be
// the key the redaction looks for, and its first part would show.
func upstreamMessage(body []byte, credential string) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := e.Message
	var nested struct {
		Message string `json:"message"`
	}
	var flat string
	switch {
	case json.Unmarshal(e.Error, &nested) == nil && nested.Message != "":
		msg = nested.Message
	case json.Unmarshal(e.Error, &flat) == nil && flat != "":
		msg = flat
	}
	msg = strings.Join(strings.Fields(msg), " ")
	msg = string(secrets.Redact([]byte(msg), credential))
	if len(msg) > 200 {
		msg = msg[:200]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "..."
	}
	return msg
}

// ValidateProvider checks a credential before it is saved. Nothing is
// stored; the answer never holds the credential.
func (a *Admin) ValidateProvider(ctx context.Context, req *corev1.ValidateProviderRequest) (*corev1.ValidateProviderResponse, error) {
	if _, err := a.auth.Admin(ctx); err != nil {
		return nil, err
	}
	spec, err := a.newProvider(req.GetProvider())
	if err != nil {
		return nil, err
	}
	d := req.GetProviderSpecificData()
	if err := a.validData(&corev1.ProviderSpecificData{BaseUrl: d.GetBaseUrl(), ProxyUrl: d.GetProxyUrl()}, spec); err != nil {
		return nil, err
	}
	if err := baseURLWithoutCredentials(d.GetBaseUrl()); err != nil {
		return nil, err
	}
	r := a.check(ctx, spec, d.GetBaseUrl(), d.GetProxyUrl(), req.GetApiKey(), nil)
	a.log.Info("provider credential checked", "provider", req.GetProvider(), "valid", r.ok, "status", r.status, "latency", r.latency)
	out := &corev1.ValidateProviderResponse{Valid: r.ok, LatencyMs: latencyMs(r.latency)}
	if r.status != 0 {
		out.Status = proto.Int32(int32(r.status))
	}
	if r.err != "" {
		out.Error = proto.String(r.err)
	}
	return out, nil
}

// TestConnection makes the provider check with a stored connection's
// credential and records the outcome on the connection.
func (a *Admin) TestConnection(ctx context.Context, req *corev1.TestConnectionRequest) (*corev1.TestConnectionResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	e, err := a.connection(ctx, machineID, req.GetId())
	if err != nil {
		return nil, err
	}
	c := e.Value
	spec, ok := a.registry.Lookup(c.GetProvider())
	if !ok {
		return nil, statusError(codes.FailedPrecondition, "unknown_provider", fmt.Sprintf("unknown provider '%s'", c.GetProvider()))
	}
	sec, err := a.open(c)
	if err != nil {
		return nil, err
	}
	r := a.check(ctx, spec, c.GetData().GetBaseUrl(), vault.ProxyURL(c, sec), vault.Credential(sec), c.GetData().GetValues())
	test := &busv1.ConnectionTest{
		TestedAt:  timestamppb.New(a.now()),
		Ok:        r.ok,
		Status:    int32(r.status),
		LatencyMs: latencyMs(r.latency),
		Error:     r.err,
	}
	// A test result is not an edit: updated_at stays.
	if _, err := a.store.Connections.Modify(ctx, store.ConnectionKey(machineID, c.GetId()), func(c *busv1.Connection) error {
		c.LastTest = test
		return nil
	}); err != nil {
		return nil, a.storeError(err)
	}
	a.log.Info("connection tested", "machine", machineID, "connection", c.GetId(), "ok", r.ok, "status", r.status, "latency", r.latency)
	out := &corev1.TestConnectionResponse{Valid: r.ok, LatencyMs: test.LatencyMs, TestedAt: test.TestedAt}
	if r.status != 0 {
		out.Status = proto.Int32(int32(r.status))
	}
	if r.err != "" {
		out.Error = proto.String(r.err)
	}
	return out, nil
}

// testView is the public view of a connection's last test.
func testView(t *busv1.ConnectionTest) *corev1.ConnectionTest {
	if t == nil {
		return nil
	}
	return &corev1.ConnectionTest{TestedAt: t.GetTestedAt(), Ok: t.GetOk(), Status: t.GetStatus(), LatencyMs: t.GetLatencyMs(), Error: t.GetError()}
}

func latencyMs(d time.Duration) int32 {
	ms := d.Milliseconds()
	if ms < 1 && d > 0 {
		ms = 1
	}
	return int32(min(ms, 1<<31-1))
}
