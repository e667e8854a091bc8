package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// OAuthDeps are what the OAuth logins need.
type OAuthDeps struct {
	Providers *oauth.Providers
	// Box seals the device codes and PKCE verifiers of logins in progress.
	Box *secrets.Box
	// Clients call the providers' OAuth endpoints (no redirects followed).
	Clients *upstream.Clients
}

// EnableOAuth turns on the OAuth login RPCs.
func (a *Admin) EnableOAuth(d OAuthDeps) *Admin {
	a.logins = &d
	return a
}

// loginValues are the values the login of provider keeps from tok (nil when
// logins are off or the provider has none).
func (a *Admin) loginValues(provider string, tok oauth.Token) map[string]string {
	if a.logins == nil {
		return nil
	}
	p, ok := a.logins.Providers.Lookup(provider)
	if !ok {
		return nil
	}
	return p.Values(tok)
}

// Flow statuses (busv1.OAuthFlow.status) and poll answers.
const (
	flowPending  = "pending"
	flowComplete = "complete"
	flowDenied   = "denied"
	flowExpired  = "expired"
	pollSlowDown = "slow_down"
)

const (
	flowKindDevice = "device"
	flowKindCode   = "authorization_code"
	// flowLease bounds how long one poll holds a flow while it calls the
	// provider (two OAuth calls at most).
	flowLease = 2*oauth.CallTimeout + 5*time.Second
	// authorizationTTL is how long an authorization-code login may take.
	authorizationTTL = 10 * time.Minute
)

var errFlowBusy = errors.New("flow busy")

// errFlowForgotten is claimFlow's answer for a login whose record is gone:
// the flow bucket forgets a login spine.OAuthFlowTTL after it was last
// touched, and a device code may live longer, or be polled again after a
// longer pause. Its id shows it was a login (newFlowID), which can no
// longer finish: it answers as expired, never as a login that never was.
var errFlowForgotten = errors.New("flow forgotten")

// newFlowID mints a login's id, "<random state>.<expiry in Unix seconds>":
// the id of a login whose record is gone still names a login, and when it
// ended. It is the OAuth state of an authorization-code login too.
func newFlowID(expires time.Time) string {
	return oauth.NewState() + "." + strconv.FormatInt(expires.Unix(), 10)
}

