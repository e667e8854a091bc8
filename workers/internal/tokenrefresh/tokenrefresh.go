// Package tokenrefresh refreshes a connection's OAuth tokens: it takes the
// refresh material from core, renews the access token by its provider's
// refresh method (internal/oauth: the refresh-token grant of RFC 6749
// section 6, or GitHub Copilot's token exchange) at the connection's token
// URL through the connection's proxy, and writes the new tokens back to core
// with compare-and-swap on the token generation. Refresh material the
// provider refused for good marks the connection as needing a new login.
package tokenrefresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// JobTimeout bounds one job: reading the material, the grant, and storing
// the result with its retries.
const JobTimeout = GrantTimeout + 20*time.Second

// Storing new tokens in core is retried until shortly before the job's
// deadline: once the provider has rotated the refresh token, losing the
// answer means a new login, so a core restart or a NATS leader election on
// the way back is worth waiting out.
const (
	// storeBudget bounds the retries of a job without a deadline.
	storeBudget = JobTimeout - GrantTimeout
	// storeReserve is what the retries leave of the job's time, to keep
	// the tokens for a later attempt and give the lease back; the job is
	// redelivered only 10 s past its deadline.
	storeReserve = 2 * time.Second
	// storeAttemptTimeout bounds one call, so that a core that hangs (its
	// store waiting for a NATS leader) is asked again.
	storeAttemptTimeout = 5 * time.Second
	// storeMaxBackoff bounds the pause between attempts.
	storeMaxBackoff = 2 * time.Second
)

// Admin is the part of core's admin API a refresh needs.
type Admin interface {
	GetConnectionCredentials(ctx context.Context, in *corev1.GetConnectionCredentialsRequest, opts ...grpc.CallOption) (*corev1.GetConnectionCredentialsResponse, error)
	StoreTokens(ctx context.Context, in *corev1.StoreTokensRequest, opts ...grpc.CallOption) (*corev1.StoreTokensResponse, error)
}

var _ Admin = (corev1.AdminClient)(nil)

// Refresher handles token-refresh jobs.
type Refresher struct {
	admin      Admin
	adminToken string
	clients    *upstream.Clients
	log        *slog.Logger
	now        func() time.Time
	// storeBackoff is the first pause between StoreTokens attempts.
	storeBackoff time.Duration
	// refreshing shares one refresh of a connection's token generation
	// between the jobs that ask for it together (see Handle).
	refreshing singleflight.Group
	// turns lets one refresh of a connection run at a time in this
	// process, the refreshes of different generations included: each
	// connection with a refresh running or waiting has a turn of its own
	// here (under turnsMu), dropped once none does.
	turnsMu sync.Mutex
	turns   map[string]*turn
	// leases, when set, keep a connection's refresh to one process.
	leases Leases
	holder string
	// box seals the tokens kept for a later attempt (pending.go).
	box *secrets.Box
	// providers, when set, are the OAuth login table in effect: the
	// client secrets the operator configured (clientSecret).
	providers *oauth.Providers
}

// WithProviders gives the refresher the OAuth login table in effect, the
// one core's logins use: a client secret configured for a provider
// (SWITCHBOARD_OAUTH_<PROVIDER>_CLIENT_SECRET) is sent with the refresh
// grants of its connections, as the logins send it, since a provider that
// needed it to sign the operator in refuses refreshes without it.
func (r *Refresher) WithProviders(ps *oauth.Providers) *Refresher {
	r.providers = ps
	return r
}

// clientSecret is the configured client secret a connection's refresh is
// sent with, or "". The secret is the operator's, for the provider's own
// client at its own token endpoint: a connection naming another client or
// token URL (tokens stored through the admin API, which may name any) never
// gets it, so it cannot be drawn to an endpoint of a caller's choosing.
func (r *Refresher) clientSecret(creds *corev1.GetConnectionCredentialsResponse) string {
	if r.providers == nil {
		return ""
	}
	p, ok := r.providers.Lookup(creds.GetConnection().GetProvider())
	if !ok || p.ClientSecret == "" || p.RefreshMethod() != oauth.RefreshGrant {
		return ""
	}
	if creds.GetClientId() != p.ClientID || creds.GetTokenUrl() != p.TokenURL {
		return ""
	}
	return p.ClientSecret
}

// WithLeases makes the refresher take a connection's lease from leases,
// as holder (this process), before each refresh, so that workers of
// several processes never refresh one connection at once.
func (r *Refresher) WithLeases(leases Leases, holder string) *Refresher {
	r.leases, r.holder = leases, holder
	return r
}

