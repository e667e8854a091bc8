package upstreamtest_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// embeddingsResponse is OpenAI's embeddings list; Embedding holds either a
// float array or a base64 string.
type embeddingsResponse struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// vectors decodes every embedding of an answer, float or base64.
func vectors(t *testing.T, body []byte) (embeddingsResponse, [][]float32) {
	t.Helper()
	var r embeddingsResponse
	require.NoError(t, json.Unmarshal(body, &r), "%s", body)
	var vs [][]float32
	for i, d := range r.Data {
		require.Equal(t, "embedding", d.Object)
		require.Equal(t, i, d.Index)
		var v []float32
		if d.Embedding[0] == '"' {
			var s string
			require.NoError(t, json.Unmarshal(d.Embedding, &s))
			raw, err := base64.StdEncoding.DecodeString(s)
			require.NoError(t, err)
			require.Zero(t, len(raw)%4)
			for j := 0; j < len(raw); j += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
		} else {
			require.NoError(t, json.Unmarshal(d.Embedding, &v))
		}
		vs = append(vs, v)
	}
	return r, vs
}

func TestEmbeddingsFloatAndBase64(t *testing.T) {
	s := upstreamtest.New(t)
	const input = "How do I reset my password?"
	resp, body := post(t, s, upstreamtest.PathEmbeddings, `{"model":"text-embedding-3-small","encoding_format":"float","input":"`+input+`"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireSameShape(t, decode(t, fixture(t, "openai/embeddings-basic.json")), decode(t, body))
	r, floats := vectors(t, body)
	require.Equal(t, "list", r.Object)
	require.Equal(t, "text-embedding-3-small", r.Model)
	require.Equal(t, 7, r.Usage.PromptTokens) // as in the recording
	require.Equal(t, 7, r.Usage.TotalTokens)

	_, body = post(t, s, upstreamtest.PathEmbeddings, `{"model":"text-embedding-3-small","encoding_format":"base64","input":"`+input+`"}`)
	_, b64 := vectors(t, body)

	want := upstreamtest.Vector(input, 8)
	require.Equal(t, [][]float32{want}, floats)
	require.Equal(t, [][]float32{want}, b64)
	var norm float64
	for _, x := range want {
		norm += float64(x) * float64(x)
	}
	require.InDelta(t, 1, norm, 1e-5)
}

func TestEmbeddingsDimensions(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(64))
	_, body := post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":"abc"}`)
	_, vs := vectors(t, body)
	require.Equal(t, upstreamtest.Vector("abc", 64), vs[0])

	_, body = post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":"abc","dimensions":16,"encoding_format":"base64"}`)
	_, vs = vectors(t, body)
	require.Equal(t, upstreamtest.Vector("abc", 16), vs[0])

	// Shortened embeddings are truncated then renormalized, like OpenAI's.
	long := upstreamtest.Vector("abc", 64)[:16]
	var norm float64
	for _, x := range long {
		norm += float64(x) * float64(x)
	}
	for i, x := range upstreamtest.Vector("abc", 16) {
		require.InDelta(t, float64(long[i])/math.Sqrt(norm), float64(x), 1e-6)
	}
}

func TestEmbeddingsBatchAndTokens(t *testing.T) {
	s := upstreamtest.New(t)
	_, body := post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":["Hello 世界! 🌍","Здравствуй мир"]}`)
	r, vs := vectors(t, body)
	require.Equal(t, [][]float32{upstreamtest.Vector("Hello 世界! 🌍", 8), upstreamtest.Vector("Здравствуй мир", 8)}, vs)
	require.Equal(t, upstreamtest.Tokens("Hello 世界! 🌍")+upstreamtest.Tokens("Здравствуй мир"), r.Usage.PromptTokens)
	require.NotEqual(t, vs[0], vs[1])

	_, body = post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":[4438,656,358]}`)
	r, vs = vectors(t, body)
	require.Equal(t, [][]float32{upstreamtest.TokenVector([]int{4438, 656, 358}, 8)}, vs)
	require.Equal(t, 3, r.Usage.PromptTokens)

	_, body = post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":[[1,2],[3]]}`)
	r, vs = vectors(t, body)
	require.Equal(t, [][]float32{upstreamtest.TokenVector([]int{1, 2}, 8), upstreamtest.TokenVector([]int{3}, 8)}, vs)
	require.Equal(t, 3, r.Usage.PromptTokens)
}

func TestEmbeddingsValidation(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct{ name, body, message string }{
		{"recorded bad request", `{"dimensions":-1,"encoding_format":"invalid_format","input":[102257],"model":"text-embedding-3-small"}`,
			"-1 is less than the minimum of 1 - 'dimensions'"},
		{"bad JSON", `{"model":"e","input":`, "We could not parse the JSON body of your request."},
		{"no model", `{"input":"x"}`, "you must provide a model parameter"},
		{"no input", `{"model":"e"}`, "'input' is a required property"},
		{"empty input", `{"model":"e","input":""}`, "'$.input' is invalid."},
		{"empty array", `{"model":"e","input":[]}`, "'$.input' is invalid."},
		{"mixed array", `{"model":"e","input":["a",1]}`, "'$.input' is invalid."},
		{"bad encoding", `{"model":"e","input":"x","encoding_format":"hex"}`, "'hex' is not one of ['float', 'base64']"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, s, upstreamtest.PathEmbeddings, tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			requireSameShape(t, decode(t, fixture(t, "openai/embeddings-bad-request.json")), decode(t, body))
			var e openAIError
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
	// The recorded answer, exactly.
	_, body := post(t, s, upstreamtest.PathEmbeddings, `{"dimensions":-1,"encoding_format":"invalid_format","input":[102257],"model":"text-embedding-3-small"}`)
	require.JSONEq(t, string(fixture(t, "openai/embeddings-bad-request.json")), string(body))
}

func TestVectorDeterministic(t *testing.T) {
	require.Equal(t, upstreamtest.Vector("x", 8), upstreamtest.Vector("x", 8))
	require.NotEqual(t, upstreamtest.Vector("x", 8), upstreamtest.Vector("y", 8))
	require.NotEqual(t, upstreamtest.Vector("1", 4), upstreamtest.TokenVector([]int{1}, 4))
	require.Nil(t, upstreamtest.Vector("x", 0))
	require.Equal(t, 7, upstreamtest.Tokens("How do I reset my password?"))
}