// flowIDExpiry is the expiry a flow id names; false for an id newFlowID
// did not shape.
func flowIDExpiry(id string) (time.Time, bool) {
	state, exp, ok := strings.Cut(id, ".")
	if !ok || state == "" {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// missingFlow is the error for a flow id without a record: errFlowForgotten
// for a login's id, flowNotFound for any other.
func (a *Admin) missingFlow(id string) error {
	exp, ok := flowIDExpiry(id)
	if !ok {
		return flowNotFound(id)
	}
	if a.now().Before(exp) {
		a.log.Warn("oauth login forgotten before it expired: unpolled for longer than the flow bucket keeps a login", "flow", id, "expires_at", exp)
	}
	return errFlowForgotten
}

func (a *Admin) loginProvider(id string, flow oauth.Flow) (oauth.Provider, error) {
	if a.logins == nil {
		return oauth.Provider{}, notFound("unknown_provider", fmt.Sprintf("no OAuth login for provider '%s'", id))
	}
	p, ok := a.logins.Providers.Lookup(id)
	if !ok {
		return p, notFound("unknown_provider", fmt.Sprintf("no OAuth login for provider '%s'", id))
	}
	if p.Flow != flow {
		return p, invalidParam("provider", "unsupported_flow", fmt.Sprintf("provider '%s' logs in with the %s flow", id, p.Flow))
	}
	if _, ok := a.registry.Lookup(id); !ok {
		return p, internal("OAuth provider has no registry entry")
	}
	return p, nil
}

func (a *Admin) oauthClient(endpoint, proxyURL string) (*http.Client, error) {
	c, err := a.logins.Clients.For(endpoint, proxyURL)
	if err != nil {
		return nil, statusError(codes.FailedPrecondition, "invalid_oauth_endpoint", "the provider's OAuth endpoint or the proxy is not usable: "+err.Error())
	}
	return c, nil
}

// providerError maps a failed OAuth call to a 502.
func providerError(step string, err error) error {
	msg := "the provider's " + step + " failed"
	var oe *oauth.Error
	if errors.As(err, &oe) {
		msg += ": " + oe.Error()
	} else if err != nil {
		msg += ": " + err.Error()
	}
	return statusError(codes.Unavailable, "oauth_provider_error", msg, MetaHTTPStatus, "502")
}

func flowNotFound(id string) error {
	return notFound("flow_not_found", fmt.Sprintf("no OAuth login with flow id '%s'", id))
}

func flowGone(f *busv1.OAuthFlow) error {
	return statusError(codes.FailedPrecondition, "flow_"+f.GetStatus(),
		fmt.Sprintf("the OAuth login %s ended (%s); start a new one", f.GetId(), f.GetStatus()), MetaHTTPStatus, "410")
}

func flowAAD(id string) []byte { return []byte("oauth-flow:" + id) }

func (a *Admin) sealFlow(f *busv1.OAuthFlow, sec *busv1.OAuthFlowSecrets) error {
	plain, err := proto.Marshal(sec)
	if err != nil {
		return internal("encode flow secrets")
	}
	if f.SealedSecrets, err = a.logins.Box.Seal(plain, flowAAD(f.GetId())); err != nil {
		return internal("seal flow secrets")
	}
	return nil
}

func (a *Admin) openFlow(f *busv1.OAuthFlow) (*busv1.OAuthFlowSecrets, error) {
	plain, err := a.logins.Box.Open(f.GetSealedSecrets(), flowAAD(f.GetId()))
	if err != nil {
		a.log.Error("opening OAuth flow secrets failed", "flow", f.GetId(), "err", err)
		return nil, internal("flow secrets cannot be opened")
	}
	sec := &busv1.OAuthFlowSecrets{}
	if err := proto.Unmarshal(plain, sec); err != nil {
		return nil, internal("flow secrets cannot be decoded")
	}
	return sec, nil
}

// flowProxy is a login's proxy: sealed with its secrets, or in plain text
// on a flow an earlier release started.
func flowProxy(f *busv1.OAuthFlow, sec *busv1.OAuthFlowSecrets) string {
	if sec.GetProxyUrl() != "" {
		return sec.GetProxyUrl()
	}
	return f.GetProxyUrl()
}

func (a *Admin) validProxy(raw string) error {
	if raw != "" && !validURL(raw, "http", "https", "socks5", "socks5h") {
		return invalidParam("proxyUrl", "invalid_proxy_url", "proxyUrl must be an http(s) or socks5 URL")
	}
	return nil
}

// newFlow stores a login in progress.
func (a *Admin) newFlow(ctx context.Context, f *busv1.OAuthFlow, sec *busv1.OAuthFlowSecrets) error {
	if err := a.sealFlow(f, sec); err != nil {
		return err
	}
	if err := a.store.OAuthFlows.Create(ctx, f.GetId(), f); err != nil {
		return a.storeError(err)
	}
	return nil
}

// StartDeviceLogin asks the provider for a device code and keeps the flow
// in sb_oauth_flows.
func (a *Admin) StartDeviceLogin(ctx context.Context, req *corev1.StartDeviceLoginRequest) (*corev1.StartDeviceLoginResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := a.loginProvider(req.GetProvider(), oauth.FlowDevice)
	if err != nil {
		return nil, err
	}
	// The request is checked whole before the provider is asked for a
	// code: a refused login leaves nothing behind, at the provider either.
	if err := nameLength("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := a.validProxy(req.GetProxyUrl()); err != nil {
		return nil, err
	}
	client, err := a.oauthClient(p.DeviceURL, req.GetProxyUrl())
	if err != nil {
		return nil, err
	}
	var verifier, challenge string
	if p.PKCE {
		verifier = oauth.NewVerifier()
		challenge = oauth.Challenge(verifier)
	}
	dc, err := oauth.DeviceAuthorize(ctx, client, p, challenge)
	if err != nil {
		return nil, providerError("device authorization", err)
	}
	now := a.now()
	expires := now.Add(time.Duration(dc.ExpiresIn) * time.Second)
	f := &busv1.OAuthFlow{
		Id:           newFlowID(expires),
		MachineId:    machineID,
		Provider:     p.ID,
		Kind:         flowKindDevice,
		CreatedAt:    timestamppb.New(now),
		ExpiresAt:    timestamppb.New(expires),
		Interval:     int32(dc.Interval),
		Status:       flowPending,
		ConnectionId: uuid.NewString(),
		Name:         cmpOr(req.GetName(), p.ID),
	}
	if err := a.newFlow(ctx, f, &busv1.OAuthFlowSecrets{DeviceCode: dc.DeviceCode, CodeVerifier: verifier, ProxyUrl: req.GetProxyUrl()}); err != nil {
		return nil, err
	}
	a.log.Info("oauth device login started", "machine", machineID, "provider", p.ID, "flow", f.Id)
	return &corev1.StartDeviceLoginResponse{
		FlowId: f.Id, Provider: p.ID,
		UserCode: dc.UserCode, VerificationUri: dc.VerificationURI, VerificationUriComplete: dc.VerificationURIComplete,
		ExpiresIn: int32(dc.ExpiresIn), Interval: int32(dc.Interval),
	}, nil
}

// PollDeviceLogin polls the provider's token endpoint for a device login.
// One poll at a time holds the flow (a lease taken with compare-and-swap);
// concurrent polls wait for its outcome, so the connection is created once.
func (a *Admin) PollDeviceLogin(ctx context.Context, req *corev1.PollDeviceLoginRequest) (*corev1.PollDeviceLoginResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := a.loginProvider(req.GetProvider(), oauth.FlowDevice)
	if err != nil {
		return nil, err
	}
	if req.GetFlowId() == "" {
		return nil, missingParam("flowId")
	}
	f, claimed, err := a.claimFlow(ctx, machineID, p.ID, flowKindDevice, req.GetFlowId())
	if errors.Is(err, errFlowForgotten) {
		return &corev1.PollDeviceLoginResponse{Status: flowExpired, FlowId: req.GetFlowId(), Error: oauth.CodeExpiredToken}, nil
	}
	if err != nil {
		return nil, err
	}
	answer := func(f *busv1.OAuthFlow, status string) *corev1.PollDeviceLoginResponse {
		return &corev1.PollDeviceLoginResponse{Status: status, FlowId: f.GetId(), Interval: f.GetInterval(), Error: f.GetError()}
	}
	if !claimed {
		if f.GetStatus() != flowComplete {
			return nil, flowGone(f)
		}
		out := answer(f, flowComplete)
		out.Connection = a.loginConnection(machineID, f)
		out.Renewed = f.GetRenewedConnectionId() != ""
		return out, nil
	}
	if a.now().After(f.GetExpiresAt().AsTime()) {
		f, err = a.settleFlow(ctx, f.GetId(), func(f *busv1.OAuthFlow) { f.Status, f.Error = flowExpired, oauth.CodeExpiredToken })
		if err != nil {
			return nil, err
		}
		return answer(f, flowExpired), nil
	}
	ctx, cancel := a.claimedContext(ctx)
	defer cancel()
	sec, err := a.openFlow(f)
	if err != nil {
		_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
		return nil, err
	}
	client, err := a.oauthClient(p.TokenURL, flowProxy(f, sec))
	if err != nil {
		_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
		return nil, err
	}
	tok, err := oauth.PollToken(ctx, client, p, sec.GetDeviceCode(), sec.GetCodeVerifier())
	if err != nil {
		code := oauth.ErrorCode(err)
		var status string
		var change func(*busv1.OAuthFlow)
		switch code {
		case oauth.CodePending:
			status, change = flowPending, func(*busv1.OAuthFlow) {}
		case oauth.CodeSlowDown:
			// RFC 8628 section 3.5: add 5 seconds to the interval.
			status, change = pollSlowDown, func(f *busv1.OAuthFlow) { f.Interval += 5 }
		case oauth.CodeExpiredToken:
			status, change = flowExpired, func(f *busv1.OAuthFlow) { f.Status, f.Error = flowExpired, code }
		case oauth.CodeAccessDenied:
			status, change = flowDenied, func(f *busv1.OAuthFlow) { f.Status, f.Error = flowDenied, code }
		default:
			_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
			return nil, providerError("token endpoint", err)
		}
		f, err = a.settleFlow(ctx, f.GetId(), change)
		if err != nil {
			return nil, err
		}
		return answer(f, status), nil
	}
	c, err := a.completeLogin(ctx, f, flowProxy(f, sec), p, tok)
	if err != nil {
		return nil, err
	}
	out := answer(f, flowComplete)
	out.Connection = a.view(c)
	out.Renewed = c.GetId() != f.GetConnectionId()
	out.Error = ""
	return out, nil
}

// StartAuthorizationLogin prepares an authorization-code login with PKCE
// and answers the URL to open. The OAuth state is the flow id.
func (a *Admin) StartAuthorizationLogin(ctx context.Context, req *corev1.StartAuthorizationLoginRequest) (*corev1.StartAuthorizationLoginResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := a.loginProvider(req.GetProvider(), oauth.FlowAuthorizationCode)
	if err != nil {
		return nil, err
	}
	if err := nameLength("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := a.validProxy(req.GetProxyUrl()); err != nil {
		return nil, err
	}
	redirect := p.RedirectURI
	if req.GetRedirectUri() != "" {
		if !loopbackURL(req.GetRedirectUri()) {
			return nil, invalidParam("redirectUri", "invalid_redirect_uri", "redirectUri must be an http URL on a loopback address")
		}
		redirect = req.GetRedirectUri()
	}
	var verifier, challenge string
	if p.PKCE {
		verifier = oauth.NewVerifier()
		challenge = oauth.Challenge(verifier)
	}
	now := a.now()
	f := &busv1.OAuthFlow{
		Id:           newFlowID(now.Add(authorizationTTL)),
		MachineId:    machineID,
		Provider:     p.ID,
		Kind:         flowKindCode,
		CreatedAt:    timestamppb.New(now),
		ExpiresAt:    timestamppb.New(now.Add(authorizationTTL)),
		Status:       flowPending,
		ConnectionId: uuid.NewString(),
		Name:         cmpOr(req.GetName(), p.ID),
		RedirectUri:  redirect,
	}
	if err := a.newFlow(ctx, f, &busv1.OAuthFlowSecrets{CodeVerifier: verifier, ProxyUrl: req.GetProxyUrl()}); err != nil {
		return nil, err
	}
	a.log.Info("oauth authorization login started", "machine", machineID, "provider", p.ID, "flow", f.Id)
	return &corev1.StartAuthorizationLoginResponse{
		FlowId: f.Id, Provider: p.ID, State: f.Id, RedirectUri: redirect,
		AuthorizeUrl: oauth.AuthorizeURL(p, f.Id, challenge, redirect),
		ExpiresIn:    int32(authorizationTTL / time.Second),
	}, nil
}

// CompleteAuthorizationLogin exchanges the authorization code and creates
// the connection (201), or renews an existing one (200, completeLogin); a
// repeated call answers the same connection.
func (a *Admin) CompleteAuthorizationLogin(ctx context.Context, req *corev1.CompleteAuthorizationLoginRequest) (*corev1.CompleteAuthorizationLoginResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := a.loginProvider(req.GetProvider(), oauth.FlowAuthorizationCode)
	if err != nil {
		return nil, err
	}
	code, state := req.GetCode(), req.GetState()
	if c, s, ok := strings.Cut(code, "#"); ok {
		code = c
		if state == "" {
			state = s
		}
	}
	flowID := cmpOr(req.GetFlowId(), state)
	if flowID == "" {
		return nil, missingParam("flowId")
	}
	if code == "" {
		return nil, missingParam("code")
	}
	if state != "" && state != flowID {
		return nil, invalidParam("state", "state_mismatch", "state does not belong to this login")
	}
	f, claimed, err := a.claimFlow(ctx, machineID, p.ID, flowKindCode, flowID)
	if errors.Is(err, errFlowForgotten) {
		return nil, flowGone(&busv1.OAuthFlow{Id: flowID, Status: flowExpired})
	}
	if err != nil {
		return nil, err
	}
	if !claimed {
		if f.GetStatus() != flowComplete {
			return nil, flowGone(f)
		}
		return &corev1.CompleteAuthorizationLoginResponse{Connection: a.loginConnection(machineID, f), Renewed: f.GetRenewedConnectionId() != ""}, nil
	}
	if a.now().After(f.GetExpiresAt().AsTime()) {
		f, err = a.settleFlow(ctx, f.GetId(), func(f *busv1.OAuthFlow) { f.Status = flowExpired })
		if err != nil {
			return nil, err
		}
		return nil, flowGone(f)
	}
	lctx, cancel := a.claimedContext(ctx)
	defer cancel()
	sec, err := a.openFlow(f)
	if err != nil {
		_, _ = a.settleFlow(lctx, f.GetId(), func(*busv1.OAuthFlow) {})
		return nil, err
	}
	client, err := a.oauthClient(p.TokenURL, flowProxy(f, sec))
	if err != nil {
		_, _ = a.settleFlow(lctx, f.GetId(), func(*busv1.OAuthFlow) {})
		return nil, err
	}
	tok, err := oauth.ExchangeCode(lctx, client, p, code, sec.GetCodeVerifier(), f.GetRedirectUri(), f.GetId())
	if err != nil {
		// The flow stays pending: a mistyped code may be sent again.
		_, _ = a.settleFlow(lctx, f.GetId(), func(*busv1.OAuthFlow) {})
		var oe *oauth.Error
		if errors.As(err, &oe) && oe.Status >= 400 && oe.Status < 500 {
			return nil, invalidParam("code", "oauth_exchange_failed", "the provider refused the authorization code: "+oe.Error())
		}
		return nil, providerError("code exchange", err)
	}
	c, err := a.completeLogin(lctx, f, flowProxy(f, sec), p, tok)
	if err != nil {
		return nil, err
	}
	renewed := c.GetId() != f.GetConnectionId()
	if !renewed {
		created(ctx)
	}
	return &corev1.CompleteAuthorizationLoginResponse{Connection: a.view(c), Renewed: renewed}, nil
}

// claimFlow takes the flow's lease. When the flow is no longer pending it
// returns it unclaimed; while another call holds the lease it waits for that
// call's outcome. A login whose record is gone is errFlowForgotten.
func (a *Admin) claimFlow(ctx context.Context, machineID, providerID, kind, id string) (*busv1.OAuthFlow, bool, error) {
	for {
		changed := a.store.OAuthFlows.Changed()
		e, ok := a.store.OAuthFlows.Get(id)
		if !ok {
			return nil, false, a.missingFlow(id)
		}
		if e.Value.GetMachineId() != machineID || e.Value.GetProvider() != providerID || e.Value.GetKind() != kind {
			return nil, false, flowNotFound(id)
		}
		f := e.Value
		if f.GetStatus() != flowPending {
			return f, false, nil
		}
		now := a.now()
		if until := f.GetLeaseUntil(); until != nil && until.AsTime().After(now) {
			t := time.NewTimer(until.AsTime().Sub(now))
			select {
			case <-changed:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, false, ctx.Err()
			}
			t.Stop()
			continue
		}
		next, err := a.store.OAuthFlows.Modify(ctx, id, func(f *busv1.OAuthFlow) error {
			if f.GetStatus() != flowPending {
				return errFlowBusy
			}
			if until := f.GetLeaseUntil(); until != nil && until.AsTime().After(now) {
				return errFlowBusy
			}
			f.LeaseUntil = timestamppb.New(now.Add(flowLease))
			return nil
		})
		switch {
		case errors.Is(err, errFlowBusy):
			continue
		case errors.Is(err, kvmirror.ErrNotFound):
			return nil, false, a.missingFlow(id)
		case err != nil:
			return nil, false, a.storeError(err)
		}
		return next, true, nil
	}
}

// claimedContext is the context a claimed login's calls run on, from the
// call to the provider's token endpoint to the connection's write: not the
// caller's, with a bound of its own (the lease's). The provider may spend
// the device or authorization code and hand over the tokens at any point of
// its answer; a caller that leaves then would lose them, the code with
// them, and have to start the login again. Run to its end, the login leaves
// its connection, which the caller's next poll or exchange answers. It
// still ends when the process starts shutting down (EndLoginsWith), so a
// provider that does not answer cannot hold the shutdown.
func (a *Admin) claimedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flowLease)
	if a.serving == nil {
		return cctx, cancel
	}
	stop := context.AfterFunc(a.serving, cancel)
	return cctx, func() { stop(); cancel() }
}

