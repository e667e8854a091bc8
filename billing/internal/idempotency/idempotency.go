// Package idempotency makes billing's mutations safe to retry. The first call
// with a client's idempotency key runs the mutation and stores the outcome its
// caller saw in the sb_billing_idempotency bucket; a later call by the same
// user with the same key, on any replica, gets that outcome back without the
// mutation running again, whatever changed in between. A concurrent call with
// the key waits for the first one. The same key with other arguments or on
// another mutation is refused; another user's key is another key.
//
// Which outcomes are kept: successes, and errors a retry would meet again
// (4xx-like: the guards, bad arguments), as Stripe replays its 4xx answers.
// Failures of the 5xx kind (Stripe unavailable, an internal error, a run cut
// short) are not kept: the record is dropped and a retry runs the mutation
// again. That is safe because every Stripe write carries a key derived from
// the client's, so Stripe replays a write that did go through instead of
// doing it twice.
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Operations, as stored in IdempotentCall.operation.
const (
	OpCheckout        = "checkout"
	OpPortal          = "portal"
	OpCancel          = "cancel"
	OpResume          = "resume"
	OpUpdateRecurring = "update_recurring"
)

// MaxKeyLength is the longest idempotency key accepted (Stripe's limit).
const MaxKeyLength = 255

// storeTimeout bounds writing an outcome once the mutation ran.
const storeTimeout = 10 * time.Second

// Flows are the mutations of a billing account (account.Service).
type Flows interface {
	Checkout(ctx context.Context, u account.User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey string) (string, error)
	Portal(ctx context.Context, u account.User, clientKey string) (string, error)
	Cancel(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error)
	Resume(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error)
	ChangeRecurring(ctx context.Context, u account.User, target billingv1.Recurring, clientKey string) (*billingv1.SubscriptionRecord, error)
}

var _ Flows = (*account.Service)(nil)

// CheckoutReplayer is a Flows that checks a checkout's stored answer
// before it is replayed: a page that can no longer be paid is not worth
// sending again (account.Service.ReplayCheckout).
type CheckoutReplayer interface {
	ReplayCheckout(ctx context.Context, u account.User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey, url string) (string, error)
}

var _ CheckoutReplayer = (*account.Service)(nil)

