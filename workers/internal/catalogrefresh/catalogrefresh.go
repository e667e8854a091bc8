// Package catalogrefresh fetches a connection's live model list from its
// upstream's /models route and hands it to core.
package catalogrefresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// FetchTimeout bounds the upstream call (interface section 8).
const FetchTimeout = 5 * time.Second

// LoopHeader marks our own catalog fetches, so an instance that is asked by
// another instance never fetches on its behalf (decisions.md).
const LoopHeader = "X-Switchboard-Catalog-Fetch"

// maxListing caps the size of an upstream model list.
const maxListing = 16 << 20

// Admin is the part of core's admin API a refresh needs.
type Admin interface {
	GetConnectionCredentials(ctx context.Context, in *corev1.GetConnectionCredentialsRequest, opts ...grpc.CallOption) (*corev1.GetConnectionCredentialsResponse, error)
	PutCatalog(ctx context.Context, in *corev1.PutCatalogRequest, opts ...grpc.CallOption) (*corev1.PutCatalogResponse, error)
}

// Refresher handles catalog-refresh jobs.
type Refresher struct {
	admin      Admin
	adminToken string
	registry   *provider.Registry
	clients    *upstream.Clients
	log        *slog.Logger
}

// NewClients returns the clients catalog fetches go through.
func NewClients() *upstream.Clients {
	return upstream.NewClients(upstream.Options{Connect: FetchTimeout, FirstByte: FetchTimeout, IdlePerHost: 4})
}

// New returns a Refresher.
func New(admin Admin, adminToken string, reg *provider.Registry, clients *upstream.Clients, log *slog.Logger) *Refresher {
	return &Refresher{admin: admin, adminToken: adminToken, registry: reg, clients: clients, log: log}
}

// Handle performs one job. A failed upstream fetch is recorded on the
// catalog (the listing then goes on without it) and is not an error; an
// error means the job should be retried.
func (r *Refresher) Handle(ctx context.Context, job *busv1.CatalogRefreshJob) error {
	ctx = metadata.AppendToOutgoingContext(ctx,
		"authorization", "Bearer "+r.adminToken,
		contract.MDMachine, job.GetMachineId())
	creds, err := r.admin.GetConnectionCredentials(ctx, &corev1.GetConnectionCredentialsRequest{ConnectionId: job.GetConnectionId()})
	if err != nil {
		if isNotFound(err) {
			return nil // the connection is gone; nothing to do
		}
		return fmt.Errorf("credentials of %s: %w", job.GetConnectionId(), err)
	}
	conn := creds.GetConnection()
	spec, ok := r.registry.Lookup(conn.GetProvider())
	if !ok || !spec.Listing {
		return nil
	}
	credential := creds.GetApiKey()
	if credential == "" {
		credential = creds.GetAccessToken()
	}
	start := time.Now()
	models, ferr := r.Fetch(ctx, spec, spec.BaseURL(conn.GetProviderSpecificData().GetBaseUrl()), creds.GetProxyUrl(), credential)
	put := &corev1.PutCatalogRequest{ConnectionId: job.GetConnectionId(), Models: models}
	if ferr != nil {
		r.log.Warn("catalog fetch failed", "connection", job.GetConnectionId(), "provider", conn.GetProvider(), "err", ferr)
		put = &corev1.PutCatalogRequest{ConnectionId: job.GetConnectionId(), Error: ferr.Error()}
		var se *StatusError
		if errors.As(ferr, &se) {
			put.Status = int32(se.Status)
		}
	} else {
		r.log.Info("catalog fetched", "connection", job.GetConnectionId(), "models", len(models), "took", time.Since(start))
	}
	_, err = r.admin.PutCatalog(ctx, put)
	if ferr == nil && contract.Refused(err) {
		// A list too large for core to store (one NATS message, one gRPC
		// call) fails every retry alike: it is recorded as a failed fetch,
		// so listings go on without it instead of waiting for it, and the
		// next fetch is a minute away instead of at once.
		r.log.Warn("catalog too large to store", "connection", job.GetConnectionId(), "provider", conn.GetProvider(), "models", len(models), "err", err)
		put = &corev1.PutCatalogRequest{ConnectionId: job.GetConnectionId(),
			Error: fmt.Sprintf("the upstream listed %d models, more than a catalog holds", len(models))}
		_, err = r.admin.PutCatalog(ctx, put)
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("store catalog of %s: %w", job.GetConnectionId(), err)
	}
	return nil
}

