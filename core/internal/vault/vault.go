// Package vault seals and opens the secrets of provider connections.
package vault

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/secrets"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Vault seals connection secrets with AES-256-GCM, bound to the connection
// id, so a sealed blob copied to another connection does not open.
type Vault struct {
	box *secrets.Box
}

// New returns a Vault over box.
func New(box *secrets.Box) *Vault { return &Vault{box: box} }

// Seal stores sec into c.SealedSecrets.
func (v *Vault) Seal(c *busv1.Connection, sec *busv1.Secrets) error {
	plain, err := proto.Marshal(sec)
	if err != nil {
		return fmt.Errorf("encode secrets: %w", err)
	}
	sealed, err := v.box.Seal(plain, []byte(c.GetId()))
	if err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	c.SealedSecrets = sealed
	return nil
}

// Open returns c's secrets (empty when it has none).
func (v *Vault) Open(c *busv1.Connection) (*busv1.Secrets, error) {
	sec := &busv1.Secrets{}
	if len(c.GetSealedSecrets()) == 0 {
		return sec, nil
	}
	plain, err := v.box.Open(c.GetSealedSecrets(), []byte(c.GetId()))
	if err != nil {
		return nil, errors.New("connection secrets cannot be opened (was the secret key changed?)")
	}
	if err := proto.Unmarshal(plain, sec); err != nil {
		return nil, errors.New("connection secrets cannot be decoded")
	}
	return sec, nil
}

// Credential is what a connection presents upstream: its API key, else its
// OAuth access token (interface 4.2, embeddings rule 2).
func Credential(sec *busv1.Secrets) string {
	if sec.GetApiKey() != "" {
		return sec.GetApiKey()
	}
	return sec.GetAccessToken()
}
