package upstreamtest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// newClient returns a client with its own transport, so that tests do not
// share keep-alive connections.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// do sends a request to the fake; body may be nil. header holds name, value
// pairs. It does not fail t, so it may run on any goroutine.
func do(t *testing.T, ctx context.Context, c *http.Client, s *upstreamtest.Server, method, path string, body []byte, header ...string) (*http.Response, error) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.URL(), "/v1")+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.Do(req)
}

// post sends a JSON POST that must get a response, and returns it with its
// body read.
func post(t *testing.T, s *upstreamtest.Server, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp, err := do(t, t.Context(), newClient(t), s, http.MethodPost, path, []byte(body), header...)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// get sends a GET that must get a response, and returns it with its body.
func get(t *testing.T, s *upstreamtest.Server, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp, err := do(t, t.Context(), newClient(t), s, http.MethodGet, path, nil, header...)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// anthropicHeaders are the headers every Messages request needs.
var anthropicHeaders = []string{"anthropic-version", "2023-06-01"}

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	Data  string
}

// sseReader reads server-sent events one at a time.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	return &sseReader{sc: sc}
}

// next returns the next event, or the error that ended the stream (io.EOF
// for a clean end).
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if seen {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.Event, seen = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			ev.Data, seen = strings.TrimPrefix(line, "data: "), true
		}
	}
	if err := r.sc.Err(); err != nil {
		return ev, err
	}
	if seen {
		return ev, fmt.Errorf("event not terminated by a blank line: %+v", ev)
	}
	return ev, io.EOF
}

// readSSE reads events until the stream ends, returning them and the
// error that ended it (io.EOF when the body ended cleanly).
func readSSE(r io.Reader) ([]sseEvent, error) {
	sr := newSSEReader(r)
	var evs []sseEvent
	for {
		ev, err := sr.next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// stream posts body and reads the whole event stream, which must end
// cleanly.
func stream(t *testing.T, s *upstreamtest.Server, path, body string, header ...string) []sseEvent {
	t.Helper()
	resp, err := do(t, t.Context(), newClient(t), s, http.MethodPost, path, []byte(body), header...)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	evs, err := readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF)
	return evs
}

// fixture reads a file of testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// decode unmarshals JSON into a generic value.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), "invalid JSON: %s", b)
	return v
}

// requireSameShape checks that got has the shape of want: the same keys in
// every object, recursively, and the same JSON kinds, where null in want
// accepts anything (the recordings hold null where the fake may send a
// value). Arrays are compared on their first element.
func requireSameShape(t *testing.T, want, got any) {
	t.Helper()
	if err := sameShape("$", want, got); err != nil {
		t.Fatalf("shape mismatch: %v\nwant: %v\ngot:  %v", err, want, got)
	}
}

func sameShape(path string, want, got any) error {
	if want == nil {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", path, got)
		}
		if wk, gk := keys(w), keys(g); !equal(wk, gk) {
			return fmt.Errorf("%s: want keys %v, got %v", path, wk, gk)
		}
		for k, v := range w {
			if err := sameShape(path+"."+k, v, g[k]); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %T", path, got)
		}
		if len(w) > 0 && len(g) > 0 {
			return sameShape(path+"[0]", w[0], g[0])
		}
		if len(w) > 0 != (len(g) > 0) {
			return fmt.Errorf("%s: want %d elements, got %d", path, len(w), len(g))
		}
	default:
		if fmt.Sprintf("%T", want) != fmt.Sprintf("%T", got) {
			return fmt.Errorf("%s: want a %T, got %T (%v)", path, want, got, got)
		}
	}
	return nil
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func equal(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// requestSignal returns a hook option that reports every received request
// on the returned channel.
func requestSignal() (upstreamtest.Option, <-chan upstreamtest.Request) {
	ch := make(chan upstreamtest.Request, 64)
	return upstreamtest.WithRequestHook(func(r upstreamtest.Request) { ch <- r }), ch
}