// Config tunes the waits.
type Config struct {
	// RunTimeout bounds one run of a mutation. The run goes on when its
	// caller goes away, so that a retry finds its outcome rather than a
	// half-done run. 0 means 90 seconds.
	RunTimeout time.Duration
	// TakeOverAfter is how long after its start a run still unfinished is
	// presumed crashed: a call with its key then runs the mutation again.
	// 0 means RunTimeout plus 30 seconds; it is never less than that.
	TakeOverAfter time.Duration
	// Wait bounds how long a call waits for a concurrent run with its key
	// before answering IDEMPOTENCY_KEY_IN_USE (and never past a second
	// before the caller's deadline). 0 means 20 seconds.
	Wait time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service runs Flows at most once per user and idempotency key. It is a
// decorator: calls without a key go straight through.
type Service struct {
	next Flows
	kv   jetstream.KeyValue
	cfg  Config
	log  *slog.Logger
}

var _ Flows = (*Service)(nil)

// New returns a Service keeping its records in kv (the sb_billing_idempotency
// bucket, whose TTL makes records expire).
func New(next Flows, kv jetstream.KeyValue, cfg Config, log *slog.Logger) *Service {
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 90 * time.Second
	}
	if minimum := cfg.RunTimeout + 30*time.Second; cfg.TakeOverAfter < minimum {
		cfg.TakeOverAfter = minimum
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 20 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{next: next, kv: kv, cfg: cfg, log: log}
}

// Checkout implements Flows. A replayed page goes through the next Flows'
// ReplayCheckout, when it has one, which may answer another page or an
// error in its stead; the stored answer stays.
func (s *Service) Checkout(ctx context.Context, u account.User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey string) (string, error) {
	fpPlan := plan
	if fpPlan == billingv1.Plan_PLAN_UNSPECIFIED {
		fpPlan = billingv1.Plan_PLAN_PRO // account's default: the same call
	}
	ran := false
	res, err := s.once(ctx, u, clientKey, OpCheckout, []string{fpPlan.String(), recurring.String()},
		func(ctx context.Context) (*billingv1.IdempotentCall, error) {
			ran = true
			url, err := s.next.Checkout(ctx, u, plan, recurring, clientKey)
			if err != nil {
				return nil, err
			}
			return &billingv1.IdempotentCall{Outcome: &billingv1.IdempotentCall_Url{Url: url}}, nil
		})
	if err != nil {
		return "", err
	}
	if r, ok := s.next.(CheckoutReplayer); ok && !ran {
		return r.ReplayCheckout(ctx, u, plan, recurring, clientKey, res.GetUrl())
	}
	return res.GetUrl(), nil
}

// Portal implements Flows.
func (s *Service) Portal(ctx context.Context, u account.User, clientKey string) (string, error) {
	res, err := s.once(ctx, u, clientKey, OpPortal, nil, func(ctx context.Context) (*billingv1.IdempotentCall, error) {
		url, err := s.next.Portal(ctx, u, clientKey)
		if err != nil {
			return nil, err
		}
		return &billingv1.IdempotentCall{Outcome: &billingv1.IdempotentCall_Url{Url: url}}, nil
	})
	if err != nil {
		return "", err
	}
	return res.GetUrl(), nil
}

// Cancel implements Flows. A replayed answer carries only the subscription
// (what the first caller saw) and the user id.
func (s *Service) Cancel(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error) {
	return s.subscription(ctx, u, clientKey, OpCancel, nil, func(ctx context.Context) (*billingv1.SubscriptionRecord, error) {
		return s.next.Cancel(ctx, u, clientKey)
	})
}

// Resume implements Flows, as Cancel.
func (s *Service) Resume(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error) {
	return s.subscription(ctx, u, clientKey, OpResume, nil, func(ctx context.Context) (*billingv1.SubscriptionRecord, error) {
		return s.next.Resume(ctx, u, clientKey)
	})
}

// ChangeRecurring implements Flows, as Cancel.
func (s *Service) ChangeRecurring(ctx context.Context, u account.User, target billingv1.Recurring, clientKey string) (*billingv1.SubscriptionRecord, error) {
	return s.subscription(ctx, u, clientKey, OpUpdateRecurring, []string{target.String()}, func(ctx context.Context) (*billingv1.SubscriptionRecord, error) {
		return s.next.ChangeRecurring(ctx, u, target, clientKey)
	})
}

func (s *Service) subscription(ctx context.Context, u account.User, clientKey, op string, args []string,
	fn func(context.Context) (*billingv1.SubscriptionRecord, error),
) (*billingv1.SubscriptionRecord, error) {
	var ran *billingv1.SubscriptionRecord
	res, err := s.once(ctx, u, clientKey, op, args, func(ctx context.Context) (*billingv1.IdempotentCall, error) {
		rec, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		ran = rec
		return &billingv1.IdempotentCall{Outcome: &billingv1.IdempotentCall_Subscription{Subscription: rec.GetSubscription()}}, nil
	})
	switch {
	case err != nil:
		return nil, err
	case ran != nil:
		return ran, nil
	}
	return &billingv1.SubscriptionRecord{UserId: u.ID, Subscription: res.GetSubscription()}, nil
}

// once runs fn unless a call with the user's key already did, and returns
// fn's outcome or the stored one.
func (s *Service) once(ctx context.Context, u account.User, clientKey, op string, args []string,
	fn func(context.Context) (*billingv1.IdempotentCall, error),
) (*billingv1.IdempotentCall, error) {
	if clientKey == "" {
		return fn(ctx)
	}
	if len(clientKey) > MaxKeyLength {
		return nil, account.BadRequest(fmt.Sprintf("the idempotency key must be at most %d characters", MaxKeyLength))
	}
	key := recordKey(u.ID, clientKey)
	call := &billingv1.IdempotentCall{UserId: u.ID, Operation: op, Fingerprint: fingerprint(op, args)}
	rev, prior, err := s.claim(ctx, key, call)
	if err != nil {
		return nil, err
	}
	if prior != nil {
		s.log.Debug("replayed an idempotent call", "op", op)
		if e := prior.GetError(); e != nil {
			return nil, &account.Error{Code: e.GetCode(), Status: int(e.GetHttpStatus()), Message: e.GetMessage()}
		}
		return prior, nil
	}
	return s.run(ctx, key, call, rev, fn)
}

// run runs fn for a claimed record (at revision rev) and stores its outcome,
// or drops the record when the outcome is not to be replayed.
func (s *Service) run(ctx context.Context, key string, call *billingv1.IdempotentCall, rev uint64,
	fn func(context.Context) (*billingv1.IdempotentCall, error),
) (*billingv1.IdempotentCall, error) {
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RunTimeout)
	defer cancel()
	res, err := fn(runCtx)

	storeCtx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancelStore()
	done := proto.Clone(call).(*billingv1.IdempotentCall)
	var e *account.Error
	switch {
	case err == nil:
		done.Outcome = res.GetOutcome()
	case errors.As(err, &e) && e.Status < 500:
		done.Outcome = &billingv1.IdempotentCall_Error{Error: &billingv1.IdempotentCallError{
			Code: e.Code, HttpStatus: int32(e.Status), Message: e.Message,
		}}
	default:
		// Transient: forget the run, so a retry runs the mutation again.
		if derr := s.kv.Delete(storeCtx, key, jetstream.LastRevision(rev)); derr != nil {
			s.log.Warn("could not drop an unfinished idempotent call", "op", call.GetOperation(), "err", derr)
		}
		return nil, err
	}
	done.Done = true
	done.CompletedAt = timestamppb.New(s.cfg.Now())
	data, merr := proto.Marshal(done)
	if merr == nil {
		_, merr = s.kv.Update(storeCtx, key, data, rev)
	}
	if merr != nil {
		// The caller still gets its answer; a retry may run again (after
		// TakeOverAfter), and Stripe replays what went through.
		s.log.Warn("could not store the outcome of an idempotent call", "op", call.GetOperation(), "err", merr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// errGone: the record is not there (any more); claim it again.
var errGone = errors.New("idempotency record gone")

// claim creates the record of call as running and returns its revision, or
// returns the finished record of an earlier call with the key. It waits
// (bounded by Config.Wait) while another call runs, and takes over a run
// presumed crashed.
func (s *Service) claim(ctx context.Context, key string, call *billingv1.IdempotentCall) (uint64, *billingv1.IdempotentCall, error) {
	// Wait no longer than the caller does, so that it gets a typed answer
	// rather than its own deadline.
	wait := s.cfg.Wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-time.Second)
	}
	waitCtx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	for {
		data, err := s.stamp(call)
		if err != nil {
			return 0, nil, err
		}
		rev, err := s.kv.Create(ctx, key, data)
		if err == nil {
			return rev, nil, nil
		}
		if kvmirror.LostRace(err) {
			var prior *billingv1.IdempotentCall
			rev, prior, err = s.await(waitCtx, key, call)
			if errors.Is(err, errGone) {
				continue
			}
			if err == nil {
				return rev, prior, nil
			}
		}
		var e *account.Error
		switch {
		case errors.As(err, &e):
			return 0, nil, err
		case ctx.Err() != nil:
			return 0, nil, ctx.Err()
		case waitCtx.Err() != nil:
			return 0, nil, account.ErrKeyInUse
		}
		return 0, nil, fmt.Errorf("idempotency: %w", err)
	}
}

// stamp marks call as a new run starting now and encodes it.
func (s *Service) stamp(call *billingv1.IdempotentCall) ([]byte, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	call.Attempt = hex.EncodeToString(b[:])
	call.StartedAt = timestamppb.New(s.cfg.Now())
	return proto.Marshal(call)
}

// await follows the record of another call with the key until it is done
// (returned as prior), is gone, or its run is presumed crashed and mine
// takes it over (its revision returned).
func (s *Service) await(ctx context.Context, key string, mine *billingv1.IdempotentCall) (uint64, *billingv1.IdempotentCall, error) {
	w, err := s.kv.Watch(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = w.Stop() }()
	var (
		seen   uint64
		lease  *time.Timer
		expiry <-chan time.Time
	)
	defer func() {
		if lease != nil {
			lease.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-expiry:
			expiry = nil
			data, err := s.stamp(mine)
			if err != nil {
				return 0, nil, err
			}
			rev, err := s.kv.Update(ctx, key, data, seen)
			if err == nil {
				s.log.Warn("took over an idempotent call whose run seems to have crashed", "op", mine.GetOperation())
				return rev, nil, nil
			}
			if !kvmirror.LostRace(err) {
				return 0, nil, err
			}
			// Another call wrote first; the watcher brings its record.
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return 0, nil, errGone
			case e == nil:
				// End of the current value: none means the key is free.
				if seen == 0 {
					return 0, nil, errGone
				}
				continue
			case e.Operation() != jetstream.KeyValuePut:
				return 0, nil, errGone
			}
			cur := new(billingv1.IdempotentCall)
			if err := proto.Unmarshal(e.Value(), cur); err != nil {
				return 0, nil, fmt.Errorf("decode record: %w", err)
			}
			if !sameCall(cur, mine) {
				return 0, nil, account.ErrKeyReused
			}
			if cur.GetDone() {
				return 0, cur, nil
			}
			seen = e.Revision()
			left := cur.GetStartedAt().AsTime().Add(s.cfg.TakeOverAfter).Sub(s.cfg.Now())
			if lease == nil {
				lease = time.NewTimer(left)
			} else {
				lease.Reset(left)
			}
			expiry = lease.C
		}
	}
}

func sameCall(a, b *billingv1.IdempotentCall) bool {
	return a.GetUserId() == b.GetUserId() && a.GetOperation() == b.GetOperation() &&
		bytes.Equal(a.GetFingerprint(), b.GetFingerprint())
}

// recordKey is the bucket key of a user's idempotency key: a hash, so any
// key a client sends makes a valid bucket key and none is stored as sent.
func recordKey(userID, clientKey string) string {
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint64(len(userID)))
	h.Write([]byte(userID))
	h.Write([]byte(clientKey))
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprint identifies an operation with its arguments.
func fingerprint(op string, args []string) []byte {
	h := sha256.New()
	for _, p := range append([]string{op}, args...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}
