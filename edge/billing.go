package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/edge/internal/graphql"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/edge/internal/userauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// BillingConfig configures the edge's billing routes.
type BillingConfig struct {
	// JWTSecret (SWITCHBOARD_JWT_SECRET) verifies HS256 user tokens.
	JWTSecret string
	// JWKSURL (SWITCHBOARD_JWKS_URL) publishes the keys of other user tokens.
	JWKSURL string
	// JWTIssuer and JWTAudience (SWITCHBOARD_JWT_ISSUER, _AUDIENCE) are
	// required of user tokens when set.
	JWTIssuer   string
	JWTAudience string
	// Dev serves the GraphiQL page at GET /graphql and lets anonymous
	// callers introspect the schema (a loopback listener).
	Dev bool
}

// webhookPath is Stripe's webhook route.
const webhookPath = "/webhooks/stripe"

// maxWebhookBytes caps a Stripe webhook delivery (Stripe's are far smaller).
const maxWebhookBytes = 1 << 20

// webhookTimeout bounds handing a delivery to billing; Stripe waits longer.
const webhookTimeout = 15 * time.Second

// mountBilling adds the billing routes to mux: POST /graphql (and the
// GraphiQL page at GET /graphql with cfg.Dev) and POST /webhooks/stripe,
// all served through billing's gRPC service on conn.
func mountBilling(mux mounter, conn grpc.ClientConnInterface, cfg BillingConfig, log *slog.Logger) error {
	if conn == nil {
		return errors.New("edge: billing routes need a billing connection")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	verifier := userauth.New(userauth.Config{Secret: cfg.JWTSecret, JWKSURL: cfg.JWKSURL, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Log: log})
	if !verifier.Configured() {
		log.Warn("neither SWITCHBOARD_JWT_SECRET nor SWITCHBOARD_JWKS_URL is set: GraphQL users cannot sign in")
	}
	mux.Handle("POST /graphql", graphql.NewHandlerWith(conn, verifier, log, graphql.Options{
		OpenIntrospection: cfg.Dev, SlowBody: openai.ErrBodySlow, BusyBody: openai.ErrBodyMemory}))
	if cfg.Dev {
		mux.Handle("GET /graphql", graphql.Playground("/graphql"))
	}
	mux.Handle("POST "+webhookPath, stripeWebhook(billingv1.NewBillingClient(conn), log))
	return nil
}

// MintDevToken signs a development user token (HS256 with the local
// SWITCHBOARD_JWT_SECRET) for `switchboard token --user U --email E`.
func MintDevToken(secret, userID, email string, ttl time.Duration) (string, error) {
	return userauth.Mint(secret, userID, email, ttl)
}

// MintDevTokenFor is MintDevToken for a deployment that requires an issuer
// and audience (SWITCHBOARD_JWT_ISSUER, _AUDIENCE); empty values keep the
// defaults.
func MintDevTokenFor(secret, issuer, audience, userID, email string, ttl time.Duration) (string, error) {
	if issuer == "" {
		issuer = "switchboard"
	}
	return userauth.MintFor(secret, issuer, audience, userID, email, ttl)
}

// stripeWebhook hands a delivery's raw body and Stripe-Signature header to
// billing, and answers 2xx only once billing stored the event on the bus.
// A bad signature is 400 (Stripe gives up); anything else is 5xx, so Stripe
// delivers again.
func stripeWebhook(client billingv1.BillingClient, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				webhookAnswer(w, http.StatusRequestEntityTooLarge, "payload too large")
				return
			}
			if errors.Is(err, openai.ErrBodySlow) {
				webhookAnswer(w, http.StatusRequestTimeout, "the body arrived too slowly")
				return
			}
			if errors.Is(err, openai.ErrBodyMemory) {
				w.Header().Set("Retry-After", "1")
				webhookAnswer(w, http.StatusServiceUnavailable, "busy, retry later")
				return
			}
			webhookAnswer(w, http.StatusBadRequest, "could not read the body")
			return
		}
		sig := r.Header.Get("Stripe-Signature")
		if sig == "" {
			webhookAnswer(w, http.StatusBadRequest, "missing Stripe-Signature header")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), webhookTimeout)
		defer cancel()
		resp, err := client.IngestWebhook(ctx, &billingv1.IngestWebhookRequest{Payload: body, Signature: sig})
		if err != nil {
			st := status.Convert(err)
			switch st.Code() {
			case codes.InvalidArgument:
				webhookAnswer(w, http.StatusBadRequest, st.Message())
			default:
				log.Warn("stripe webhook not stored; stripe will retry", "code", st.Code().String(), "err", st.Message())
				webhookAnswer(w, http.StatusServiceUnavailable, "event not stored, retry later")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"received": true, "id": resp.GetEventId(), "duplicate": resp.GetDuplicate()})
	})
}

func webhookAnswer(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": msg})
}
