// Package dispatch sends a gateway request to its upstream: it resolves the
// model to the machine's connections, opens their credentials, and lets the
// credential engine try them in order, refreshing OAuth tokens through the
// workers when an upstream rejects one.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// ErrUnsupportedProvider is returned when the model's provider does not
// offer the capability.
var ErrUnsupportedProvider = errors.New("provider does not support this capability")

// Conn is one connection ready to call: its record, its credential and the
// HTTP client for its upstream.
type Conn struct {
	Connection *busv1.Connection
	Spec       provider.Spec
	// BaseURL is the upstream address, normalised.
	BaseURL string
	// Credential is the API key, else the OAuth access token.
	Credential string
	Client     *http.Client
}

// Authorize sets the connection's credential on an upstream request.
func (c *Conn) Authorize(h http.Header) {
	c.Spec.AuthorizeWith(h, c.Credential, c.Connection.GetData().GetValues())
}

// Scrub removes the connection's credential from text that may be shown to
// a client (an upstream error body that echoes the key), in what a JSON
// parser reads of a JSON body or of a stream's data lines, however the
// upstream escaped it (secrets.Redact): so the error's message is clean
// before a route decodes it to answer in another dialect.
func (c *Conn) Scrub(b []byte) []byte { return secrets.Redact(b, c.Credential) }

var _ credential.Scrubber = (*Conn)(nil)

// Call makes one upstream call for the resolved target with one connection;
// see credential.Attempt for what it returns.
type Call func(ctx context.Context, t routing.Target, c *Conn) error

// Request is a gateway request to dispatch.
type Request struct {
	MachineID string
	Model     string
	// Supports filters the providers that offer the capability.
	Supports func(provider.Spec) bool
	// Prefer names a connection to try first while it is healthy (session
	// affinity).
	Prefer string
}

// Result tells who answered.
type Result struct {
	Target   routing.Target
	Conn     *Conn
	Attempts int
}

// Dispatcher dispatches requests.
type Dispatcher struct {
	store    *store.Store
	resolver *routing.Resolver
	engine   *credential.Engine
	vault    *vault.Vault
	clients  *upstream.Clients
	log      *slog.Logger

	jobs        TokenJobs
	refreshWait time.Duration

	metrics *Metrics          // nil: not counted (observe.go)
	tracer  *telemetry.Tracer // nil: not traced
}

// TokenJobs enqueues token refreshes (jobs.Publisher). queued is false when
// the queue dropped the job as a copy of the generation's job already
// queued.
type TokenJobs interface {
	QueueTokenRefresh(ctx context.Context, machineID, connectionID string, generation uint64) (queued bool, err error)
}

// New returns a Dispatcher. Token refreshes go to jobs; nil disables them.
func New(st *store.Store, resolver *routing.Resolver, cooldowns credential.Cooldowns, jobs TokenJobs,
	v *vault.Vault, clients *upstream.Clients, log *slog.Logger) *Dispatcher {
	d := &Dispatcher{
		store:       st,
		resolver:    resolver,
		vault:       v,
		clients:     clients,
		jobs:        jobs,
		refreshWait: RefreshWait,
		log:         log,
	}
	opts := []credential.Option{credential.WithLogger(log)}
	if jobs != nil {
		opts = append(opts, credential.WithRefresher(d))
	}
	d.engine = credential.New(cooldowns, opts...)
	return d
}

// Do resolves the request's model and tries its connections with call. A
// combo's models are tried in turn while their connections are exhausted;
// an error that is the request's own (a 400 passed through, a committed
// stream) ends the walk at once.
func (d *Dispatcher) Do(ctx context.Context, req Request, call Call) (Result, error) {
	targets, err := d.resolve(ctx, req)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var exhausted []*credential.ExhaustedError
	attempts := 0
	for i, t := range targets {
		res, err = d.doTarget(ctx, req, t, call)
		attempts += res.Attempts
		res.Attempts = attempts
		if err == nil || !nextModel(err) {
			return res, err
		}
		var ex *credential.ExhaustedError
		if errors.As(err, &ex) {
			exhausted = append(exhausted, ex)
		}
		if i == len(targets)-1 {
			return res, comboExhausted(req.Model, exhausted, err)
		}
		d.log.Debug("combo model exhausted, trying the next", "model", t.Alias+"/"+t.Model, "err", err)
	}
	return res, err
}