// EndLoginsWith makes the logins in flight end when serving ends: the
// process's signal to shut down, given before it serves.
func (a *Admin) EndLoginsWith(serving context.Context) { a.serving = serving }

// settleFlow applies change to a claimed flow and releases its lease. It
// runs even when the caller has gone, so the lease does not linger.
func (a *Admin) settleFlow(ctx context.Context, id string, change func(*busv1.OAuthFlow)) (*busv1.OAuthFlow, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	f, err := a.store.OAuthFlows.Modify(ctx, id, func(f *busv1.OAuthFlow) error {
		change(f)
		f.LeaseUntil = nil
		return nil
	})
	if errors.Is(err, kvmirror.ErrNotFound) {
		return nil, flowNotFound(id)
	}
	if err != nil {
		return nil, a.storeError(err)
	}
	return f, nil
}

// completeLogin turns a login's tokens into its connection and marks the
// flow complete. A login that renews a connection (renewable) replaces its
// tokens and OAuth state, under the next token generation, and keeps its
// id and settings; any other creates its connection once, under the id the
// flow chose at its start.
func (a *Admin) completeLogin(ctx context.Context, f *busv1.OAuthFlow, proxyURL string, p oauth.Provider, tok oauth.Token) (*busv1.Connection, error) {
	now := a.now()
	// named is the API host the login's answer names, which wins over the
	// provider's and over a renewed connection's.
	var named string
	if p.ResourceURL && tok.ResourceURL != "" {
		if u, ok := resourceBaseURL(tok.ResourceURL); ok {
			named = u
		}
	}
	values := p.Values(tok)
	sec := &busv1.Secrets{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}
	// The login has just issued the tokens: their life is known, so the
	// scheduler refreshes a short-lived one halfway, as after a refresh.
	st := &busv1.OAuthState{TokenUrl: p.TokenURL, ClientId: p.ClientID, RefreshedAt: timestamppb.New(now), LoginFlow: f.GetId()}
	if tok.ExpiresIn > 0 {
		st.ExpiresAt = timestamppb.New(now.Add(time.Duration(tok.ExpiresIn) * time.Second))
	}
	if p.CopilotTokenURL != "" {
		// The GitHub token is the refresh material; the Copilot token,
		// exchanged from it, is what the API takes.
		client, err := a.oauthClient(p.CopilotTokenURL, proxyURL)
		if err != nil {
			_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
			return nil, err
		}
		ct, err := oauth.ExchangeCopilotToken(ctx, client, p, tok.AccessToken)
		if err != nil {
			_, _ = a.settleFlow(ctx, f.GetId(), func(f *busv1.OAuthFlow) { f.Status, f.Error = flowDenied, "copilot_token_exchange_failed" })
			return nil, providerError("Copilot token exchange", err)
		}
		sec = &busv1.Secrets{AccessToken: ct.Token, RefreshToken: tok.AccessToken}
		st.TokenUrl = p.CopilotTokenURL
		st.ExpiresAt = nil
		if !ct.ExpiresAt.IsZero() {
			st.ExpiresAt = timestamppb.New(ct.ExpiresAt)
		}
		if ct.APIURL != "" && validURL(ct.APIURL, "https", "http") {
			named = strings.TrimRight(ct.APIURL, "/")
		}
	}
	sec.ProxyUrl = proxyURL
	c, err := a.renewConnection(ctx, f, p, values, named, sec, st)
	if err != nil {
		_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
		return nil, err
	}
	if c == nil {
		if c, err = a.createLoginConnection(ctx, f, p, values, cmpOr(named, p.BaseURL), sec, st); err != nil {
			_, _ = a.settleFlow(ctx, f.GetId(), func(*busv1.OAuthFlow) {})
			return nil, err
		}
	}
	_, err = a.settleFlow(ctx, f.GetId(), func(done *busv1.OAuthFlow) {
		done.Status, done.Error = flowComplete, ""
		if c.GetId() != f.GetConnectionId() {
			done.RenewedConnectionId = c.GetId()
		}
	})
	if err != nil {
		a.log.Warn("oauth flow not marked complete", "flow", f.GetId(), "err", err)
	}
	return c, nil
}

