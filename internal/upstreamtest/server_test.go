package upstreamtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

func TestURL(t *testing.T) {
	s := upstreamtest.New(t)
	require.True(t, strings.HasPrefix(s.URL(), "http://127.0.0.1:"))
	require.True(t, strings.HasSuffix(s.URL(), "/v1"))
	resp, err := newClient(t).Get(s.URL() + "/models")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestModels(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithModels("gpt-4o", "o3"))
	resp, body := get(t, s, upstreamtest.PathModels)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	require.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 2)
	require.Equal(t, "gpt-4o", list.Data[0].ID)
	require.Equal(t, "o3", list.Data[1].ID)
	require.Equal(t, "model", list.Data[0].Object)
	require.Positive(t, list.Data[0].Created)
	require.NotEmpty(t, list.Data[0].OwnedBy)

	resp, body = get(t, s, upstreamtest.PathModels+"/o3")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"id":"o3","object":"model"`)

	resp, body = get(t, s, upstreamtest.PathModels+"/gpt-4.1-nano-wrong")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var e openAIError
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, "model_not_found", ptr(e.Error.Code))
	require.Equal(t, "The model `gpt-4.1-nano-wrong` does not exist or you do not have access to it.", e.Error.Message)
}

func TestUnknownRoute(t *testing.T) {
	s := upstreamtest.New(t)
	resp, body := post(t, s, "/v1/completions-nope", `{}`)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var e openAIError
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, "Invalid URL (POST /v1/completions-nope)", e.Error.Message)

	resp, _ = get(t, s, upstreamtest.PathChatCompletions)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "wrong method")
}

func TestAPIKey(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-one", "sk-two"))

	resp, _ := post(t, s, upstreamtest.PathChatCompletions, chatBody, "Authorization", "Bearer sk-two")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, body := post(t, s, upstreamtest.PathChatCompletions, chatBody, "Authorization", "Bearer sk-expired")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	var e openAIError
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, "invalid_api_key", ptr(e.Error.Code))

	resp, body = post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":"x"}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NoError(t, json.Unmarshal(body, &e))
	require.Contains(t, e.Error.Message, "You didn't provide an API key")

	resp, body = get(t, s, upstreamtest.PathModels, "Authorization", "Bearer sk-one")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	// Anthropic takes the key in x-api-key.
	resp, _ = post(t, s, upstreamtest.PathMessages, messagesBody, "anthropic-version", "2023-06-01", "x-api-key", "sk-one")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = post(t, s, upstreamtest.PathMessages, messagesBody, "anthropic-version", "2023-06-01", "Authorization", "Bearer sk-one")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "authentication_error", requireAnthropicError(t, body).Error.Type)

	// Faults come before the credential check.
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.RateLimited(""))
	resp, _ = post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
}

func TestRequestsAreRecorded(t *testing.T) {
	hook, received := requestSignal()
	s := upstreamtest.New(t, hook)
	before := time.Now()
	post(t, s, upstreamtest.PathChatCompletions+"?api-version=1", chatBody, "Authorization", "Bearer k")
	s.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.Overloaded())
	post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":"x"}`)
	get(t, s, upstreamtest.PathModels)

	reqs := s.Requests()
	require.Len(t, reqs, 3)
	r := reqs[0]
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, upstreamtest.PathChatCompletions, r.Path)
	require.Equal(t, "api-version=1", r.RawQuery)
	require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
	require.JSONEq(t, chatBody, string(r.Body))
	require.False(t, r.Time.Before(before))
	require.Equal(t, upstreamtest.PathEmbeddings, reqs[1].Path)
	require.Equal(t, http.MethodGet, reqs[2].Method)

	require.Equal(t, 1, s.Count(upstreamtest.PathChatCompletions))
	require.Equal(t, 1, s.Count(upstreamtest.PathEmbeddings), "faulted requests count")
	require.Equal(t, 0, s.Count(upstreamtest.PathMessages))

	for _, want := range reqs {
		got := <-received
		require.Equal(t, want.Path, got.Path)
		require.Equal(t, want.Body, got.Body)
	}

	// Requests returns a copy.
	reqs[0].Path = "changed"
	require.Equal(t, upstreamtest.PathChatCompletions, s.Requests()[0].Path)
}

func TestWithoutRecording(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithoutRecording())
	post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Nil(t, s.Requests())
	require.Equal(t, 1, s.Count(upstreamtest.PathChatCompletions))
}

func TestChunkDelay(t *testing.T) {
	const delay = 5 * time.Millisecond
	s := upstreamtest.New(t, upstreamtest.WithChunkDelay(delay))
	start := time.Now()
	evs := stream(t, s, upstreamtest.PathChatCompletions, chatStreamBody)
	require.GreaterOrEqual(t, time.Since(start), time.Duration(len(evs)-1)*delay)
}

func TestConcurrentUse(t *testing.T) {
	s := upstreamtest.New(t)
	const workers, perWorker, faults = 8, 25, 40
	for range faults {
		s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.RateLimited(""))
	}
	client := newClient(t)
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				body := chatBody
				if (w+i)%2 == 0 {
					body = chatStreamBody
				}
				resp, err := do(t, t.Context(), client, s, http.MethodPost, upstreamtest.PathChatCompletions, []byte(body))
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Error(err)
					return
				}
				if resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte("echo:")) {
					t.Errorf("unexpected body %s", b)
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
		// Readers race with the handlers.
		wg.Go(func() {
			for range perWorker {
				_ = s.Requests()
				_ = s.Count(upstreamtest.PathChatCompletions)
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusTooManyRequests: faults, http.StatusOK: workers*perWorker - faults}, statuses)
	require.Equal(t, workers*perWorker, s.Count(upstreamtest.PathChatCompletions))
	require.Len(t, s.Requests(), workers*perWorker)
}

func BenchmarkChatCompletion(b *testing.B) {
	benchmarkPost(b, upstreamtest.PathChatCompletions, chatBody)
}

func BenchmarkChatStream(b *testing.B) {
	benchmarkPost(b, upstreamtest.PathChatCompletions, chatStreamBody)
}

func BenchmarkMessagesStream(b *testing.B) {
	benchmarkPost(b, upstreamtest.PathMessages, messagesStream, "anthropic-version", "2023-06-01")
}

func BenchmarkEmbeddings(b *testing.B) {
	benchmarkPost(b, upstreamtest.PathEmbeddings, `{"model":"e","input":["a","b","c","d"],"dimensions":256,"encoding_format":"base64"}`)
}

func benchmarkPost(b *testing.B, path, body string, header ...string) {
	s := upstreamtest.NewServer(upstreamtest.WithoutRecording())
	defer s.Close()
	url := strings.TrimSuffix(s.URL(), "/v1") + path
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
