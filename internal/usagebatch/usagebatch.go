// Package usagebatch frames usage events on the SB_USAGE stream. A message
// carries either one busv1.UsageEvent (no contract.HeaderUsageEvents
// header: every message published before batches, and still a valid form)
// or a busv1.UsageBatch of several, marked by that header with the events'
// count. The publisher builds a batch from events it has already encoded,
// appending each as field 1 of the batch (Append): nothing is encoded
// twice. A batch large enough to gain is compressed with S2 as it is
// published (Compress; contract.HeaderUsageEncoding names it): usage events
// repeat their machine, key, connection and model ids, and S2 roughly
// halves a batch (measured: 2.3 times smaller at chat load), so the
// stream's size bound holds that much more history. Readers split a
// message back into its events' encodings (Split), decompressing first,
// and decode each on its own, so one bad event does not hide the others.
package usagebatch

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// eventsField is UsageBatch.events.
const eventsField protowire.Number = 1

// ErrMalformed is a message whose batch framing cannot be read.
var ErrMalformed = errors.New("malformed usage batch")

// Append appends one encoded busv1.UsageEvent to the encoding of a
// busv1.UsageBatch.
func Append(batch, event []byte) []byte {
	batch = protowire.AppendTag(batch, eventsField, protowire.BytesType)
	return protowire.AppendBytes(batch, event)
}

// Size is the bytes Append adds for an event of n bytes.
func Size(n int) int {
	return protowire.SizeTag(eventsField) + protowire.SizeBytes(n)
}

// SetHeader marks h as the header of a batch of n events.
func SetHeader(h nats.Header, n int) {
	h.Set(contract.HeaderUsageEvents, strconv.Itoa(n))
}

// compressFrom is the smallest batch Compress compresses: below it the
// saving is a few bytes.
const compressFrom = 1 << 10

// MaxBatchBytes bounds a batch once decompressed, far above what the
// publisher builds (64 KiB): S2 turns megabytes of one repeated byte into
// a few dozen, and a reader allocates what the block says before decoding.
const MaxBatchBytes = 1 << 20

// Compress returns the payload to publish for batch, the encoding of a
// busv1.UsageBatch: S2's block of it when that is smaller (compressed is
// then true, and the message's header must say so: MarkCompressed), else
// batch itself.
func Compress(batch []byte) (payload []byte, compressed bool) {
	if len(batch) < compressFrom {
		return batch, false
	}
	enc := s2.Encode(make([]byte, s2.MaxEncodedLen(len(batch))), batch)
	if len(enc) >= len(batch) {
		return batch, false
	}
	return enc, true
}

// MarkCompressed marks h as the header of a batch Compress compressed.
func MarkCompressed(h nats.Header) {
	h.Set(contract.HeaderUsageEncoding, contract.UsageEncodingS2)
}

// IsBatch reports whether a message with header h is a batch.
func IsBatch(h nats.Header) bool {
	return h.Get(contract.HeaderUsageEvents) != ""
}

// Split returns the encodings of the events a message carries, in order:
// data itself when the message is a single event, else each event of the
// batch (sub-slices of data). A batch whose framing is broken, or whose
// events do not match its header's count, or whose compression cannot be
// read, is ErrMalformed.
func Split(h nats.Header, data []byte) ([][]byte, error) {
	if !IsBatch(h) {
		return [][]byte{data}, nil
	}
	switch enc := h.Get(contract.HeaderUsageEncoding); enc {
	case "":
	case contract.UsageEncodingS2:
		n, err := s2.DecodedLen(data)
		if err != nil || n > MaxBatchBytes {
			return nil, fmt.Errorf("%w: S2 block of %d bytes decoding to %d (%v)", ErrMalformed, len(data), n, err)
		}
		if data, err = s2.Decode(make([]byte, n), data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	default:
		return nil, fmt.Errorf("%w: unknown %s %q", ErrMalformed, contract.HeaderUsageEncoding, enc)
	}
	want, err := strconv.Atoi(h.Get(contract.HeaderUsageEvents))
	if err != nil || want < 0 {
		return nil, fmt.Errorf("%w: %s header %q", ErrMalformed, contract.HeaderUsageEvents, h.Get(contract.HeaderUsageEvents))
	}
	// The count comes from the sender: it sizes nothing before the events
	// are found.
	var out [][]byte
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
		if num != eventsField || typ != protowire.BytesType {
			// An unknown field (a later version's): skipped.
			m := protowire.ConsumeFieldValue(num, typ, data)
			if m < 0 {
				return nil, fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(m))
			}
			data = data[m:]
			continue
		}
		ev, m := protowire.ConsumeBytes(data)
		if m < 0 {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(m))
		}
		if len(out) == want {
			return nil, fmt.Errorf("%w: more events than the header's %d", ErrMalformed, want)
		}
		out = append(out, ev)
		data = data[m:]
	}
	if len(out) != want {
		return nil, fmt.Errorf("%w: %d events, header says %d", ErrMalformed, len(out), want)
	}
	return out, nil
}

// Count is how many events a message carries: 1 for a single event, the
// header's count for a batch (0 when that header is unreadable). It reads
// only the header.
func Count(h nats.Header) int {
	if !IsBatch(h) {
		return 1
	}
	n, err := strconv.Atoi(h.Get(contract.HeaderUsageEvents))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
