package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/payments"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Syncer copies Stripe objects into billing's state (account.Service).
type Syncer interface {
	SyncCheckoutSession(ctx context.Context, id string) error
	SyncSubscription(ctx context.Context, id string, mutate func(*billingv1.SubscriptionRecord)) (*billingv1.SubscriptionRecord, error)
	SyncInvoice(ctx context.Context, id string) (*billingv1.InvoiceRecord, error)
	MarkSubscriptionEnded(ctx context.Context, id string) error
}

var _ Syncer = (*account.Service)(nil)

// Handled are the event types billing applies; others are acknowledged and
// ignored.
var Handled = map[string]bool{
	"checkout.session.completed":    true,
	"customer.subscription.created": true,
	"customer.subscription.updated": true,
	"customer.subscription.deleted": true,
	"invoice.created":               true,
	"invoice.finalized":             true,
	"invoice.updated":               true,
	"invoice.paid":                  true,
	"invoice.payment_failed":        true,
	"invoice.finalization_failed":   true,
	"invoice.voided":                true,
	"invoice.marked_uncollectible":  true,
	"invoice.deleted":               true,
}

// Dispatcher applies an event by re-fetching its object.
type Dispatcher struct {
	sync Syncer
	log  *slog.Logger
}

var _ Applier = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher over sync.
func NewDispatcher(sync Syncer, log *slog.Logger) *Dispatcher {
	return &Dispatcher{sync: sync, log: log}
}

// Apply implements Applier.
func (d *Dispatcher) Apply(ctx context.Context, ev Event) error {
	if !Handled[ev.Type] {
		d.log.Debug("stripe event ignored", "event", ev.ID, "type", ev.Type)
		return nil
	}
	if ev.ObjectID == "" {
		return fmt.Errorf("%w: event %s has no object id", ErrPermanent, ev.ID)
	}
	var err error
	switch {
	case ev.Type == "checkout.session.completed":
		err = d.sync.SyncCheckoutSession(ctx, ev.ObjectID)
	case ev.Type == "customer.subscription.deleted":
		_, err = d.sync.SyncSubscription(ctx, ev.ObjectID, nil)
		if errors.Is(err, payments.ErrNotFound) {
			err = d.sync.MarkSubscriptionEnded(ctx, ev.ObjectID)
		}
	case ev.Type == "customer.subscription.created", ev.Type == "customer.subscription.updated":
		_, err = d.sync.SyncSubscription(ctx, ev.ObjectID, nil)
	default: // invoice.*
		_, err = d.sync.SyncInvoice(ctx, ev.ObjectID)
	}
	if errors.Is(err, account.ErrForeignCustomer) {
		d.log.Info("stripe event about a customer switchboard did not create; ignored", "event", ev.ID, "type", ev.Type)
		return nil
	}
	return err
}