// Fetch reads GET {base}/models through the connection's proxy. Error texts
// never carry the credential.
func (r *Refresher) Fetch(ctx context.Context, spec provider.Spec, base, proxyURL, credential string) ([]*busv1.Model, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	client, err := r.clients.For(base, proxyURL)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return nil, fmt.Errorf("bad base URL")
	}
	spec.Authorize(req.Header, credential)
	req.Header.Set("Accept", "application/json")
	req.Header.Set(LoopHeader, "1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("upstream did not answer within %s", FetchTimeout)
		}
		return nil, fmt.Errorf("upstream unreachable")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("upstream did not finish its listing within %s", FetchTimeout)
		}
		return nil, errors.New("upstream listing cut short")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode}
	}
	if len(body) > maxListing {
		return nil, fmt.Errorf("upstream listing is larger than %d MiB", maxListing>>20)
	}
	return Parse(body)
}

// StatusError is an upstream's refusal to list its models.
type StatusError struct{ Status int }

func (e *StatusError) Error() string { return fmt.Sprintf("upstream answered %d", e.Status) }

// listedModel is one entry of an upstream listing, in any of the shapes
// providers use.
type listedModel struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Model string `json:"model"`
	Kind  string `json:"kind"`
	Type  string `json:"type"`
	// Created is OpenAI's created, read by createdOf: a listing of another
	// shape may have anything there.
	Created json.RawMessage `json:"created"`
}

// errNoList is the answer of an upstream that answered 200 with JSON that
// holds no model list: an error object (some gateways answer errors with
// 200), null, an object without its list.
var errNoList = errors.New("upstream answer holds no model list")

// Parse reads a model listing: a bare array, or an object whose data, models
// or results array holds entries; an entry is a string or an object naming
// the model by id, name or model. Any other answer is an error: taken for an
// empty list, it would hide the connection's models for the catalog's hour.
func Parse(body []byte) ([]*busv1.Model, error) {
	if !json.Valid(body) {
		return nil, errors.New("upstream listing is not JSON")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		var obj struct {
			Data    []json.RawMessage `json:"data"`
			Models  []json.RawMessage `json:"models"`
			Results []json.RawMessage `json:"results"`
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, errNoList
		}
		switch {
		case obj.Data != nil:
			raw = obj.Data
		case obj.Models != nil:
			raw = obj.Models
		case obj.Results != nil:
			raw = obj.Results
		default:
			return nil, errNoList
		}
	}
	out := make([]*busv1.Model, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for _, item := range raw {
		var m listedModel
		if err := json.Unmarshal(item, &m); err != nil {
			var s string
			if json.Unmarshal(item, &s) != nil {
				continue
			}
			m.ID = s
		}
		id := strings.TrimSpace(firstNonEmpty(m.ID, m.Model, m.Name))
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, &busv1.Model{Id: id, Name: m.Name, Kind: m.Kind, Type: m.Type, Created: createdOf(m.Created)})
	}
	return out, nil
}

// createdOf reads an entry's created: a time in Unix seconds, from 1 to
// what 32 bits hold (as OpenAI's clients read it), its fraction cut off;
// or a time in milliseconds, as some compatible servers give it, from the
// year 2001 (10^12) to that same bound; else 0 (none, a string, a number
// that is no such time).
func createdOf(raw json.RawMessage) int64 {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return 0
	}
	if f >= 1e12 {
		f /= 1000
	}
	if f < 1 || f >= math.MaxUint32+1 {
		return 0
	}
	return int64(f)
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
