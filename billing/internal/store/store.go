package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Buckets owned by billing.
const (
	BucketCustomers     = "sb_billing_customers"
	BucketSubscriptions = "sb_billing_subscriptions"
	BucketInvoices      = "sb_billing_invoices"
	BucketEvents        = "sb_billing_events"
	BucketDead          = "sb_billing_dead"
	// BucketIdempotency holds the mutations called with an idempotency key
	// and their outcomes (package idempotency).
	BucketIdempotency = "sb_billing_idempotency"
)

// EventMemory is how long a processed event id is remembered; Stripe retries
// a delivery for three days.
const EventMemory = 30 * 24 * time.Hour

// IdempotencyMemory is how long a mutation called with an idempotency key is
// remembered after it finished: twice the 24 hours Stripe keeps its keys.
const IdempotencyMemory = 48 * time.Hour

// DeadMemory is how long an event that kept failing is kept for an operator
// to read and retry; DeadMaxBytes bounds the bucket (a full bucket refuses
// new dead letters, and their events then stay on the stream, retried).
const (
	DeadMemory   = 90 * 24 * time.Hour
	DeadMaxBytes = 256 << 20
)

// Buckets are billing's bucket definitions with the given replicas.
func Buckets(replicas int) []jetstream.KeyValueConfig {
	if replicas < 1 {
		replicas = 1
	}
	return []jetstream.KeyValueConfig{
		{Bucket: BucketCustomers, Description: "billing: user <-> Stripe customer", History: 1, Replicas: replicas},
		{Bucket: BucketSubscriptions, Description: "billing: subscriptions by user, past revisions kept", History: 16, Replicas: replicas},
		{Bucket: BucketInvoices, Description: "billing: invoices by user", History: 1, Replicas: replicas},
		{Bucket: BucketEvents, Description: "billing: processed Stripe event ids", History: 1, TTL: EventMemory, Replicas: replicas},
		{Bucket: BucketDead, Description: "billing: Stripe events that kept failing", History: 1, TTL: DeadMemory, MaxBytes: DeadMaxBytes, Replicas: replicas},
		{Bucket: BucketIdempotency, Description: "billing: mutations called with an idempotency key, and their outcomes", History: 1, TTL: IdempotencyMemory, Replicas: replicas},
	}
}

// Store holds billing's buckets.
type Store struct {
	customers     *kvmirror.Bucket[*billingv1.CustomerRecord]
	subscriptions *kvmirror.Bucket[*billingv1.SubscriptionRecord]
	invoices      *kvmirror.Bucket[*billingv1.InvoiceRecord]
	events        jetstream.KeyValue
	dead          jetstream.KeyValue
}

// Open mirrors billing's buckets, which must exist. The mirrors stay fresh
// until ctx ends.
func Open(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Store, error) {
	var s Store
	var err error
	if s.customers, err = open(ctx, js, BucketCustomers, func() *billingv1.CustomerRecord { return new(billingv1.CustomerRecord) }, log); err != nil {
		return nil, err
	}
	if s.subscriptions, err = open(ctx, js, BucketSubscriptions, func() *billingv1.SubscriptionRecord { return new(billingv1.SubscriptionRecord) }, log); err != nil {
		return nil, err
	}
	if s.invoices, err = open(ctx, js, BucketInvoices, func() *billingv1.InvoiceRecord { return new(billingv1.InvoiceRecord) }, log); err != nil {
		return nil, err
	}
	if s.events, err = js.KeyValue(ctx, BucketEvents); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", BucketEvents, err)
	}
	if s.dead, err = js.KeyValue(ctx, BucketDead); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", BucketDead, err)
	}
	return &s, nil
}

func open[T proto.Message](ctx context.Context, js jetstream.JetStream, name string, newT func() T, log *slog.Logger) (*kvmirror.Bucket[T], error) {
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	return kvmirror.OpenBucket(ctx, kv, newT, log)
}

// userKey encodes a user id (any JWT subject) into key-safe characters.
func userKey(userID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(userID))
}

