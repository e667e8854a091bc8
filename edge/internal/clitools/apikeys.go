package clitools

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// The key a settings route writes is either the caller's own (apiKey in
// the POST body) or one the route created. Next to a key it created, the
// route records the key's id in the settings file; a key is the route's
// only while the recorded id is the id of the key the file holds. The
// route reuses its key while core still has it, and revokes it when it
// replaces or removes it, so no key it created outlives its place in the
// file. A caller's own key is never revoked.

// ownKey returns the id of the key the route created for token, when the
// file records it (id) and core still has it; "" otherwise: no key
// recorded, a key the user wrote or edited into the file, or a key revoked
// since.
func ownKey(ctx context.Context, admin Admin, token, id string) (string, error) {
	if token == "" || id == "" || !strings.Contains(token, "-"+id+"-") {
		return "", nil
	}
	res, err := admin.ListAPIKeys(ctx, &corev1.ListAPIKeysRequest{})
	if err != nil {
		return "", problemError{openai.FromError(err)}
	}
	for _, k := range res.GetKeys() {
		// Current keys are sk-{machineId}-{keyId}-{secret}.
		if k.GetId() == id && strings.HasPrefix(token, "sk-"+k.GetMachineId()+"-"+id+"-") {
			return id, nil
		}
	}
	return "", nil
}

// revokeKey revokes the key the route created; one already gone is fine.
func revokeKey(ctx context.Context, admin Admin, id string) error {
	_, err := admin.DeleteAPIKey(ctx, &corev1.DeleteAPIKeyRequest{Id: id})
	if err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	return nil
}

// revokeUnwritten revokes the key a POST created (id; "" when it created
// none) unless the settings file came to hold it (*written), so that a POST
// whose write fails leaves no key behind and a retry does not add another.
// It runs to the end even when the caller has gone; a key that cannot be
// revoked leaves the POST's own failure as the answer.
func revokeUnwritten(ctx context.Context, admin Admin, id string, written *bool) {
	if id != "" && !*written {
		_ = revokeKey(context.WithoutCancel(ctx), admin, id)
	}
}

// notRevoked answers a POST that wrote its settings but could not revoke
// the key they held before.
func notRevoked(id string, err error) error {
	p := openai.FromError(err)
	return problemError{openai.NewProblem(p.Status, "key_not_revoked",
		"the settings file was updated, but the API key '"+id+"' it held before could not be revoked; revoke it with DELETE /api/keys/"+id, "")}
}