// createLoginConnection creates a login's connection under the id its flow
// chose at its start.
func (a *Admin) createLoginConnection(ctx context.Context, f *busv1.OAuthFlow, p oauth.Provider, values map[string]string, baseURL string, sec *busv1.Secrets, st *busv1.OAuthState) (*busv1.Connection, error) {
	now := a.now()
	c := &busv1.Connection{
		Id:        f.GetConnectionId(),
		MachineId: f.GetMachineId(),
		Provider:  p.ID,
		Name:      f.GetName(),
		Priority:  1,
		IsActive:  true,
		Data:      &busv1.ProviderData{BaseUrl: baseURL, Values: values},
		Oauth:     st,
		CreatedAt: timestamppb.New(now),
		UpdatedAt: timestamppb.New(now),
	}
	if err := a.seal(c, sec); err != nil {
		return nil, err
	}
	key := store.ConnectionKey(c.GetMachineId(), c.GetId())
	switch err := a.store.Connections.Create(ctx, key, c); {
	case errors.Is(err, kvmirror.ErrExists):
		// A completion that lost its lease got here first: keep its
		// connection.
		if e, ok := a.store.Connections.Get(key); ok {
			c = e.Value
		}
	case err != nil:
		return nil, a.storeError(err)
	default:
		a.log.Info("connection created by oauth login", "machine", c.GetMachineId(), "connection", c.GetId(), "provider", c.GetProvider(), "flow", f.GetId())
	}
	return c, nil
}

// loginConnection is the connection a completed flow created or renewed,
// or nil when it has been deleted since.
func (a *Admin) loginConnection(machineID string, f *busv1.OAuthFlow) *corev1.Connection {
	if e, ok := a.store.Connections.Get(store.ConnectionKey(machineID, cmpOr(f.GetRenewedConnectionId(), f.GetConnectionId()))); ok {
		return a.view(e.Value)
	}
	return nil
}

// resourceBaseURL turns a token answer's resource_url ("portal.qwen.ai" or
// a full URL) into an OpenAI-style base URL ending in /v1 when it names no
// path.
func resourceBaseURL(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", false
	}
	u.RawQuery, u.Fragment = "", ""
	if p := strings.TrimRight(u.Path, "/"); p == "" {
		u.Path = "/v1"
	} else {
		u.Path = p
	}
	return u.String(), true
}

// loopbackURL reports whether raw is an http URL on a loopback host.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func cmpOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
