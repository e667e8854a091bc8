// Package vault seals and opens the secrets of provider connections.
package vault

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

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

// ProxyURL is the proxy of c's upstream calls: the sealed one, else the
// plain one a connection written by an earlier release still carries.
func ProxyURL(c *busv1.Connection, sec *busv1.Secrets) string {
	if sec.GetProxyUrl() != "" {
		return sec.GetProxyUrl()
	}
	return c.GetData().GetProxyUrl()
}

// SealLegacy moves what earlier releases kept in plain text on c (its proxy
// URL) into c's sealed secrets. It reports whether c changed.
func (v *Vault) SealLegacy(c *busv1.Connection) (bool, error) {
	if c.GetData().GetProxyUrl() == "" {
		return false, nil
	}
	sec, err := v.Open(c)
	if err != nil {
		return false, err
	}
	if sec.GetProxyUrl() == "" {
		sec.ProxyUrl = c.GetData().GetProxyUrl()
	}
	if err := v.Seal(c, sec); err != nil {
		return false, err
	}
	c.Data.ProxyUrl = ""
	return true, nil
}

// KeepRedacted returns edited, a proxy URL a client sent back after editing
// the redacted form RedactURL showed it, with the credentials it still
// shows as "***" taken from stored (the same user's password, or the
// token given as the user name): a client that changed only the host must
// not store "***" as the password. Anything else is returned as it is.
func KeepRedacted(edited, stored string) string {
	e, err := url.Parse(edited)
	if err != nil || e.User == nil {
		return edited
	}
	s, err := url.Parse(stored)
	if err != nil || s.User == nil {
		return edited
	}
	pw, hasPW := e.User.Password()
	storedPW, storedHasPW := s.User.Password()
	switch {
	case hasPW && pw == "***" && storedHasPW && e.User.Username() == s.User.Username():
		e.User = url.UserPassword(s.User.Username(), storedPW)
	case !hasPW && e.User.Username() == "***" && !storedHasPW:
		e.User = s.User
	default:
		return edited
	}
	return e.String()
}

// RedactURL shows a URL without its credentials: the password becomes
// "***", and so does a user name given without a password (some proxies
// take a token as the user name). An unparsable URL shows as "".
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "***")
		} else {
			u.User = url.User("***")
		}
	}
	return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
}
