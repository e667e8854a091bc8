package billing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// edgeClient calls billing as the edge does: the user a request names is
// vouched for in metadata, which is where billing reads it.
func edgeClient(conn grpc.ClientConnInterface) billingv1.BillingClient {
	return billingv1.NewBillingClient(vouchingConn{conn})
}

type vouchingConn struct{ grpc.ClientConnInterface }

func (v vouchingConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if r, ok := args.(interface{ GetUser() *billingv1.User }); ok && r.GetUser() != nil {
		ctx = rpcauth.VouchUser(ctx, rpcauth.User{ID: r.GetUser().GetId(), Email: r.GetUser().GetEmail()})
	}
	return v.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// subscribe checks a user out over gRPC, pays at the fake Stripe and hands
// Stripe's event to billing; it returns once billing shows the subscription.
func subscribe(t *testing.T, h *billingtest.Harness, c billingv1.BillingClient, user *billingv1.User) string {
	t.Helper()
	ctx := context.Background()
	resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: user, Recurring: billingv1.Recurring_RECURRING_MONTHLY})
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(resp.GetUrl())
	require.True(t, ok)
	sub, _, err := h.Stripe.CompleteCheckout(sess.ID, 0)
	require.NoError(t, err)
	ingest(t, h, c, "checkout.session.completed", sess.ID)
	require.Eventually(t, func() bool {
		got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: user})
		return err == nil && got.GetSubscription().GetStatus() == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE
	}, 10*time.Second, 5*time.Millisecond, "subscribed")
	return sub.ID
}

// ingest hands a signed Stripe event about an object to billing.
func ingest(t *testing.T, h *billingtest.Harness, c billingv1.BillingClient, eventType, objectID string) {
	t.Helper()
	payload := h.Stripe.Event(eventType, objectID)
	_, err := c.IngestWebhook(context.Background(), &billingv1.IngestWebhookRequest{Payload: payload, Signature: billingtest.Sign(payload)})
	require.NoError(t, err)
}

// awaitSubscription waits until billing's copy of the user's subscription
// satisfies cond (after a webhook landed).
func awaitSubscription(t *testing.T, c billingv1.BillingClient, user *billingv1.User, cond func(*billingv1.Subscription) bool, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := c.GetSubscription(context.Background(), &billingv1.GetSubscriptionRequest{User: user})
		return err == nil && cond(got.GetSubscription())
	}, 10*time.Second, 5*time.Millisecond, what)
}