// validToken reports whether s can be one token of a bucket key (Stripe ids
// are; anything else is refused rather than written).
func validToken(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ErrBadID is returned for an id that cannot be a key.
var ErrBadID = errors.New("id is not a valid key")

// CustomerByUser returns the user's Stripe customer link.
func (s *Store) CustomerByUser(userID string) (*billingv1.CustomerRecord, bool) {
	e, ok := s.customers.Get("user." + userKey(userID))
	return e.Value, ok
}

// UserByCustomer returns the link of a Stripe customer.
func (s *Store) UserByCustomer(customerID string) (*billingv1.CustomerRecord, bool) {
	if !validToken(customerID) {
		return nil, false
	}
	e, ok := s.customers.Get("stripe." + customerID)
	return e.Value, ok
}

// LinkCustomer stores a user <-> customer link in both directions. When the
// user already has a customer, that link is kept and returned, and the
// customer given is linked back to the user too (a second customer of the
// user's is then found without asking Stripe whose it is).
func (s *Store) LinkCustomer(ctx context.Context, rec *billingv1.CustomerRecord) (*billingv1.CustomerRecord, error) {
	if !validToken(rec.GetCustomerId()) {
		return nil, ErrBadID
	}
	if rec.CreatedAt == nil {
		rec.CreatedAt = timestamppb.Now()
	}
	kept := rec
	if err := s.customers.Create(ctx, "user."+userKey(rec.GetUserId()), rec); err != nil {
		if !errors.Is(err, kvmirror.ErrExists) {
			return nil, err
		}
		cur, ok := s.CustomerByUser(rec.GetUserId())
		if !ok {
			return nil, kvmirror.ErrConflict
		}
		kept = cur
	}
	// The reverse link is idempotent: it always names the same user.
	if err := s.customers.Put(ctx, "stripe."+rec.GetCustomerId(), rec); err != nil {
		return nil, err
	}
	return kept, nil
}

// UpsertSubscription changes a user's subscription record with
// compare-and-swap.
func (s *Store) UpsertSubscription(ctx context.Context, userID, subscriptionID string, fn func(rec *billingv1.SubscriptionRecord, ok bool) error) (*billingv1.SubscriptionRecord, error) {
	if !validToken(subscriptionID) {
		return nil, ErrBadID
	}
	return s.subscriptions.Upsert(ctx, userKey(userID)+"."+subscriptionID, fn)
}

// Subscriptions returns a user's subscriptions, newest first.
func (s *Store) Subscriptions(userID string) []*billingv1.SubscriptionRecord {
	prefix := userKey(userID) + "."
	var out []*billingv1.SubscriptionRecord
	s.subscriptions.Range(func(key string, e kvmirror.Entry[*billingv1.SubscriptionRecord]) bool {
		if strings.HasPrefix(key, prefix) {
			out = append(out, e.Value)
		}
		return true
	})
	sortNewest(out, subscriptionOrder)
	return out
}

// SubscriptionPage returns one page of every user's subscriptions, newest
// first, and how many there are.
func (s *Store) SubscriptionPage(take, skip int) ([]*billingv1.SubscriptionRecord, int) {
	var all []*billingv1.SubscriptionRecord
	s.AllSubscriptions(func(r *billingv1.SubscriptionRecord) bool {
		all = append(all, r)
		return true
	})
	return newestPage(all, subscriptionOrder, take, skip)
}

// AllSubscriptions calls fn for every subscription record until it returns
// false.
func (s *Store) AllSubscriptions(fn func(*billingv1.SubscriptionRecord) bool) {
	s.subscriptions.Range(func(_ string, e kvmirror.Entry[*billingv1.SubscriptionRecord]) bool {
		return fn(e.Value)
	})
}

// UpsertInvoice changes a user's invoice record with compare-and-swap.
func (s *Store) UpsertInvoice(ctx context.Context, userID, invoiceID string, fn func(rec *billingv1.InvoiceRecord, ok bool) error) (*billingv1.InvoiceRecord, error) {
	if !validToken(invoiceID) {
		return nil, ErrBadID
	}
	return s.invoices.Upsert(ctx, userKey(userID)+"."+invoiceID, fn)
}

// DeleteInvoice removes the invoice with this Stripe id from whichever
// user holds it; an invoice no user holds is not an error.
func (s *Store) DeleteInvoice(ctx context.Context, invoiceID string) error {
	if !validToken(invoiceID) {
		return ErrBadID
	}
	var keys []string
	s.invoices.Range(func(key string, e kvmirror.Entry[*billingv1.InvoiceRecord]) bool {
		if e.Value.GetInvoice().GetId() == invoiceID {
			keys = append(keys, key)
		}
		return true
	})
	for _, key := range keys {
		if err := s.invoices.Delete(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// Invoices returns one page of a user's invoices, newest first, and how
// many the user has.
func (s *Store) Invoices(userID string, take, skip int) ([]*billingv1.InvoiceRecord, int) {
	prefix := userKey(userID) + "."
	var all []*billingv1.InvoiceRecord
	s.invoices.Range(func(key string, e kvmirror.Entry[*billingv1.InvoiceRecord]) bool {
		if strings.HasPrefix(key, prefix) {
			all = append(all, e.Value)
		}
		return true
	})
	return newestPage(all, invoiceOrder, take, skip)
}

// subscriptionOrder and invoiceOrder give what a record is ordered by:
// when it was created, then its id.
func subscriptionOrder(r *billingv1.SubscriptionRecord) (time.Time, string) {
	return r.GetSubscription().GetCreatedAt().AsTime(), r.GetSubscription().GetId()
}

func invoiceOrder(r *billingv1.InvoiceRecord) (time.Time, string) {
	return r.GetInvoice().GetCreatedAt().AsTime(), r.GetInvoice().GetId()
}

// sortNewest sorts records newest first, the greater id first among those
// created at the same time.
func sortNewest[T any](all []T, order func(T) (time.Time, string)) {
	slices.SortFunc(all, func(a, b T) int {
		at, aid := order(a)
		bt, bid := order(b)
		return cmp.Or(bt.Compare(at), strings.Compare(bid, aid))
	})
}

// newestPage sorts records newest first and returns the page skip and take
// choose, and how many there are.
func newestPage[T any](all []T, order func(T) (time.Time, string), take, skip int) ([]T, int) {
	sortNewest(all, order)
	total := len(all)
	if skip >= total {
		return nil, total
	}
	all = all[skip:]
	if take < len(all) {
		all = all[:take]
	}
	return all, total
}

// Processed reports whether an event was already applied.
func (s *Store) Processed(ctx context.Context, eventID string) (bool, error) {
	if !validToken(eventID) {
		return false, ErrBadID
	}
	_, err := s.events.Get(ctx, eventID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// MarkProcessed remembers that an event was applied.
func (s *Store) MarkProcessed(ctx context.Context, eventID, eventType string) error {
	if !validToken(eventID) {
		return ErrBadID
	}
	data, err := proto.Marshal(&billingv1.ProcessedEvent{Type: eventType, ProcessedAt: timestamppb.Now()})
	if err != nil {
		return err
	}
	_, err = s.events.Put(ctx, eventID, data)
	return err
}

// PutDead keeps an event that kept failing.
func (s *Store) PutDead(ctx context.Context, ev *billingv1.DeadEvent) error {
	key := ev.GetEventId()
	if !validToken(key) {
		key = fmt.Sprintf("invalid_%d", time.Now().UnixNano())
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = s.dead.Put(ctx, key, data)
	return err
}

// DeadLetter is a kept event and the key it is kept under.
type DeadLetter struct {
	Key   string
	Event *billingv1.DeadEvent
}

// ErrNoDeadLetter: no event is kept under the key.
var ErrNoDeadLetter = errors.New("no such dead letter")

// DeadEvents returns the events kept for inspection, newest first.
func (s *Store) DeadEvents(ctx context.Context) ([]DeadLetter, error) {
	lister, err := s.dead.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for key := range lister.Keys() {
		e, err := s.dead.Get(ctx, key)
		if err != nil {
			continue
		}
		ev := new(billingv1.DeadEvent)
		if proto.Unmarshal(e.Value(), ev) == nil {
			out = append(out, DeadLetter{Key: key, Event: ev})
		}
	}
	slices.SortFunc(out, func(a, b DeadLetter) int {
		return cmp.Or(
			b.Event.GetFailedAt().AsTime().Compare(a.Event.GetFailedAt().AsTime()),
			strings.Compare(a.Key, b.Key),
		)
	})
	return out, nil
}

// DeadEvent returns the event kept under key.
func (s *Store) DeadEvent(ctx context.Context, key string) (*billingv1.DeadEvent, uint64, error) {
	if !validToken(key) {
		return nil, 0, ErrNoDeadLetter
	}
	e, err := s.dead.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNoDeadLetter
	}
	if err != nil {
		return nil, 0, err
	}
	ev := new(billingv1.DeadEvent)
	if err := proto.Unmarshal(e.Value(), ev); err != nil {
		return nil, 0, err
	}
	return ev, e.Revision(), nil
}

// DeleteDead forgets the event kept under key at revision rev (another
// retry of it that came first wins: ErrNoDeadLetter).
func (s *Store) DeleteDead(ctx context.Context, key string, rev uint64) error {
	err := s.dead.Purge(ctx, key, jetstream.LastRevision(rev))
	if kvmirror.LostRace(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return ErrNoDeadLetter
	}
	return err
}