// NewClients returns the clients token grants go through: no redirects
// (they would carry the refresh token elsewhere), a few idle connections.
func NewClients() *upstream.Clients {
	return upstream.NewClients(upstream.Options{Connect: 5 * time.Second, FirstByte: GrantTimeout, IdlePerHost: 2, NoRedirects: true})
}

// New returns a Refresher that reaches token endpoints with clients.
func New(admin Admin, adminToken string, clients *upstream.Clients, log *slog.Logger) *Refresher {
	r := &Refresher{
		admin:        admin,
		adminToken:   adminToken,
		clients:      clients,
		log:          log,
		now:          time.Now,
		storeBackoff: 250 * time.Millisecond,
		box:          pendingBox(adminToken),
		turns:        make(map[string]*turn),
	}
	return r
}

// turn is one connection's turn: run holds a token while one of its
// refreshes runs, and users counts its refreshes running or waiting.
type turn struct {
	run   chan struct{}
	users int
}

// turn waits until no other refresh of key runs in this process, or ctx
// ends, and returns the function that ends this one's turn. Refreshes of
// other connections never wait for it.
func (r *Refresher) turn(ctx context.Context, key string) (func(), error) {
	r.turnsMu.Lock()
	t := r.turns[key]
	if t == nil {
		t = &turn{run: make(chan struct{}, 1)}
		r.turns[key] = t
	}
	t.users++
	r.turnsMu.Unlock()
	select {
	case t.run <- struct{}{}:
		return func() {
			<-t.run
			r.leave(key, t)
		}, nil
	case <-ctx.Done():
		r.leave(key, t)
		return nil, ctx.Err()
	}
}

// leave drops a refresh from key's turn, and the turn once no refresh
// uses it.
func (r *Refresher) leave(key string, t *turn) {
	r.turnsMu.Lock()
	defer r.turnsMu.Unlock()
	if t.users--; t.users == 0 {
		delete(r.turns, key)
	}
}

// Handle performs one job. It returns nil when the job is done: tokens
// stored, a refusal recorded, or nothing to do (the connection is gone, or
// another refresh already moved its generation on). An error means a retry
// may succeed (the endpoint or core was unreachable, rate limited or
// failing), and the job should be redelivered.
func (r *Refresher) Handle(ctx context.Context, job *busv1.TokenRefreshJob) error {
	ctx = metadata.AppendToOutgoingContext(ctx,
		"authorization", "Bearer "+r.adminToken,
		contract.MDMachine, job.GetMachineId())
	id := job.GetConnectionId()
	// Two jobs of one connection at once (a copy enqueued after the job
	// de-duplication window while the first kept failing, a redelivery
	// while it still runs) would present the same refresh token twice, and
	// providers that detect reuse revoke the whole login for it: the second
	// shares the first's refresh and its outcome within one worker
	// process, and the lease keeps other processes out meanwhile (their
	// job is retried, and finds the refresh done). A job of a later
	// generation (the refreshed token refused in its turn) is a refresh of
	// its own: it waits for the one running, lease given back included,
	// and then runs.
	key := job.GetMachineId() + "/" + id
	flight := key + "/" + strconv.FormatUint(job.GetGeneration(), 10)
	_, err, _ := r.refreshing.Do(flight, func() (any, error) {
		done, err := r.turn(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("refresh %s: %w", id, err)
		}
		defer done()
		if r.leases != nil {
			ttl := spine.RefreshLeaseTTL
			if d, ok := ctx.Deadline(); ok {
				ttl = time.Until(d) + leaseMargin
			}
			release, err := r.leases.Acquire(ctx, job.GetMachineId()+"."+id, r.holder, ttl)
			if err != nil {
				return nil, fmt.Errorf("refresh %s: %w", id, err)
			}
			lapses := time.Now().Add(ttl)
			err = r.handle(ctx, job)
			if un := (*Unanswered)(nil); errors.As(err, &un) {
				// The endpoint may still be working on the grant: the
				// lease lapses in its time instead, so that no retry
				// presents the refresh token before it is done.
				r.log.Warn("refresh lease kept until it lapses: the token endpoint was sent the refresh token and did not answer",
					"connection", id, "machine", job.GetMachineId(), "lapses_at", lapses)
				return nil, err
			}
			release(ctx)
			return nil, err
		}
		return nil, r.handle(ctx, job)
	})
	return err
}

