package spine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/switchboardhq/switchboard/internal/wait"
)

// Key-value buckets owned by core.
const (
	BucketMachines       = "sb_machines"
	BucketConnections    = "sb_connections"
	BucketKeys           = "sb_keys"
	BucketSettings       = "sb_settings"
	BucketDisabledModels = "sb_disabled_models"
	BucketCooldowns      = "sb_cooldowns"
	BucketCatalogs       = "sb_catalogs"
	BucketUsageRollups   = "sb_usage_rollups"
	// BucketOAuthFlows holds OAuth logins in progress (device codes, PKCE
	// verifiers), forgotten after OAuthFlowTTL.
	BucketOAuthFlows = "sb_oauth_flows"
	// BucketResponses holds Responses API answers stored for
	// previous_response_id and GET /v1/responses/{id}, forgotten after
	// ResponseTTL.
	BucketResponses = "sb_responses"
	// BucketAffinity maps chat sessions to the connection serving them,
	// forgotten after AffinityTTL without use.
	BucketAffinity = "sb_affinity"
	// BucketSignInCodes holds the console's one-time sign-in codes (by
	// their SHA-256), forgotten after SignInCodeTTL.
	BucketSignInCodes = "sb_signin_codes"
	// BucketRefreshLeases holds, per connection, the worker refreshing its
	// tokens now, forgotten when its lease's own TTL ends.
	BucketRefreshLeases = "sb_refresh_leases"
)

// Streams and their subjects.
const (
	// StreamJobs is a work queue: each job is taken by one worker and removed
	// when acknowledged.
	StreamJobs = "SB_JOBS"
	// SubjectCatalogRefresh is followed by ".<connection id>".
	SubjectCatalogRefresh = "sb.jobs.catalog_refresh"
	// SubjectTokenRefresh is followed by ".<connection id>".
	SubjectTokenRefresh = "sb.jobs.token_refresh"

	// StreamUsage holds one event per gateway request, a message holding
	// one event or a batch of one machine's (internal/usagebatch).
	StreamUsage = "SB_USAGE"
	// SubjectUsage is followed by ".<machine id>".
	SubjectUsage = "sb.usage"

	// StreamUsageDead holds the usage events the roll-up gave up on after a
	// finite number of tries, for an operator to look at.
	StreamUsageDead = "SB_USAGE_DEAD"
	// SubjectUsageDead is followed by ".<machine id>" (or ".unknown").
	SubjectUsageDead = "sb.usage_dead"
)

// CatalogTTL is how long a live model catalog is kept (interface section 8).
const CatalogTTL = time.Hour

// CooldownTTL is how long sb_cooldowns keeps a record after its last
// write: past the longest cooldown the credential engine sets (an
// upstream's Retry-After, honoured up to 24 hours: a subscription's quota
// window can be hours away) and the retention of its backoff level after
// that. A shorter bound let a connection told to wait five hours serve
// again after one, and fail again.
const CooldownTTL = 25 * time.Hour

// UsageRollupTTL is how long a day's usage roll-up is kept after its last
// update: the 30-day statistics window and some margin.
const UsageRollupTTL = 40 * 24 * time.Hour

// AffinityTTL is how long an idle session keeps its connection.
const AffinityTTL = time.Hour

// ResponseTTL is how long a stored Responses answer is kept.
const ResponseTTL = 30 * 24 * time.Hour

// OAuthFlowTTL is how long an OAuth login in progress is kept after it was
// last touched (each poll touches it). A login forgotten sooner than its
// code expires (a longer-lived code, a longer pause between polls) still
// answers as expired: its id names it a login.
const OAuthFlowTTL = 30 * time.Minute

// RefreshLeaseTTL is the lease of a token refresh without a deadline. Each
// lease lives as long as its job may still run (a few seconds past it), so
// that a worker that died holding one holds it no longer; the bucket has no
// age bound of its own, which would cut a longer lease short.
const RefreshLeaseTTL = 2 * time.Minute

// SignInCodeTTL is how long a console sign-in code may be redeemed.
const SignInCodeTTL = 10 * time.Minute

// JobDedupWindow is how long a job's message id suppresses a duplicate.
const JobDedupWindow = 2 * time.Minute

// DefaultUsageMaxBytes bounds SB_USAGE on disk unless configured.
const DefaultUsageMaxBytes = 1 << 30

// UsageDeadMaxBytes bounds the usage dead-letter stream on disk.
const UsageDeadMaxBytes = 256 << 20

