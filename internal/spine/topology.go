package spine

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

	// StreamUsage holds one event per gateway request.
	StreamUsage = "SB_USAGE"
	// SubjectUsage is followed by ".<machine id>".
	SubjectUsage = "sb.usage"
)

// CatalogTTL is how long a live model catalog is kept (interface section 8).
const CatalogTTL = time.Hour

// UsageRollupTTL is how long a day's usage roll-up is kept after its last
// update: the 30-day statistics window and some margin.
const UsageRollupTTL = 40 * 24 * time.Hour

// AffinityTTL is how long an idle session keeps its connection.
const AffinityTTL = time.Hour

// ResponseTTL is how long a stored Responses answer is kept.
const ResponseTTL = 30 * 24 * time.Hour

// OAuthFlowTTL is how long an OAuth login in progress is kept: longer than
// any provider's device code lives.
const OAuthFlowTTL = 30 * time.Minute

// JobDedupWindow is how long a job's message id suppresses a duplicate.
const JobDedupWindow = 2 * time.Minute

// Topology is the set of streams and buckets the gateway roles use, with the
// replica count of the deployment (1 embedded, 3 on a production cluster).
type Topology struct {
	Replicas int
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
		// A cooldown lasts at most 30 minutes; the bucket forgets older ones.
		{Bucket: BucketCooldowns, Description: "per connection and model cooldowns", History: 1, TTL: time.Hour, Replicas: r},
		{Bucket: BucketCatalogs, Description: "live model catalogs per connection", History: 1, TTL: CatalogTTL, Replicas: r},
		{Bucket: BucketUsageRollups, Description: "usage roll-ups per machine and UTC day", History: 1, TTL: UsageRollupTTL, Replicas: r},
		{Bucket: BucketOAuthFlows, Description: "OAuth logins in progress, secrets sealed", History: 1, TTL: OAuthFlowTTL, Replicas: r},
		{Bucket: BucketAffinity, Description: "chat session to connection affinity per machine", History: 1, TTL: AffinityTTL, Replicas: r},
		{Bucket: BucketResponses, Description: "stored Responses API answers per machine", History: 1, TTL: ResponseTTL, Replicas: r},
	}
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
			Duplicates:  JobDedupWindow,
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
// definitions here. It is idempotent and safe to run from every replica.
func (t Topology) Ensure(ctx context.Context, js jetstream.JetStream) error {
	if err := EnsureStreams(ctx, js, t.Streams()...); err != nil {
		return err
	}
	return EnsureBuckets(ctx, js, t.Buckets()...)
}

// EnsureStreams creates or updates streams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.StreamConfig) error {
	for _, cfg := range cfgs {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("spine: stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// EnsureBuckets creates or updates key-value buckets.
func EnsureBuckets(ctx context.Context, js jetstream.JetStream, cfgs ...jetstream.KeyValueConfig) error {
	for _, cfg := range cfgs {
		if _, err := js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("spine: bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}
