package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

func TestParseEmbeddingsInputs(t *testing.T) {
	req, p := checkAndParseEmbeddings([]byte(`{"model":"m","input":"one"}`))
	require.Nil(t, p)
	assert.Equal(t, []string{"one"}, req.GetTexts())
	assert.Equal(t, "float", req.GetEncodingFormat(), "float is the default")

	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`))
	require.Nil(t, p)
	assert.Equal(t, []string{"a", "b"}, req.GetTexts())
	assert.Equal(t, "base64", req.GetEncodingFormat())
	assert.EqualValues(t, 256, req.GetDimensions())
	assert.Equal(t, "u", req.GetUser())

	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":[1,2,3]}`))
	require.Nil(t, p)
	require.Len(t, req.GetTokens(), 1)
	assert.Equal(t, []int64{1, 2, 3}, req.GetTokens()[0].GetTokens())

	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":[[1],[2,3]],"encoding_format":null}`))
	require.Nil(t, p)
	require.Len(t, req.GetTokens(), 2)
	assert.Equal(t, "float", req.GetEncodingFormat())

	// A null among token ids is not id 0: OpenAI refuses it, and so does
	// the gateway, before anything is sent or billed.
	for _, input := range []string{`[null]`, `[1,null]`, `[[null]]`, `[[1],[2,null]]`} {
		req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":` + input + `}`))
		require.Nil(t, req, input)
		require.NotNil(t, p, input)
		assert.Equal(t, 400, p.Status, input)
		assert.Equal(t, "invalid_type", *p.Body.Error.Code, input)
	}
}

// FuzzParseEmbeddings: any body either parses into a request with a model
// and exactly one kind of input, or is refused with a 400 in the OpenAI
// shape; nothing panics.
func FuzzParseEmbeddings(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"x"}`, `{"model":"m","input":["a","b"]}`, `{"model":"m","input":[1,2]}`,
		`{"model":"m","input":[[1],[2]]}`, `{"model":"m","input":[[]]}`, `{"model":"m","input":["",1]}`,
		`{"model":"m","input":"x","encoding_format":"base64","dimensions":3}`, `[]`, `null`, `{"model":null}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, p := checkAndParseEmbeddings(body)
		if p != nil {
			if req != nil {
				t.Fatal("both a request and a problem")
			}
			if p.Status != 400 || p.Body.Error.Type != "invalid_request_error" || p.Body.Error.Code == nil {
				t.Fatalf("bad problem %+v", p)
			}
			if _, err := json.Marshal(p.Body); err != nil {
				t.Fatal(err)
			}
			return
		}
		if req.GetModel() == "" {
			t.Fatal("accepted without a model")
		}
		if (len(req.GetTexts()) > 0) == (len(req.GetTokens()) > 0) {
			t.Fatalf("accepted with texts=%d tokens=%d", len(req.GetTexts()), len(req.GetTokens()))
		}
		if f := req.GetEncodingFormat(); f != "float" && f != "base64" {
			t.Fatalf("accepted encoding %q", f)
		}
	})
}

// checkAndParseEmbeddings is what the handler does with a body: CheckJSON
// (in readJSON), then parseEmbeddings.
func checkAndParseEmbeddings(body []byte) (*corev1.CreateEmbeddingsRequest, *Problem) {
	if p := CheckJSON(body); p != nil {
		return nil, p
	}
	return parseEmbeddings(body)
}

// Members the gateway does not read itself are kept, in their order, as
// one JSON object for core to send on; a member named like one of the
// gateway's own in another case is that member, as json.Unmarshal reads it.
func TestParseEmbeddingsKeepsOtherMembers(t *testing.T) {
	req, p := checkAndParseEmbeddings([]byte(`{"input_type":"query","model":"m","input":"x","truncate":"END","task":{"a":[1,2]},"Mo\u0064el":"n"}`))
	require.Nil(t, p)
	assert.Equal(t, "n", req.GetModel(), "the last model, in any case, wins")
	assert.JSONEq(t, `{"input_type":"query","truncate":"END","task":{"a":[1,2]}}`, string(req.GetExtraJson()))
	assert.Equal(t, `{"input_type":"query","truncate":"END","task":{"a":[1,2]}}`, string(req.GetExtraJson()), "in the client's order")

	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":"x","dimensions":8,"user":"u","encoding_format":"base64"}`))
	require.Nil(t, p)
	assert.Nil(t, req.GetExtraJson(), "no other members")

	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":"x","USER":"u","in\"put_type":"q"}`))
	require.Nil(t, p)
	assert.Equal(t, "u", req.GetUser())
	assert.Equal(t, `{"in\"put_type":"q"}`, string(req.GetExtraJson()))

	// "ſ" folds to "s" as encoding/json matches keys: "uſer" is the user.
	req, p = checkAndParseEmbeddings([]byte(`{"model":"m","input":"x","u\u017fer":"u","uſer":"v"}`))
	require.Nil(t, p)
	assert.Equal(t, "v", req.GetUser())
	assert.Nil(t, req.GetExtraJson())
}