func stripeCalls(h *billingtest.Harness, op string) int {
	n := 0
	for _, c := range h.Stripe.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

// TestIdempotentRetriesAfterTheStateChanged: each mutation called again with
// its key, after the first call's effect landed (webhooks applied, other
// mutations in between), answers what the first call answered and does not
// act again.
func TestIdempotentRetriesAfterTheStateChanged(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}

	// A portal asked for before the first checkout: the error is the answer
	// of that key, also once a customer exists.
	_, err := c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: alice, IdempotencyKey: "portal-early"})
	require.Equal(t, "CUSTOMER_NOT_FOUND", reasonOf(t, err))

	// Checkout, paid, webhook applied: the retry still gets the checkout URL.
	checkout := &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "checkout-1"}
	first, err := c.Checkout(ctx, checkout)
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(first.GetUrl())
	require.True(t, ok)
	sub, _, err := h.Stripe.CompleteCheckout(sess.ID, 0)
	require.NoError(t, err)
	ingest(t, h, c, "checkout.session.completed", sess.ID)
	awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool { return s.GetId() == sub.ID }, "subscribed")
	again, err := c.Checkout(ctx, checkout)
	require.NoError(t, err, "a retried checkout is not refused as SUBSCRIPTION_ALREADY_EXISTS")
	require.Equal(t, first.GetUrl(), again.GetUrl())
	_, err = c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "checkout-2"})
	require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", reasonOf(t, err), "a new key is a new checkout, refused")

	_, err = c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: alice, IdempotencyKey: "portal-early"})
	require.Equal(t, "CUSTOMER_NOT_FOUND", reasonOf(t, err), "the first answer, an error, is replayed")
	portal, err := c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: alice, IdempotencyKey: "portal-1"})
	require.NoError(t, err)

	// Cancel; the webhook lands; cancel again with the key.
	cancelReq := &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: "cancel-1"}
	canceled, err := c.CancelSubscription(ctx, cancelReq)
	require.NoError(t, err)
	require.NotNil(t, canceled.GetSubscription().GetCanceledAt())
	ingest(t, h, c, "customer.subscription.updated", sub.ID)
	again2, err := c.CancelSubscription(ctx, cancelReq)
	require.NoError(t, err, "a retried cancel is not refused as SUBSCRIPTION_HAS_BEEN_CANCELED")
	require.True(t, proto.Equal(canceled.GetSubscription(), again2.GetSubscription()), "the first answer")

	// A resume that is refused (not canceled yet) keeps its answer too.
	_, err = c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume-0"})
	require.NoError(t, err, "canceled, so this resume goes through")
	_, err = c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume-refused"})
	require.Equal(t, "SUBSCRIPTION_HAS_NOT_BEEN_CANCELED", reasonOf(t, err))

	// The cancel retried after a resume: answered, and not canceled again.
	setCancels := stripeCalls(h, billingtest.OpSetCancel)
	again3, err := c.CancelSubscription(ctx, cancelReq)
	require.NoError(t, err)
	require.True(t, proto.Equal(canceled.GetSubscription(), again3.GetSubscription()))
	require.Equal(t, setCancels, stripeCalls(h, billingtest.OpSetCancel), "the retry did not reach Stripe")
	st, _ := h.Stripe.Subscription(sub.ID)
	require.False(t, st.CancelAtPeriodEnd, "still resumed at Stripe")

	// Cancel again with a new key, then the refused resume's key: still
	// refused, and the subscription stays canceled.
	_, err = c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: "cancel-2"})
	require.NoError(t, err)
	_, err = c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume-refused"})
	require.Equal(t, "SUBSCRIPTION_HAS_NOT_BEEN_CANCELED", reasonOf(t, err))
	st, _ = h.Stripe.Subscription(sub.ID)
	require.True(t, st.CancelAtPeriodEnd)

	// Resume, webhook, resume again.
	resumeReq := &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume-1"}
	resumed, err := c.ResumeSubscription(ctx, resumeReq)
	require.NoError(t, err)
	require.Nil(t, resumed.GetSubscription().GetCanceledAt())
	ingest(t, h, c, "customer.subscription.updated", sub.ID)
	awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool { return s.GetCanceledAt() == nil }, "resumed")
	again4, err := c.ResumeSubscription(ctx, resumeReq)
	require.NoError(t, err, "a retried resume is not refused as SUBSCRIPTION_HAS_NOT_BEEN_CANCELED")
	require.True(t, proto.Equal(resumed.GetSubscription(), again4.GetSubscription()))

	// Change of cycle, webhook, again.
	yearly := &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY, IdempotencyKey: "yearly-1"}
	changed, err := c.UpdateSubscriptionRecurring(ctx, yearly)
	require.NoError(t, err)
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, changed.GetSubscription().GetPendingRecurring())
	ingest(t, h, c, "customer.subscription.updated", sub.ID)
	again5, err := c.UpdateSubscriptionRecurring(ctx, yearly)
	require.NoError(t, err, "a retried change is not refused as SAME_SUBSCRIPTION_RECURRING")
	require.True(t, proto.Equal(changed.GetSubscription(), again5.GetSubscription()))
	require.Equal(t, 1, stripeCalls(h, billingtest.OpScheduleChange), "the schedule was created once")

	// The portal link is the same too, and Stripe was asked once.
	portals := stripeCalls(h, billingtest.OpCreatePortal)
	portal2, err := c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: alice, IdempotencyKey: "portal-1"})
	require.NoError(t, err)
	require.Equal(t, portal.GetUrl(), portal2.GetUrl())
	require.Equal(t, portals, stripeCalls(h, billingtest.OpCreatePortal))
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	_, r := reason(t, err)
	return r
}

// TestIdempotencyKeyMisuse: a key belongs to one call of one user.
func TestIdempotencyKeyMisuse(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	bob := &billingv1.User{Id: "bob", Email: "a@example.com"}
	subscribe(t, h, c, alice)

	_, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY, IdempotencyKey: "k"})
	require.NoError(t, err)

	tests := []struct {
		name string
		call func() error
	}{
		{"other arguments", func() error {
			_, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "k"})
			return err
		}},
		{"another mutation", func() error {
			_, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: "k"})
			return err
		}},
		{"checkout with another cycle", func() error {
			_, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY, IdempotencyKey: "k"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, r := reason(t, tt.call())
			require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r)
			require.Equal(t, codes.InvalidArgument, code)
		})
	}
	got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: alice})
	require.NoError(t, err)
	require.Nil(t, got.GetSubscription().GetCanceledAt(), "the refused cancel did nothing")
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, got.GetSubscription().GetPendingRecurring(), "the refused change did nothing")

	// Bob's "k" is his own: his checkout runs.
	resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: bob, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "k"})
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(resp.GetUrl())
	require.True(t, ok)
	require.Equal(t, "bob", sess.ClientReferenceID)

	// A key longer than Stripe's limit is refused.
	_, err = c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: strings.Repeat("x", 256)})
	require.Equal(t, "BAD_REQUEST", reasonOf(t, err))
}