// handle performs one job of connection job.GetConnectionId() (Handle).
func (r *Refresher) handle(ctx context.Context, job *busv1.TokenRefreshJob) error {
	id := job.GetConnectionId()
	creds, err := r.admin.GetConnectionCredentials(ctx, &corev1.GetConnectionCredentialsRequest{ConnectionId: id})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil // the connection is gone
		}
		return fmt.Errorf("credentials of %s: %w", id, err)
	}
	conn := creds.GetConnection()
	gen := creds.GetGeneration()
	log := r.log.With("connection", id, "machine", job.GetMachineId(), "generation", gen)
	switch {
	case conn.GetAuthType() != "oauth":
		log.Debug("token refresh skipped: not an OAuth connection")
		return nil
	case job.GetGeneration() < gen:
		log.Debug("token refresh skipped: already refreshed", "job_generation", job.GetGeneration())
		return nil
	case conn.GetNeedsRelogin():
		log.Debug("token refresh skipped: connection needs a new login")
		return nil
	case creds.GetRefreshToken() == "":
		return r.refused(ctx, log, id, gen, "no refresh token is stored; sign in again")
	case creds.GetTokenUrl() == "":
		return r.refused(ctx, log, id, gen, "no token URL is configured; sign in again")
	}

	// Tokens an earlier attempt was answered but could not store are
	// stored now: the refresh token they replace may be spent already.
	pending, pkey := r.pendingTokens(), pendingKey(job.GetMachineId(), id, gen)
	req, err := r.kept(ctx, log, pending, pkey, creds)
	if err != nil {
		// Whether the provider answered an earlier attempt is unknown:
		// presenting the refresh token now could present it twice.
		return fmt.Errorf("refresh %s: %w", id, err)
	}
	method := oauth.RefreshMethodOf(conn.GetProvider())
	start := r.now()
	if req == nil {
		renew, ok := renewers[method]
		if !ok {
			return r.failed(ctx, log, id, gen, "token refresh not attempted: unknown refresh method "+string(method))
		}
		client, err := r.clients.For(creds.GetTokenUrl(), creds.GetProxyUrl())
		if err != nil {
			// A broken proxy setting fails every retry alike: record it.
			return r.failed(ctx, log, id, gen, "token refresh not attempted: "+err.Error())
		}
		tokens, err := renew(ctx, client, creds, r.clientSecret(creds))
		if err != nil {
			var oe *Error
			if errors.As(err, &oe) {
				// The code is the endpoint's choice, logged, recorded on
				// the connection and shown: one echoing a secret it was
				// sent goes hidden.
				oe.Code = secrets.HideRuns(oe.Code, creds.GetRefreshToken(), creds.GetAccessToken(), r.clientSecret(creds))
			}
			switch {
			case errors.As(err, &oe) && oe.Relogin():
				return r.refused(ctx, log, id, gen, "refresh token refused: "+oe.Error()+"; sign in again")
			case errors.As(err, &oe) && !oe.Temporary():
				return r.failed(ctx, log, id, gen, "token refresh failed: "+oe.Error())
			case jobs.LastAttempt(ctx):
				// No attempt follows: the connection says why its token
				// was not refreshed, not the log alone.
				recorded := r.failed(ctx, log, id, gen, "token refresh failed on its last attempt: "+err.Error())
				if un := (*Unanswered)(nil); !errors.As(err, &un) {
					return recorded
				}
				// The endpoint may still be at work on the grant: the
				// error keeps the lease until it lapses (Handle).
			}
			return fmt.Errorf("refresh %s: %w", id, err)
		}
		req = &corev1.StoreTokensRequest{
			ConnectionId: id,
			Generation:   gen,
			AccessToken:  tokens.AccessToken,
			RefreshToken: tokens.RefreshToken, // empty keeps the stored one
		}
		switch {
		case !tokens.ExpiresAt.IsZero():
			req.ExpiresAt = timestamppb.New(tokens.ExpiresAt)
		case tokens.ExpiresIn > 0:
			req.ExpiresAt = timestamppb.New(start.Add(tokens.ExpiresIn))
		}
		r.keep(ctx, log, pending, pkey, creds, req)
	}

	res, err := r.store(ctx, req)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			r.forgetPending(ctx, log, pending, pkey)
			return nil
		}
		log.Error("refreshed tokens could not be stored", "err", err, "kept", pending != nil)
		return fmt.Errorf("store tokens of %s: %w", id, err)
	}
	r.forgetPending(ctx, log, pending, pkey)
	if !res.GetStored() {
		log.Info("refreshed tokens dropped: another refresh won", "current_generation", res.GetGeneration())
		return nil
	}
	log.Info("tokens refreshed", "method", method, "new_generation", res.GetGeneration(),
		"rotated", req.GetRefreshToken() != "", "expires_at", req.GetExpiresAt().AsTime(), "took", r.now().Sub(start))
	return nil
}

