package audio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/internal/sse"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// transcriptDone is the type of the last event of a streamed transcription,
// which holds the whole text and the usage.
const transcriptDone = "transcript.text.done"

// relayTranscript passes the events of a streamed transcription to sink as
// the upstream sends them: whole events, those that came together in one
// call, each framed as the upstream framed it (its name, its data lines).
// The usage is read from the transcript.text.done event; a stream that ends
// without one, or is cut, or stalls, is a failure, committed once an event
// reached sink (the client has seen the answer start: no fallback). An
// error the upstream reports before any event reached sink is the attempt's
// failure as the same error answered with its status would be
// (transcriptError), scrubbed of the credential as error answers are;
// after, it ends the stream as that error (upstreamEventFailure).
func relayTranscript(ctx context.Context, w *watchdog, c *dispatch.Conn, resp *http.Response, sink Sink, out *Transcription) error {
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	out.ContentType = ct
	rd := sse.NewReader(resp.Body, maxResponse)
	defer rd.Release()
	sent, done := false, false
	var batch []byte
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && done {
				return nil
			}
			return streamFailure(w, err, sent)
		}
		if up := transcriptError(ev.Name, ev.Data); up != nil {
			up.Body = c.Scrub(up.Body)
			if !sent {
				return up
			}
			// The events that came with it go first; the error once, as
			// the stream's end.
			if len(batch) > 0 {
				if err := sink(Chunk{ContentType: ct, Data: batch}); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return credential.Committed(err)
				}
			}
			return upstreamEventFailure(up)
		}
		if isTranscriptDone(ev.Data) {
			done = true
			reportJSONUsage(out, ev.Data)
		}
		batch = sse.AppendEvent(batch, ev.Name, ev.Data)
		if rd.Ready() {
			continue // sent with the events that came with it
		}
		if err := sink(Chunk{ContentType: ct, Data: batch}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return credential.Committed(err)
		}
		sent, batch = true, nil // the sink may keep what it was given
	}
}

// streamFailure is the error of a transcription stream that did not end
// with its transcript.text.done event (read's error). Once an event was sent
// it is committed, and says to the client how the stream ended, as a chat
// stream's does; before, it is the attempt's failure, the next connection's
// turn.
func streamFailure(w *watchdog, read error, sent bool) error {
	var stalled *upstream.StallError
	err := w.err(read)
	code, msg := "stream_interrupted", "the upstream stream broke off"
	switch {
	case errors.Is(read, io.EOF):
		msg = "the upstream ended the stream before its " + transcriptDone + " event"
		err = badUpstream("transcription stream: it ended before its " + transcriptDone + " event")
	case errors.Is(read, sse.ErrTooLarge):
		code, msg = "stream_malformed", "an event of the upstream stream is larger than the gateway reads"
		err = badUpstream("transcription stream: an event is larger than the gateway reads")
	case errors.As(err, &stalled):
		code, msg = "stream_stalled", stalled.Error()
	}
	if !sent {
		return err
	}
	return credential.Committed(&credential.StreamError{Code: code, Message: msg})
}

// upstreamEventFailure ends a stream that started on an error its upstream
// reported (up, the answer it stands for), as a chat stream's failEvent
// does: the client gets the upstream's own error in place of the
// gateway's, and the engine judges the failure by up's status (a rate
// limit, an overload, the request's own fault), not as a network failure.
func upstreamEventFailure(up *credential.UpstreamError) error {
	body := up.Body
	// One line: the client gets it as one data line.
	var compact bytes.Buffer
	if json.Compact(&compact, body) == nil {
		body = compact.Bytes()
	}
	return credential.Committed(&credential.StreamError{Code: "upstream_error", Message: "the upstream reported an error mid-stream",
		Body: body, Upstream: &credential.UpstreamError{Status: up.Status, Body: body}})
}

// transcriptError is the error answer an error event of a transcription
// stream stands for, nil for any other event. OpenAI's clients raise an
// event named error and an event whose data has an error member; the data
// may also be an error of its own (type error, its code and message at the
// top, as a Responses stream's). The status is the one its code stands for
// (upstream.OpenAIError); an error event that says nothing readable is a
// 502.
func transcriptError(name string, data []byte) *credential.UpstreamError {
	if name != "error" && !bytes.Contains(data, quotedError) {
		return nil
	}
	var ev struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	readable := json.Unmarshal(data, &ev) == nil
	hasMember := readable && len(ev.Error) > 0 && string(ev.Error) != "null"
	if name != "error" && ev.Type != "error" && !hasMember {
		return nil
	}
	obj := data
	if hasMember {
		obj = ev.Error
	}
	if body, status, ok := upstream.OpenAIError(obj); ok {
		return &credential.UpstreamError{Status: status, Body: body}
	}
	return badUpstream("transcription stream: it reported an error the gateway cannot read")
}

// quotedError is in the data of every event that reports an error (a
// member or a type named "error"): a cheap test before a closer look.
var quotedError = []byte(`"error"`)

// isTranscriptDone reports whether an event's data is a
// transcript.text.done event.
func isTranscriptDone(data []byte) bool {
	if !bytes.Contains(data, []byte(transcriptDone)) {
		return false
	}
	var e struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(data, &e) == nil && e.Type == transcriptDone
}