// comboExhausted is the answer when no model of a combo could serve and
// the last one's connections were exhausted with last. When every model's
// connections are cooling (rate limited, out of quota, or cooling down for
// other reasons), the client is told to come back when the first of them
// is free, whichever model it is (failover row 14), not when the last
// model's is: 429 when all are rate limited or out of quota (out of quota
// when all are), else 503, with the least Retry-After. Any other outcome,
// or a single model exhausted, answers last as it is.
func comboExhausted(combo string, exhausted []*credential.ExhaustedError, last error) error {
	var lastEx *credential.ExhaustedError
	if len(exhausted) < 2 || !errors.As(last, &lastEx) {
		return last
	}
	rateLimited, quota, wait := true, true, lastEx.RetryAfter
	for _, ex := range exhausted {
		switch ex.Code {
		case credential.CodeRateLimited:
			quota = false
		case credential.CodeQuotaExceeded:
		case credential.CodeCoolingDown:
			rateLimited, quota = false, false
		default:
			return last
		}
		wait = min(wait, ex.RetryAfter)
	}
	what := "[" + combo + "] the credentials of every model"
	if quota {
		return credential.QuotaError(what, wait, lastEx.Last)
	}
	return credential.CoolingError(what, rateLimited, wait, lastEx.Last)
}

// Resolve answers the targets the request's model resolves to, as Do
// would try them, without trying any: to learn whether a machine can serve
// a model at all.
func (d *Dispatcher) Resolve(ctx context.Context, req Request) ([]routing.Target, error) {
	return d.resolve(ctx, req)
}

// nextModel reports whether a combo may go on to its next model after err.
func nextModel(err error) bool {
	var exhausted *credential.ExhaustedError
	return errors.As(err, &exhausted) || errors.Is(err, credential.ErrNoCredentials) ||
		errors.Is(err, ErrUnsupportedProvider) || errors.Is(err, routing.ErrNoCredentials)
}

func (d *Dispatcher) doTarget(ctx context.Context, req Request, t routing.Target, call Call) (Result, error) {
	res := Result{Target: t}
	if req.Supports != nil && !req.Supports(t.Spec) {
		return res, ErrUnsupportedProvider
	}
	cands := make([]credential.Candidate, 0, len(t.Connections))
	for i, c := range t.Connections {
		conn, err := d.Prepare(c, t.Spec)
		if err != nil {
			d.log.Error("connection skipped", "connection", c.GetId(), "err", err)
			continue
		}
		cands = append(cands, credential.Candidate{
			ConnectionID: c.GetId(),
			Tier:         int(t.Tier(i)),
			Priority:     c.GetPriority(),
			CanRefresh:   c.GetOauth().GetTokenUrl() != "",
			Value:        conn,
		})
	}
	settings := d.store.MachineSettings(req.MachineID)
	r, err := d.engine.Do(ctx, credential.Request{
		MachineID:   req.MachineID,
		Provider:    t.Spec.ID,
		Model:       t.Model,
		Candidates:  cands,
		Strategy:    settings.GetRoutingStrategy(),
		StickyLimit: int(settings.GetStickyLimit()),
		Prefer:      req.Prefer,
	}, func(ctx context.Context, c credential.Candidate) error {
		return d.attempt(ctx, t, c, call)
	})
	d.served(t.Spec.ID, r.Failed, err)
	res.Attempts = r.Attempts
	if v, ok := r.Candidate.Value.(*Conn); ok {
		res.Conn = v
	}
	return res, err
}

// Prepare opens a connection's credential and picks its client.
func (d *Dispatcher) Prepare(c *busv1.Connection, spec provider.Spec) (*Conn, error) {
	sec, err := d.vault.Open(c)
	if err != nil {
		return nil, err
	}
	base := spec.BaseURL(c.GetData().GetBaseUrl())
	client, err := d.clients.For(base, vault.ProxyURL(c, sec))
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", c.GetId(), err)
	}
	return &Conn{Connection: c, Spec: spec, BaseURL: base, Credential: vault.Credential(sec), Client: client}, nil
}