// kept opens the tokens an earlier attempt was answered but could not
// store, kept under pkey: nil when there are none, or when they belong to
// other material than creds (they are then forgotten). An error is one of
// reading them.
func (r *Refresher) kept(ctx context.Context, log *slog.Logger, pending PendingTokens, pkey string, creds *corev1.GetConnectionCredentialsResponse) (*corev1.StoreTokensRequest, error) {
	if pending == nil {
		return nil, nil
	}
	sealed, err := pending.Pending(ctx, pkey)
	if err != nil || sealed == nil {
		return nil, err
	}
	req, err := r.openPending(pkey, creds, sealed)
	if err != nil {
		log.Warn("kept tokens dropped: they do not belong to the stored tokens", "err", err)
		r.forgetPending(ctx, log, pending, pkey)
		return nil, nil
	}
	log.Info("storing the tokens an earlier attempt was answered")
	return req, nil
}

// keep seals req's tokens under pkey for a later attempt, should storing
// them fail; a failure to keep them is logged, and the refresh goes on.
func (r *Refresher) keep(ctx context.Context, log *slog.Logger, pending PendingTokens, pkey string, creds *corev1.GetConnectionCredentialsResponse, req *corev1.StoreTokensRequest) {
	if pending == nil {
		return
	}
	sealed, err := r.sealPending(pkey, creds, req)
	if err == nil {
		err = pending.PutPending(ctx, pkey, sealed)
	}
	if err != nil {
		log.Warn("refreshed tokens not kept for a later attempt", "err", err)
	}
}

// pendingTokens is where tokens are kept for a later attempt: the leases,
// when they can; nil when nowhere.
func (r *Refresher) pendingTokens() PendingTokens {
	p, _ := r.leases.(PendingTokens)
	return p
}

// forgetPending deletes key's kept tokens, once stored or moot; left
// behind, PendingTTL removes them, and they open against no other material.
func (r *Refresher) forgetPending(ctx context.Context, log *slog.Logger, pending PendingTokens, key string) {
	if pending == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := pending.DeletePending(ctx, key); err != nil {
		log.Warn("kept tokens not forgotten", "err", err)
	}
}

// refused marks the connection as needing a new login, with a secret-free
// reason.
func (r *Refresher) refused(ctx context.Context, log *slog.Logger, id string, gen uint64, reason string) error {
	log.Warn("token refresh refused, connection needs a new login", "reason", reason)
	return r.record(ctx, &corev1.StoreTokensRequest{ConnectionId: id, Generation: gen, Error: reason, NeedsRelogin: true})
}

// failed records a refresh failure that a retry would repeat, leaving the
// connection in use.
func (r *Refresher) failed(ctx context.Context, log *slog.Logger, id string, gen uint64, reason string) error {
	log.Warn("token refresh failed", "reason", reason)
	return r.record(ctx, &corev1.StoreTokensRequest{ConnectionId: id, Generation: gen, Error: reason})
}

func (r *Refresher) record(ctx context.Context, req *corev1.StoreTokensRequest) error {
	if _, err := r.store(ctx, req); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("record refresh failure of %s: %w", req.GetConnectionId(), err)
	}
	return nil
}

// store calls StoreTokens, retrying while core is unavailable until
// storeReserve before ctx's deadline (storeBudget without one).
func (r *Refresher) store(ctx context.Context, req *corev1.StoreTokensRequest) (*corev1.StoreTokensResponse, error) {
	stop := time.Now().Add(storeBudget)
	if d, ok := ctx.Deadline(); ok {
		stop = d.Add(-storeReserve)
	}
	wait := r.storeBackoff
	for {
		bound := storeAttemptTimeout
		if left := time.Until(stop); left > 0 && left < bound {
			bound = left
		}
		actx, cancel := context.WithTimeout(ctx, bound)
		res, err := r.admin.StoreTokens(actx, req)
		cancel()
		if err == nil || !retryable(err) || ctx.Err() != nil || time.Until(stop) < wait {
			return res, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, storeMaxBackoff)
	}
}

// retryable reports whether a failed call to core may succeed if repeated.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}
