package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
)

const secret = "whsec_test"

func sign(payload []byte, at time.Time) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

const goodEvent = `{"id":"evt_1","object":"event","api_version":"2023-10-16","created":1700000000,"type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice"}}}`

func TestVerify(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		payload string
		header  string
		want    error
	}{
		{"good", goodEvent, sign([]byte(goodEvent), now), nil},
		{"no header", goodEvent, "", ErrBadSignature},
		{"no v1", goodEvent, "t=123", ErrBadSignature},
		{"bad pair", goodEvent, "t", ErrBadSignature},
		{"wrong signature", goodEvent, "t=" + strings.Split(sign([]byte(goodEvent), now), ",")[0][2:] + ",v1=abcd", ErrBadSignature},
		{"stale", goodEvent, sign([]byte(goodEvent), now.Add(-6*time.Minute)), ErrStale},
		{"tampered", strings.Replace(goodEvent, "in_1", "in_2", 1), sign([]byte(goodEvent), now), ErrBadSignature},
		{"api version", strings.Replace(goodEvent, "2023-10-16", "2022-11-15", 1), "", ErrAPIVersion},
		{"not json", "{", "", ErrMalformed},
		{"bad event id", strings.Replace(goodEvent, "evt_1", "evt.1>", 1), "", ErrMalformed},
		{"bad type", strings.Replace(goodEvent, "invoice.paid", "invoice..paid", 1), "", ErrMalformed},
		{"wildcard type", strings.Replace(goodEvent, "invoice.paid", "invoice.*", 1), "", ErrMalformed},
		{"bad object id", strings.Replace(goodEvent, `"in_1"`, `"in 1"`, 1), "", ErrMalformed},
		{"not an event", strings.Replace(goodEvent, `"object":"event"`, `"object":"charge"`, 1), "", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == "" && tt.name != "no header" {
				header = sign([]byte(tt.payload), now)
			}
			ev, err := Verify([]byte(tt.payload), header, secret, 0)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Event{ID: "evt_1", Type: "invoice.paid", APIVersion: "2023-10-16", ObjectID: "in_1",
				Created: time.Unix(1700000000, 0).UTC()}, ev)
		})
	}
	_, err := Verify([]byte(goodEvent), sign([]byte(goodEvent), now), "", 0)
	require.ErrorIs(t, err, ErrNotConfigured)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodEvent))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"","type":"a.b"}`))
	f.Add([]byte(`{"id":"evt_1","type":"a.b","data":{"object":{"id":"x.y"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Parse(data)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed), "only malformed errors: %v", err)
			return
		}
		// What Parse accepts is safe as a subject and key part.
		for _, s := range []string{ev.ID, ev.ObjectID} {
			require.NotContains(t, s, ".")
			require.False(t, strings.ContainsAny(s, " *>\t\r\n/"), "%q", s)
		}
		require.False(t, strings.ContainsAny(ev.Type, " *>\t\r\n/"), "%q", ev.Type)
		require.NotEmpty(t, ev.ID)
		require.False(t, strings.HasPrefix(ev.Type, ".") || strings.HasSuffix(ev.Type, "."))
	})
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(goodEvent), "t=1700000000,v1=00")
	f.Add([]byte(goodEvent), "")
	f.Add([]byte("{}"), "t=,v1=")
	f.Fuzz(func(t *testing.T, payload []byte, header string) {
		_, err := Verify(payload, header, secret, 0)
		// A forged header never verifies.
		require.Error(t, err)
	})
}
