package dispatch

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Only a write that records a refresh's failure ends a wait on a
// connection that carried a failure already; the other writes of a
// connection do not.
func TestRecordsFailure(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	failed := &busv1.Connection{
		Id: "c", MachineId: "m", Name: "o", Provider: "openai-compatible-oauth", IsActive: true,
		UpdatedAt: timestamppb.New(t0),
		Oauth: &busv1.OAuthState{TokenUrl: "https://t", ClientId: "cid", Generation: 3,
			LastError: "token refresh failed: 401", LastErrorAt: timestamppb.New(t0)},
	}
	change := func(fn func(c *busv1.Connection)) *busv1.Connection {
		c := proto.CloneOf(failed)
		fn(c)
		return c
	}
	later := timestamppb.New(t0.Add(time.Hour))
	for name, tc := range map[string]struct {
		after *busv1.Connection
		want  bool
	}{
		"the same failure recorded again": {change(func(c *busv1.Connection) { c.UpdatedAt, c.Oauth.LastErrorAt = later, later }), true},
		"another failure": {change(func(c *busv1.Connection) {
			c.UpdatedAt, c.Oauth.LastErrorAt, c.Oauth.LastError = later, later, "token refresh failed: 400 (invalid_client)"
		}), true},
		"a connection test": {change(func(c *busv1.Connection) {
			c.LastTest = &busv1.ConnectionTest{TestedAt: later, Status: 401}
		}), false},
		"an edit": {change(func(c *busv1.Connection) { c.UpdatedAt, c.Name = later, "renamed" }), false},
		"refreshed tokens": {change(func(c *busv1.Connection) {
			c.UpdatedAt, c.Oauth.Generation, c.Oauth.LastError = later, 4, ""
		}), false},
		"nothing": {proto.CloneOf(failed), false},
	} {
		if got := recordsFailure(failed, tc.after); got != tc.want {
			t.Errorf("%s: recordsFailure = %v, want %v", name, got, tc.want)
		}
	}
}
