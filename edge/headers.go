package edge

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboardhq/switchboard/edge/internal/graphql"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
)

// checkHeaders refuses, in the route's error shape and before anything
// reaches grpc-go, a request carrying a header the edge would hand to
// another role that cannot travel as sent (openai.MetadataSafe: printable
// ASCII). grpc-go refuses such metadata with an internal error (a 500 for
// the client's own header), grpc-gateway drops it (a key or a machine core
// never sees), and a proto string that is not UTF-8 cannot be sent at all.
//
//   - Gateway routes: the headers of openai.UnsafeHeader (a key header is a
//     401 invalid_api_key, any other a 400 invalid_header naming it), and
//     the machine id of a /{machineId}/v1/... path, which reaches core as
//     metadata too (400 invalid_machine_id, as core answers for one that is
//     not 16 lowercase hex characters).
//   - The admin API (/api/...): the same headers (Authorization, the admin
//     token, is a 401 invalid_admin_token).
//   - /graphql: Idempotency-Key, which billing receives; Authorization is
//     the user's token, checked by its verifier.
func checkHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		machine := legacyMachine(r)
		switch {
		case isGatewayPath(p) || machine != "":
			if name := openai.UnsafeHeader(r.Header); name != "" {
				openai.UnsafeHeaderProblem(name, false).WriteFor(w, r)
				return
			}
			if machine != "" && !openai.MetadataSafe(machine) {
				openai.NewProblem(http.StatusBadRequest, "invalid_machine_id",
					"machine id in the path must be 16 lowercase hex characters", "machineId").WriteFor(w, r)
				return
			}
		case strings.HasPrefix(p, "/api/"):
			if name := openai.UnsafeHeader(r.Header); name != "" {
				openai.UnsafeHeaderProblem(name, true).Write(w)
				return
			}
		case p == "/graphql":
			for _, v := range r.Header.Values("Idempotency-Key") {
				if !openai.MetadataSafe(v) {
					graphql.TransportError(w, http.StatusBadRequest, graphql.CodeBadRequest, "the Idempotency-Key header must be printable ASCII")
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// legacyMachine is the machine id of a /{machineId}/v1/... path as the mux
// reads it (from the escaped path, so one holding %2F is found too), or "".
func legacyMachine(r *http.Request) string {
	seg, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if !ok || seg == "" || !strings.HasPrefix(rest, "v1/") {
		return ""
	}
	m, err := url.PathUnescape(seg)
	if err != nil {
		return seg
	}
	return m
}