// DefaultResponsesMaxBytes bounds the stored Responses answers on disk
// unless configured. Each answer is kept with its whole conversation, so a
// long agent session stores every turn's history again: without a size
// bound, 30 days of them could fill the disk.
const DefaultResponsesMaxBytes = 256 << 20

// Topology is the set of streams and buckets the gateway roles use, with the
// replica count of the deployment (1 embedded, 3 on a production cluster).
type Topology struct {
	Replicas int
	// UsageMaxBytes bounds SB_USAGE on disk (zero: DefaultUsageMaxBytes);
	// past it the oldest events are discarded.
	UsageMaxBytes int64
	// ResponsesMaxBytes bounds the stored Responses answers on disk (zero:
	// DefaultResponsesMaxBytes); past it the oldest answers are discarded.
	ResponsesMaxBytes int64
}

// Buckets are the key-value buckets of core.
func (t Topology) Buckets() []jetstream.KeyValueConfig {
	r := t.replicas()
	return []jetstream.KeyValueConfig{
		{Bucket: BucketMachines, Description: "machines (tenants)", History: 1, Replicas: r},
		{Bucket: BucketConnections, Description: "provider connections, secrets sealed", History: 1, Replicas: r},
		{Bucket: BucketKeys, Description: "API keys by hash", History: 1, Replicas: r},
		{Bucket: BucketSettings, Description: "per-machine settings", History: 1, Replicas: r},
		{Bucket: BucketDisabledModels, Description: "disabled models per machine", History: 1, Replicas: r},
		{Bucket: BucketCooldowns, Description: "per connection and model cooldowns", History: 1, TTL: CooldownTTL, Replicas: r},
		{Bucket: BucketCatalogs, Description: "live model catalogs per connection", History: 1, TTL: CatalogTTL, Replicas: r},
		{Bucket: BucketUsageRollups, Description: "usage roll-ups per machine and UTC day", History: 1, TTL: UsageRollupTTL, Replicas: r},
		{Bucket: BucketOAuthFlows, Description: "OAuth logins in progress, secrets sealed", History: 1, TTL: OAuthFlowTTL, Replicas: r},
		{Bucket: BucketAffinity, Description: "chat session to connection affinity per machine", History: 1, TTL: AffinityTTL, Replicas: r},
		{Bucket: BucketResponses, Description: "stored Responses API answers per machine", History: 1, TTL: ResponseTTL,
			MaxBytes: cmp.Or(t.ResponsesMaxBytes, DefaultResponsesMaxBytes), Replicas: r},
		// Codes are minted with the admin token only; the bound is a guard.
		{Bucket: BucketSignInCodes, Description: "console sign-in codes by digest", History: 1, TTL: SignInCodeTTL, MaxBytes: 1 << 20, Replicas: r},
		t.RefreshLeases(),
	}
}

// RefreshLeases is the bucket of token refresh leases, which the workers
// ensure too: they may start before core.
func (t Topology) RefreshLeases() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: BucketRefreshLeases, Description: "token refreshes in progress, one worker per connection",
		History: 1, LimitMarkerTTL: time.Second, MaxBytes: 8 << 20, Replicas: t.replicas()}
}

