package usagebatch_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

func TestAppendBuildsAUsageBatch(t *testing.T) {
	var data []byte
	var ids []string
	for i := range 3 {
		ev := &busv1.UsageEvent{EventId: "e" + strconv.Itoa(i), MachineId: "0123456789abcdef", PromptTokens: int64(i)}
		enc, err := proto.Marshal(ev)
		require.NoError(t, err)
		before := len(data)
		data = usagebatch.Append(data, enc)
		assert.Equal(t, usagebatch.Size(len(enc)), len(data)-before)
		ids = append(ids, ev.EventId)
	}
	// The framing is the protobuf encoding of UsageBatch.
	var b busv1.UsageBatch
	require.NoError(t, proto.Unmarshal(data, &b))
	require.Len(t, b.Events, 3)
	for i, ev := range b.Events {
		assert.Equal(t, ids[i], ev.EventId)
	}

	h := nats.Header{}
	usagebatch.SetHeader(h, 3)
	assert.True(t, usagebatch.IsBatch(h))
	assert.Equal(t, 3, usagebatch.Count(h))
	parts, err := usagebatch.Split(h, data)
	require.NoError(t, err)
	require.Len(t, parts, 3)
	for i, p := range parts {
		var ev busv1.UsageEvent
		require.NoError(t, proto.Unmarshal(p, &ev))
		assert.Equal(t, ids[i], ev.EventId)
	}
}

func TestSplit(t *testing.T) {
	one, err := proto.Marshal(&busv1.UsageEvent{EventId: "x"})
	require.NoError(t, err)
	batch := usagebatch.Append(usagebatch.Append(nil, one), one)
	tests := []struct {
		name   string
		header string // "" is no header
		data   []byte
		want   int
		err    bool
	}{
		{"single event, no header", "", one, 1, false},
		{"batch", "2", batch, 2, false},
		{"empty batch", "0", nil, 0, false},
		{"count mismatch", "3", batch, 0, true},
		{"bad count", "two", batch, 0, true},
		{"truncated", "2", batch[:len(batch)-1], 0, true},
		{"unknown field skipped", "2", append(append([]byte{}, batch...), 0x10, 0x01), 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			if tt.header != "" {
				h.Set(contract.HeaderUsageEvents, tt.header)
			}
			got, err := usagebatch.Split(h, tt.data)
			if tt.err {
				require.ErrorIs(t, err, usagebatch.ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Len(t, got, tt.want)
		})
	}
}

// A large batch is compressed and splits back into the very events; a
// small one is left as it is; a compressed payload that cannot be read, or
// an unknown encoding, is malformed, not taken for events.
func TestCompressedBatches(t *testing.T) {
	var batch []byte
	var want [][]byte
	for i := range 40 {
		enc, err := proto.Marshal(&busv1.UsageEvent{
			EventId: fmt.Sprintf("0b6f6a4e-6f57-4c8e-9d1e-%012d", i), MachineId: "0123456789abcdef",
			KeyId: "key_7d1e9c20", ConnectionId: "conn-a", Model: "openai/gpt-4o-mini", PromptTokens: int64(i), CompletionTokens: 12,
		})
		require.NoError(t, err)
		want = append(want, enc)
		batch = usagebatch.Append(batch, enc)
	}
	payload, compressed := usagebatch.Compress(batch)
	require.True(t, compressed)
	assert.Less(t, len(payload)*2, len(batch), "at least halved: %d of %d bytes", len(payload), len(batch))
	h := nats.Header{}
	usagebatch.SetHeader(h, len(want))
	usagebatch.MarkCompressed(h)
	got, err := usagebatch.Split(h, payload)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, len(want), usagebatch.Count(h))

	small := usagebatch.Append(nil, want[0])
	payload, compressed = usagebatch.Compress(small)
	assert.False(t, compressed)
	assert.Equal(t, small, payload)

	for name, tt := range map[string]struct {
		encoding string
		data     []byte
	}{
		"not S2":           {contract.UsageEncodingS2, batch},
		"truncated":        {contract.UsageEncodingS2, payload[:len(payload)/2]},
		"unknown encoding": {"zstd", batch},
	} {
		h := nats.Header{}
		usagebatch.SetHeader(h, len(want))
		h.Set(contract.HeaderUsageEncoding, tt.encoding)
		_, err := usagebatch.Split(h, tt.data)
		assert.ErrorIs(t, err, usagebatch.ErrMalformed, name)
	}

	// A well-formed batch past the bound once decoded (a few KiB
	// compressed: the same event over and over) is not decoded.
	var huge []byte
	n := 0
	for len(huge) <= usagebatch.MaxBatchBytes {
		huge = usagebatch.Append(huge, want[0])
		n++
	}
	payload, compressed = usagebatch.Compress(huge)
	require.True(t, compressed)
	require.Less(t, len(payload), 64<<10)
	h = nats.Header{}
	usagebatch.SetHeader(h, n)
	usagebatch.MarkCompressed(h)
	_, err = usagebatch.Split(h, payload)
	assert.ErrorIs(t, err, usagebatch.ErrMalformed)
}

func FuzzSplit(f *testing.F) {
	one, _ := proto.Marshal(&busv1.UsageEvent{EventId: "x", MachineId: "0123456789abcdef"})
	f.Add("1", "", usagebatch.Append(nil, one))
	f.Add("2", "", []byte{0x0a, 0xff})
	many := usagebatch.Append(nil, one)
	for len(many) < 2048 {
		many = usagebatch.Append(many, one)
	}
	compressed, _ := usagebatch.Compress(many)
	f.Add(strconv.Itoa(len(many)/len(usagebatch.Append(nil, one))), contract.UsageEncodingS2, compressed)
	f.Fuzz(func(t *testing.T, count, encoding string, data []byte) {
		h := nats.Header{}
		h.Set(contract.HeaderUsageEvents, count)
		if encoding != "" {
			h.Set(contract.HeaderUsageEncoding, encoding)
		}
		parts, err := usagebatch.Split(h, data)
		if err != nil {
			return
		}
		assert.Equal(t, usagebatch.Count(h), len(parts))
	})
}

func TestCountEvents(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx := context.Background()
	require.NoError(t, spine.EnsureStreams(ctx, js, spine.Topology{}.Streams()...))

	events, msgs, err := usagebatch.CountEvents(ctx, js, spine.StreamUsage)
	require.NoError(t, err)
	assert.Zero(t, events+msgs)

	one, err := proto.Marshal(&busv1.UsageEvent{EventId: "x"})
	require.NoError(t, err)
	subject := spine.SubjectUsage + ".0123456789abcdef"
	for range 3 {
		_, err = js.Publish(ctx, subject, one)
		require.NoError(t, err)
	}
	for _, n := range []int{2, 300} {
		msg := nats.NewMsg(subject)
		for range n {
			msg.Data = usagebatch.Append(msg.Data, one)
		}
		usagebatch.SetHeader(msg.Header, n)
		_, err = js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	events, msgs, err = usagebatch.CountEvents(ctx, js, spine.StreamUsage)
	require.NoError(t, err)
	assert.Equal(t, 3+2+300, events)
	assert.Equal(t, 5, msgs)
}
