package edge

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// jwksEdge is a billing edge whose users sign in with keys published at
// idpURL; closed receives the remote address of each client connection the
// edge has closed.
func jwksEdge(t *testing.T, idpURL string) (*billingEdge, chan string) {
	t.Helper()
	h := billingtest.Start(t, billingtest.Options{})
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, h.Conn, BillingConfig{JWKSURL: idpURL}, nil))
	closed := make(chan string, 16)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- c.RemoteAddr().String()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &billingEdge{t: t, h: h, srv: srv}, closed
}

func signedRS256(t *testing.T, key *rsa.PrivateKey, kid, sub string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// The identity provider's JWKS URL failing (a 5xx, a timeout) is not
// answered as if the user's token were bad (UNAUTHENTICATED, on which a
// frontend signs its user out) but as AUTH_UNAVAILABLE 503: try again.
func TestBillingJWKSOutageIsAuthUnavailable(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(idp.Close)
	e, _ := jwksEdge(t, idp.URL)

	signed := signedRS256(t, key, "k1", "alice")
	for _, op := range []string{`{ currentUser { id } }`, `mutation { checkout(recurring: Monthly) }`} {
		r := e.gql(signed, op, nil)
		require.NotEmpty(t, r.Errors, op)
		require.Equal(t, "AUTH_UNAVAILABLE", r.code(), "%s: %q", op, r.Errors[0].Message)
		require.EqualValues(t, 503, r.Errors[0].Extensions["status"], op)
		require.NotContains(t, r.Errors[0].Message, idp.URL, "the answer does not name the key-set URL")
	}
}

// A client that sends a token naming any key id and hangs up at once (it
// needs no key and no valid signature) does not cancel the key-set fetch
// its request started, nor spend the refresh of the next 30 s: a real
// user's valid token is accepted right after.
func TestBillingHangUpDoesNotStopTheKeySetFetch(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	set := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"k1","use":"sig","n":%q,"e":%q}]}`,
		base64.RawURLEncoding.EncodeToString(key.N.Bytes()), base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()))
	started, release := make(chan struct{}, 16), make(chan struct{})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(set))
	}))
	t.Cleanup(idp.Close)
	e, closed := jwksEdge(t, idp.URL)

	// A made-up token, sent, and the connection closed while the edge
	// fetches the key set; the edge is done with that connection.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"whatever"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + ".AAAA"
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\nAuthorization: Bearer %s\r\n\r\n", forged)
	require.NoError(t, err)
	<-started
	require.NoError(t, conn.Close())
	for addr := <-closed; addr != conn.LocalAddr().String(); addr = <-closed {
	}
	close(release)

	r := e.gql(signedRS256(t, key, "k1", "alice"), `{ currentUser { id } }`, nil)
	require.Empty(t, r.Errors, "a valid user is refused after another client hung up: %v", r.Errors)
	require.JSONEq(t, `{"id":"alice"}`, string(r.Data["currentUser"]))
}
