package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowHeaders answers after its delay, then writes its body in two parts a
// pause apart.
func slowHeaders(t *testing.T, delay, pause time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("whole "))
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		_, _ = w.Write([]byte("answer"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, ctx context.Context, cl *http.Client, url string, body io.Reader) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	require.NoError(t, err)
	resp, err := cl.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A call's headers are awaited for the first-byte bound, a whole answer's
// for the whole-answer bound; its body, once the headers came, is not cut
// by either.
func TestHeaderBoundPerCall(t *testing.T) {
	const first = 200 * time.Millisecond
	srv := slowHeaders(t, 3*first, 3*first)
	cl, err := NewClients(Options{FirstByte: first, WholeAnswer: 10 * first}).For(srv.URL, "")
	require.NoError(t, err)

	start := time.Now()
	_, err = call(t, context.Background(), cl, srv.URL, nil)
	var te *HeaderTimeoutError
	require.ErrorAs(t, err, &te, "%v", err)
	assert.Equal(t, first, te.Wait)
	var timeout interface{ Timeout() bool }
	require.ErrorAs(t, err, &timeout)
	assert.True(t, timeout.Timeout(), "a timeout, as the transport's own")
	assert.Less(t, time.Since(start), 3*first, "cut at the first-byte bound")

	got, err := call(t, WholeAnswer(context.Background()), cl, srv.URL, nil)
	require.NoError(t, err)
	assert.Equal(t, "whole answer", got, "a whole answer is waited on, and its body read past both bounds")

	// Without a whole-answer bound of its own, the first-byte bound holds
	// for all, the transport's.
	for _, o := range []Options{{FirstByte: first}, {FirstByte: first, WholeAnswer: first}} {
		cl, err = NewClients(o).For(srv.URL, "")
		require.NoError(t, err)
		start = time.Now()
		_, err = call(t, WholeAnswer(context.Background()), cl, srv.URL, nil)
		require.ErrorAs(t, err, &timeout, "%v", err)
		assert.True(t, timeout.Timeout(), "%v", err)
		assert.Less(t, time.Since(start), 3*first, "cut at the first-byte bound")
	}
}

// The bound starts once the request is written, as
// http.Transport.ResponseHeaderTimeout does: a body slow to upload is not
// the upstream's delay.
func TestHeaderBoundStartsOnceTheRequestIsWritten(t *testing.T) {
	const first = 200 * time.Millisecond
	srv := slowHeaders(t, first/2, 0)
	cl, err := NewClients(Options{FirstByte: first}).For(srv.URL, "")
	require.NoError(t, err)
	pr, pw := io.Pipe()
	go func() {
		for range 4 {
			time.Sleep(first / 2)
			_, _ = pw.Write([]byte("part "))
		}
		pw.Close()
	}()
	got, err := call(t, context.Background(), cl, srv.URL, pr)
	require.NoError(t, err)
	assert.Equal(t, "whole answer", got)
}

// A caller that leaves ends the call with its own error, not a timeout;
// closing the body ends the call's context.
func TestHeaderBoundCallerAndBody(t *testing.T) {
	srv := slowHeaders(t, time.Second, 0)
	cl, err := NewClients(Options{FirstByte: time.Minute}).For(srv.URL, "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = call(t, ctx, cl, srv.URL, nil)
	require.Error(t, err)
	var te *HeaderTimeoutError
	assert.False(t, errors.As(err, &te), "%v", err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	var seen context.Context
	rt := headerBound{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r.Context()
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok"))}, nil
	}), firstByte: time.Minute}
	req, err := http.NewRequest(http.MethodGet, "http://upstream.example", nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, seen.Err(), "the body is read under a live context")
	require.NoError(t, resp.Body.Close())
	assert.Error(t, seen.Err(), "closing the body ends it")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