// TestIdempotentRetryOfATransientFailureRunsAgain: Stripe unavailable is not
// an answer to keep; the retry with the key runs the checkout.
func TestIdempotentRetryOfATransientFailureRunsAgain(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	req := &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "k"}

	h.Stripe.FailNext(billingtest.OpCreateCheckout, billingtest.Unavailable())
	_, err := c.Checkout(ctx, req)
	require.Equal(t, "PAYMENT_PROVIDER_UNAVAILABLE", reasonOf(t, err))
	first, err := c.Checkout(ctx, req)
	require.NoError(t, err)
	again, err := c.Checkout(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first.GetUrl(), again.GetUrl())
	require.Equal(t, 2, stripeCalls(h, billingtest.OpCreateCheckout), "the failed call and the one that succeeded")
}

// concurrentCancels sends two cancels with one key, the second (on second)
// while the first is held at Stripe, and returns both answers.
func concurrentCancels(t *testing.T, h *billingtest.Harness, first, second billingv1.BillingClient, user *billingv1.User) [2]*billingv1.CancelSubscriptionResponse {
	t.Helper()
	req := &billingv1.CancelSubscriptionRequest{User: user, IdempotencyKey: "together"}
	gate := h.Stripe.Hold(billingtest.OpSetCancel)
	defer gate.Release()
	var (
		wg   sync.WaitGroup
		out  [2]*billingv1.CancelSubscriptionResponse
		errs [2]error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		out[0], errs[0] = first.CancelSubscription(context.Background(), req)
	}()
	<-gate.Entered()
	go func() {
		defer wg.Done()
		out[1], errs[1] = second.CancelSubscription(context.Background(), req)
	}()
	require.Eventually(t, func() bool { return h.IdempotencyWaiters() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the second call waits for the first")
	gate.Release()
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	return out
}

func TestIdempotentConcurrentCallsRunOnce(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	alice := &billingv1.User{Id: "alice"}
	subscribe(t, h, c, alice)

	out := concurrentCancels(t, h, c, c, alice)
	require.True(t, proto.Equal(out[0].GetSubscription(), out[1].GetSubscription()), "the second call gets the first's answer")
	require.NotNil(t, out[1].GetSubscription().GetCanceledAt())
	require.Equal(t, 1, stripeCalls(h, billingtest.OpSetCancel), "Stripe canceled once")
}

// TestIdempotencyAcrossReplicas: two billing replicas on one NATS share the
// records: a retry on the other replica, concurrent or later, gets the
// first answer.
func TestIdempotencyAcrossReplicas(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	one := edgeClient(h.Conn)
	alice := &billingv1.User{Id: "alice"}
	subscribe(t, h, one, alice)
	// Started once the first replica's event consumer exists: nats-server
	// 2.15.2 races (under -race) a stream update with a consumer being
	// created on that stream.
	two := edgeClient(h.StartReplica())

	out := concurrentCancels(t, h, one, two, alice)
	require.True(t, proto.Equal(out[0].GetSubscription(), out[1].GetSubscription()))
	require.Equal(t, 1, stripeCalls(h, billingtest.OpSetCancel), "Stripe canceled once")

	ctx := context.Background()
	resume := &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume"}
	first, err := one.ResumeSubscription(ctx, resume)
	require.NoError(t, err)
	again, err := two.ResumeSubscription(ctx, resume)
	require.NoError(t, err, "the other replica replays, it does not refuse")
	require.True(t, proto.Equal(first.GetSubscription(), again.GetSubscription()))
	_, err = two.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: "resume"})
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", reasonOf(t, err), "misuse is seen on every replica")
}

// TestIdempotencyRecordsExpire: the records live in a bucket that forgets
// them, no sooner than the 24 hours Stripe keeps its keys.
func TestIdempotencyRecordsExpire(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	ttl := h.IdempotencyTTL()
	require.GreaterOrEqual(t, ttl, 24*time.Hour)
	require.Less(t, ttl, 30*24*time.Hour, "records do expire")
}
