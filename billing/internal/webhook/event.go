// Package webhook takes Stripe webhook deliveries in and applies them: it
// verifies a delivery's signature, stores the event on the SB_STRIPE stream
// (de-duplicated by event id) before anyone answers Stripe, and consumes the
// stream, applying each event at most once, retrying failures with backoff
// and keeping events that keep failing for inspection.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
)

// Errors of a delivery that is refused (HTTP 400 to Stripe).
var (
	ErrBadSignature  = errors.New("webhook signature does not verify")
	ErrStale         = errors.New("webhook signature timestamp is too old")
	ErrAPIVersion    = errors.New("webhook event has an unsupported api version; create the endpoint with api version " + stripe.APIVersion)
	ErrMalformed     = errors.New("webhook event is malformed")
	ErrNotConfigured = errors.New("stripe webhook secret is not configured")
)

// Event is what billing reads of a Stripe event: the object is always
// re-fetched from Stripe, so only its id is taken from the payload.
type Event struct {
	ID         string
	Type       string
	APIVersion string
	Created    time.Time
	// ObjectID is data.object.id.
	ObjectID string
}

// Verify checks a delivery's Stripe-Signature header against secret (and
// its timestamp against tolerance; 0 means stripe-go's 5 minutes) and parses
// the event.
func Verify(payload []byte, header, secret string, tolerance time.Duration) (Event, error) {
	if secret == "" {
		return Event{}, ErrNotConfigured
	}
	_, err := stripewebhook.ConstructEventWithOptions(payload, header, secret, stripewebhook.ConstructEventOptions{
		Tolerance:                tolerance,
		IgnoreAPIVersionMismatch: true, // checked below with a clearer error
	})
	switch {
	case errors.Is(err, stripewebhook.ErrTooOld):
		return Event{}, ErrStale
	case errors.Is(err, stripewebhook.ErrNotSigned), errors.Is(err, stripewebhook.ErrInvalidHeader),
		errors.Is(err, stripewebhook.ErrNoValidSignature):
		return Event{}, ErrBadSignature
	case err != nil:
		return Event{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	ev, err := Parse(payload)
	if err != nil {
		return Event{}, err
	}
	if ev.APIVersion != stripe.APIVersion {
		return Event{}, ErrAPIVersion
	}
	return ev, nil
}

type wireEvent struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Type       string `json:"type"`
	APIVersion string `json:"api_version"`
	Created    int64  `json:"created"`
	Data       struct {
		Object struct {
			ID string `json:"id"`
		} `json:"object"`
	} `json:"data"`
}

// Parse reads an event's JSON. The id, type and object id must be plain
// tokens, as Stripe's are, because they become subject and key parts.
func Parse(payload []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(payload, &w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if w.Object != "" && w.Object != "event" {
		return Event{}, fmt.Errorf("%w: object is %q, not event", ErrMalformed, w.Object)
	}
	if !isToken(w.ID, false) {
		return Event{}, fmt.Errorf("%w: bad event id", ErrMalformed)
	}
	if !isToken(w.Type, true) {
		return Event{}, fmt.Errorf("%w: bad event type", ErrMalformed)
	}
	if w.Data.Object.ID != "" && !isToken(w.Data.Object.ID, false) {
		return Event{}, fmt.Errorf("%w: bad object id", ErrMalformed)
	}
	ev := Event{ID: w.ID, Type: w.Type, APIVersion: w.APIVersion, ObjectID: w.Data.Object.ID}
	if w.Created > 0 {
		ev.Created = time.Unix(w.Created, 0).UTC()
	}
	return ev, nil
}

// isToken accepts [A-Za-z0-9_-] (and dots between parts when dotted),
// 1 to 255 characters.
func isToken(s string, dotted bool) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	prevDot := true
	for _, r := range s {
		switch {
		case r == '.' && dotted:
			if prevDot {
				return false
			}
			prevDot = true
			continue
		case r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
		default:
			return false
		}
		prevDot = false
	}
	return !prevDot
}
