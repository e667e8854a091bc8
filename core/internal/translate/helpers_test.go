package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// reqMessage is a message of a translated chat request, as tests read it.
type reqMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

// chatMessagesOfRequest is the messages of a translated chat request.
func chatMessagesOfRequest(t *testing.T, body []byte) []reqMessage {
	t.Helper()
	var r struct {
		Messages []reqMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	return r.Messages
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenJSON compares got (any JSON-encodable value) with the golden file,
// semantically (both decoded), or rewrites the file under -update.
func goldenJSON(t *testing.T, path string, got any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(got))
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test -run %s -update", t.Name())
	if diff := cmp.Diff(decodeJSON(t, want), decodeJSON(t, buf.Bytes())); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func decodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v), "%s", b)
	return v
}

// normalizeCreated checks that "created" is the current Unix time and sets
// it to 0, so goldens are stable.
func normalizeCreated(t testing.TB, v any, before time.Time) any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "not an object: %v", v)
	n, ok := m["created"].(json.Number)
	require.True(t, ok, "created missing: %v", v)
	sec, err := n.Int64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, sec, before.Unix())
	require.LessOrEqual(t, sec, time.Now().Unix())
	m["created"] = 0
	return m
}

// inputs lists the files matching pattern, by test name (file name without
// extension).
func inputs(t *testing.T, patterns ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		require.NoError(t, err)
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
			name = strings.TrimSuffix(name, ".request")
			out[name] = f
		}
	}
	require.NotEmpty(t, out, "no inputs for %v", patterns)
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type sseEvent struct {
	name string
	data []byte
}

// parseSSE is a minimal server-sent events reader for fixtures: event and
// data fields, events ended by a blank line, comments skipped.
func parseSSE(b []byte) []sseEvent {
	var events []sseEvent
	var cur sseEvent
	var hasData bool
	flush := func() {
		if hasData {
			events = append(events, cur)
		}
		cur, hasData = sseEvent{}, false
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if hasData {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, d...)
			hasData = true
		}
	}
	flush()
	return events
}

// streamResult is a translated stream, as the goldens hold it.
type streamResult struct {
	Chunks []json.RawMessage `json:"chunks"`
	Done   bool              `json:"done"`
	Usage  Usage             `json:"usage"`
	Error  string            `json:"error,omitempty"`
}

// translateStream feeds every event of an SSE fixture to a translator and
// collects copies of the chunks; it stops at the first error.
func translateStream(events []sseEvent, includeUsage bool) (streamResult, error) {
	tr := NewStreamTranslator("claude-sonnet-4-5", includeUsage)
	var res streamResult
	var err error
	for _, ev := range events {
		err = tr.Event(ev.name, ev.data, func(chunk []byte) error {
			res.Chunks = append(res.Chunks, bytes.Clone(chunk))
			return nil
		})
		if err != nil {
			res.Error = err.Error()
			break
		}
	}
	res.Done, res.Usage = tr.Done(), tr.Usage()
	return res, err
}