// Streams are the streams of the gateway roles.
func (t Topology) Streams() []jetstream.StreamConfig {
	r := t.replicas()
	return []jetstream.StreamConfig{
		{
			Name:        StreamJobs,
			Description: "token and catalog refresh jobs",
			Subjects:    []string{"sb.jobs.>"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  JobDedupWindow,
			MaxAge:      24 * time.Hour,
			Replicas:    r,
		},
		{
			Name:        StreamUsage,
			Description: "one usage event per gateway request",
			Subjects:    []string{SubjectUsage + ".>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      35 * 24 * time.Hour,
			MaxBytes:    cmp.Or(t.UsageMaxBytes, DefaultUsageMaxBytes),
			Discard:     jetstream.DiscardOld,
			Duplicates:  JobDedupWindow,
			Replicas:    r,
		},
		{
			Name:        StreamUsageDead,
			Description: "usage events the roll-up gave up on",
			Subjects:    []string{SubjectUsageDead + ".>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      35 * 24 * time.Hour,
			MaxBytes:    UsageDeadMaxBytes,
			Discard:     jetstream.DiscardOld,
			Replicas:    r,
		},
	}
}

func (t Topology) replicas() int {
	if t.Replicas < 1 {
		return 1
	}
	return t.Replicas
}

// Ensure creates the topology's streams and buckets, or updates them to the
// definitions here. It is idempotent and safe to run from every replica at
// once.
func (t Topology) Ensure(ctx context.Context, js jetstream.JetStream) error {
	var g errgroup.Group
	g.Go(func() error { return EnsureStreams(ctx, js, t.Streams()...) })
	g.Go(func() error {
		if err := EnsureBuckets(ctx, js, t.Buckets()...); err != nil {
			return err
		}
		return discardOldest(ctx, js, BucketResponses)
	})
	return g.Wait()
}

// discardOldest makes a full bucket drop its oldest values to take a new
// one, where a key-value bucket refuses the new one (nats.go creates and
// updates them with DiscardNew). Stored answers are kept for conversations
// to go on: the newest matter most.
func discardOldest(ctx context.Context, js jetstream.JetStream, bucket string) error {
	err := retryEnsure(ctx, func(ctx context.Context) error {
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return err
		}
		cfg := s.CachedInfo().Config
		if cfg.Discard == jetstream.DiscardOld {
			return nil
		}
		cfg.Discard = jetstream.DiscardOld
		_, err = js.UpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("spine: bucket %s: %w", bucket, err)
	}
	return nil
}

// EnsureStreams creates or updates streams, all at once. Each is retried
// with backoff while the cluster cannot answer (no JetStream leader yet, a
// node restarting, another creator's stream still being placed), for at
// most EnsureWait or until ctx ends.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.StreamConfig) error {
	var g errgroup.Group
	for _, cfg := range cfgs {
		g.Go(func() error {
			err := retryEnsure(ctx, func(ctx context.Context) error {
				_, err := js.CreateOrUpdateStream(ctx, cfg)
				return err
			})
			if err != nil {
				return fmt.Errorf("spine: stream %s: %w", cfg.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// EnsureBuckets creates or updates key-value buckets, as EnsureStreams
// does streams.
func EnsureBuckets(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.KeyValueConfig) error {
	var g errgroup.Group
	for _, cfg := range cfgs {
		g.Go(func() error {
			err := retryEnsure(ctx, func(ctx context.Context) error {
				_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
				return err
			})
			if err != nil {
				return fmt.Errorf("spine: bucket %s: %w", cfg.Bucket, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// EnsureWait bounds how long one stream or bucket creation is retried
// (sooner when the caller's context ends).
const EnsureWait = 2 * time.Minute

// ensureAttempt bounds the first creation attempt. A request sent while
// the cluster elects its JetStream leader, or while another creator's
// stream is still being placed, gets no answer at all; the next attempt
// then finds the stream. So attempts stay short, growing slowly to
// ensureAttemptMax (JetStream's own API timeout) for a slow cluster.
const (
	ensureAttempt    = 2 * time.Second
	ensureAttemptMax = 5 * time.Second
)

// retryEnsure runs create until it succeeds, fails for good, or the wait is
// over. Creation is idempotent (create or update to the same definition),
// so a retry after a concurrent creator won is a plain update.
func retryEnsure(ctx context.Context, create func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, EnsureWait)
	defer cancel()
	backoff, limit := 100*time.Millisecond, ensureAttempt
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, limit)
		err := create(actx)
		acancel()
		if err == nil {
			return nil
		}
		if isStorageExceeded(err) {
			return fmt.Errorf("%w (JetStream may use 75%% of the disk space free when it started, and each stream's bound counts whole: free disk space, or lower SWITCHBOARD_USAGE_MAX_BYTES)", err)
		}
		if permanentEnsureError(err) {
			return err
		}
		// Jitter keeps creators started together from retrying in step.
		if !wait.Sleep(ctx, backoff/2+time.Duration(rand.Int64N(int64(backoff)))) {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		backoff = min(2*backoff, 2*time.Second)
		limit = min(limit+time.Second, ensureAttemptMax)
	}
}

// permanentEnsureError reports an error no retry can fix: a definition the
// server refuses.
func permanentEnsureError(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case jsErrStreamInvalidConfig, jsErrStreamSubjectOverlap, jsErrReplicasNotSupported, jetstream.JSErrCodeJetStreamNotEnabledForAccount:
		return true
	}
	return false
}

// isStorageExceeded reports the server's refusal of a stream whose bound
// does not fit in its storage: a disk with too little free space, which no
// retry fixes (a fresh install on a small disk waited two minutes for it).
func isStorageExceeded(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrStorageResourcesExceeded
}

// JetStream API error codes (nats-server's errors.json) nats.go does not
// name.
const (
	jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047
	jsErrStreamInvalidConfig      jetstream.ErrorCode = 10052
	jsErrStreamSubjectOverlap     jetstream.ErrorCode = 10065
	jsErrReplicasNotSupported     jetstream.ErrorCode = 10074
)
