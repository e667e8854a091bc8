package chat

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// gatedResponses is a ResponseStore whose writes wait until the test lets
// them through: putting names each write begun, release lets them finish.
// A write given up (its context ended) stores nothing.
type gatedResponses struct {
	memoryResponses
	putting chan string
	release chan struct{}
}

func (g *gatedResponses) Put(ctx context.Context, machineID, id string, rec []byte) error {
	g.putting <- id
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.memoryResponses.Put(ctx, machineID, id, rec)
}

// finalRecorder is a client that continues an answer the moment it has
// its end (response.completed, or the whole body), as the SDKs' agents do:
// found says whether the answer was stored by then.
type finalRecorder struct {
	store ResponseStore
	mu    sync.Mutex
	found bool
	final chan struct{}
}

func (r *finalRecorder) Start(time.Duration) error { return nil }

func (r *finalRecorder) Chunk(event string, data []byte) error {
	if event != "response.completed" {
		return nil
	}
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return err
	}
	return r.Completion(ev.Response)
}

func (r *finalRecorder) Completion(data []byte) error {
	var resp struct{ ID string }
	if err := json.Unmarshal(data, &resp); err != nil {
		return err
	}
	_, err := r.store.Get(context.Background(), "m1", resp.ID)
	r.mu.Lock()
	r.found = err == nil
	r.mu.Unlock()
	r.final <- struct{}{}
	return nil
}

// finalBatchRecorder is a finalRecorder that takes events in batches, as
// the edge does.
type finalBatchRecorder struct{ *finalRecorder }

func (r finalBatchRecorder) Events(evs []Event) error {
	for _, ev := range evs {
		if err := r.Chunk(ev.Name, ev.Data); err != nil {
			return err
		}
	}
	return nil
}

// responsesService is a Service whose machine m1 has one connection, an
// OpenAI one (a Responses upstream) at srv, and whose answers are stored in
// responses.
func responsesService(t *testing.T, srv *httptest.Server, responses ResponseStore) *Service {
	t.Helper()
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.Topology{}.Ensure(ctx, js))
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, js, log)
	require.NoError(t, err)
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey("m1", "c1"), &busv1.Connection{
		Id: "c1", MachineId: "m1", Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{BaseUrl: srv.URL},
	}))
	require.Eventually(t, func() bool { return len(st.MachineConnections("m1")) == 1 }, 5*time.Second, time.Millisecond)
	d := dispatch.New(st, routing.NewResolver(st, provider.NewRegistry()), credential.NewMemoryCooldowns(nil, 0), nil,
		vault.New(nil), upstream.NewClients(upstream.Gateway), log)
	return New(d, Options{Responses: responses, Log: log})
}

// storingUpstream answers a Responses request whole or streamed, with the
// response resp_1.
func storingUpstream(t *testing.T) *httptest.Server {
	const response = `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` +
		`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hello Ada","annotations":[]}]}],` +
		`"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, response)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseOf(
			`{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hello Ada"}`,
			`{"type":"response.completed","response":`+response+`}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An answer is stored before the client has its end (a streamed answer's
// response.completed, a whole answer's body): a client that continues it
// at once with previous_response_id, as the SDKs' agents do, finds it,
// where it was stored only after the client had it, and such a turn could
// be refused as continuing an unknown answer.
func TestAnswerStoredBeforeTheClientHasIt(t *testing.T) {
	srv := storingUpstream(t)
	for _, tc := range []struct {
		name   string
		stream bool
		batch  bool
	}{
		{"whole", false, false},
		{"streamed", true, false},
		{"streamed in batches", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := &gatedResponses{memoryResponses: memoryResponses{records: map[string][]byte{}},
				putting: make(chan string, 1), release: make(chan struct{})}
			svc := responsesService(t, srv, gate)
			client := &finalRecorder{store: gate, final: make(chan struct{}, 1)}
			var sink Sink = client
			if tc.batch {
				sink = finalBatchRecorder{client}
			}
			body := `{"model":"openai/gpt-5","input":"my name is Ada","stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + `}`
			done := make(chan error, 1)
			go func() {
				_, _, err := svc.Complete(context.Background(), Request{MachineID: "m1", Dialect: DialectResponses, Body: []byte(body)}, sink)
				done <- err
			}()
			select {
			case id := <-gate.putting:
				assert.Equal(t, "resp_1", id)
			case err := <-done:
				require.FailNow(t, "the answer was not stored", "%v", err)
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the answer was not stored")
			}
			had := false
			select {
			case <-client.final:
				had = true
				assert.Fail(t, "the client had the answer's end before it was stored")
			default:
			}
			close(gate.release)
			require.NoError(t, <-done)
			if !had {
				select {
				case <-client.final:
				default:
					require.FailNow(t, "the client never had the answer's end")
				}
			}
			client.mu.Lock()
			defer client.mu.Unlock()
			assert.True(t, client.found, "the answer was stored when the client had it")
		})
	}
}

// A store that does not answer holds an answer up for a bounded time only:
// the client then has it all the same, unstored, and the failure is
// logged.
func TestAnswerGoesOnWhenStoringHangs(t *testing.T) {
	srv := storingUpstream(t)
	for _, stream := range []bool{false, true} {
		gate := &gatedResponses{memoryResponses: memoryResponses{records: map[string][]byte{}},
			putting: make(chan string, 1), release: make(chan struct{})}
		svc := responsesService(t, srv, gate)
		svc.storeWait = 50 * time.Millisecond
		var logged syncBuffer
		svc.opts.Log = slog.New(slog.NewTextHandler(&logged, nil))
		client := &finalRecorder{store: gate, final: make(chan struct{}, 1)}
		body := `{"model":"openai/gpt-5","input":"my name is Ada","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		_, _, err := svc.Complete(context.Background(), Request{MachineID: "m1", Dialect: DialectResponses, Body: []byte(body)}, client)
		require.NoError(t, err, "streamed %v", stream)
		require.Len(t, client.final, 1, "the client has the answer's end (streamed %v)", stream)
		assert.False(t, client.found, "streamed %v", stream)
		assert.Contains(t, logged.String(), "storing a response failed", "streamed %v", stream)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
