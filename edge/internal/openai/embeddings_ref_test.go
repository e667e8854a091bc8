package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// refParseEmbeddings is ParseEmbeddings as it was before it split the
// body itself: json.Unmarshal of every member.
func refParseEmbeddings(body []byte) (*corev1.CreateEmbeddingsRequest, *Problem) {
	bad := func(code, msg, param string) (*corev1.CreateEmbeddingsRequest, *Problem) {
		p := NewProblem(http.StatusBadRequest, code, msg, param)
		return nil, &p
	}
	if p := CheckJSON(body); p != nil {
		return nil, p
	}
	var b embeddingsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return bad("invalid_json", "the request body is not valid JSON", "")
	}
	req := &corev1.CreateEmbeddingsRequest{}
	if isNull(b.Model) {
		return bad("missing_required_parameter", "you must provide a model parameter", "model")
	}
	if json.Unmarshal(b.Model, &req.Model) != nil || req.Model == "" {
		return bad("invalid_type", "'model' must be a non-empty string", "model")
	}
	if isNull(b.Input) {
		return bad("missing_required_parameter", "you must provide an input parameter", "input")
	}
	if p := refParseInput(b.Input, req); p != nil {
		return nil, p
	}
	if !isNull(b.EncodingFormat) {
		var f string
		if json.Unmarshal(b.EncodingFormat, &f) != nil || (f != "float" && f != "base64") {
			return bad("invalid_value", "'encoding_format' must be 'float' or 'base64'", "encoding_format")
		}
		req.EncodingFormat = f
	} else {
		req.EncodingFormat = "float"
	}
	if !isNull(b.Dimensions) {
		var d int32
		if json.Unmarshal(b.Dimensions, &d) != nil || d < 1 {
			return bad("invalid_value", "'dimensions' must be a positive integer", "dimensions")
		}
		req.Dimensions = &d
	}
	if !isNull(b.User) && json.Unmarshal(b.User, &req.User) != nil {
		return bad("invalid_type", "'user' must be a string", "user")
	}
	req.ExtraJson = refExtra(body)
	return req, nil
}

// refReads reports whether json.Unmarshal reads key into an
// embeddingsBody: strings.EqualFold, as encoding/json matches field names.
func refReads(key string) bool {
	for _, m := range []string{"model", "input", "encoding_format", "dimensions", "user"} {
		if strings.EqualFold(key, m) {
			return true
		}
	}
	return false
}

// refExtra reads the members json.Unmarshal does not put into an
// embeddingsBody (its keys match without regard to case) with a
// json.Decoder: a JSON object of them in their order, nil for none.
func refExtra(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []byte
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key := tok.(string)
		var value json.RawMessage
		if dec.Decode(&value) != nil {
			return nil
		}
		if refReads(key) {
			continue
		}
		sep := byte(',')
		if out == nil {
			sep = '{'
		}
		k, _ := json.Marshal(key)
		out = append(append(append(append(out, sep), k...), ':'), value...)
	}
	if out == nil {
		return nil
	}
	return append(out, '}')
}

// parseInput accepts a string, an array of strings, an array of token ids,
// or an array of token arrays.
func refParseInput(raw json.RawMessage, req *corev1.CreateEmbeddingsRequest) *Problem {
	bad := func(code, msg string) *Problem {
		p := NewProblem(http.StatusBadRequest, code, msg, "input")
		return &p
	}
	const shape = "'input' must be a string, an array of strings, an array of token ids, or an array of token arrays"
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return bad("invalid_value", "'input' must not be empty")
		}
		req.Texts = []string{s}
		return nil
	}
	if n, ok := countItems(raw, MaxEmbeddingInputs); ok && n > MaxEmbeddingInputs {
		return arrayTooLong("input", MaxEmbeddingInputs, raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return bad("invalid_type", shape)
	}
	if len(items) == 0 {
		return bad("invalid_value", "'input' must not be an empty array")
	}
	switch bytes.TrimSpace(items[0])[0] {
	case '"':
		req.Texts = make([]string, len(items))
		for i, it := range items {
			if json.Unmarshal(it, &req.Texts[i]) != nil {
				return bad("invalid_type", shape)
			}
			if req.Texts[i] == "" {
				return bad("invalid_value", "'input' must not hold empty strings")
			}
		}
	case '[':
		req.Tokens = make([]*corev1.TokenList, len(items))
		for i, it := range items {
			if n, _ := countItems(it, MaxEmbeddingTokens); n > MaxEmbeddingTokens {
				return arrayTooLong("input["+strconv.Itoa(i)+"]", MaxEmbeddingTokens, it)
			}
			var toks []int64
			if json.Unmarshal(it, &toks) != nil || refHasNull(it) {
				return bad("invalid_type", shape)
			}
			if len(toks) == 0 {
				return bad("invalid_value", "'input' must not hold empty token arrays")
			}
			req.Tokens[i] = &corev1.TokenList{Tokens: toks}
		}
	default:
		if len(items) > MaxEmbeddingTokens {
			return arrayTooLong("input", MaxEmbeddingTokens, raw)
		}
		var toks []int64
		if json.Unmarshal(raw, &toks) != nil || refHasNull(raw) {
			return bad("invalid_type", shape)
		}
		req.Tokens = []*corev1.TokenList{{Tokens: toks}}
	}
	return nil
}

// refHasNull decodes the array again, as pointers: a null element is not
// a token id (json.Unmarshal reads it as 0 into an int64).
func refHasNull(arr []byte) bool {
	var ptrs []*int64
	if json.Unmarshal(arr, &ptrs) != nil {
		return false
	}
	for _, p := range ptrs {
		if p == nil {
			return true
		}
	}
	return false
}

// A body is answered as it was when json.Unmarshal read every member: the
// same request, or the same 400.
func FuzzParseEmbeddingsAgreesWithUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"x"}`, `{"model":"m","input":["a","b"]}`, `{"model":"m","input":[1,2]}`,
		`{"model":"m","input":[[1],[2]]}`, `{"model":"m","input":[[]]}`, `{"model":"m","input":["",1]}`,
		`{"model":"m","input":"x","encoding_format":"base64","dimensions":3,"user":"u"}`, `[]`, `null`, `{"model":null}`, `{`,
		` { "model" : "m" , "input" : "x" , "model" : "n" } `, `{"model":"m","input":"x","model":null}`,
		`{"Model":"m","input":"x"}`, `{"model":"m","input":"x","uſer":"u"}`, `{"mod\u0065l":"m","input":"x"}`, `{"model":"m\u00e9\"","input":"a\nb","extra":{"a":[1,"}"]}}`,
		`{"model":"m","input":"x","dimensions":1e2}`, `{"model":"m","input":"x","dimensions":-1}`, `{"model":"m","input":"x","dimensions":2147483648}`,
		`{"model":"m","input":"x","user":7}`, `{"model":"m","input":"x","encoding_format":"float "}`, `{"model":1,"input":"x"}`,
		`{"model":"m","input":"\ud800"}`, `{"model":"m","input":""}`, `{"model":"m","input":[]}`, `{"model":"m","input":[null]}`,
		`{"model":"m","input":{}}`, `{"model":"m","input":true}`, `{}`, `{"model":"m","input":[1,"a"]}`, `{"model":"m","input":[[1,2],[3.5]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, p := checkAndParseEmbeddings(body)
		wantReq, wantP := refParseEmbeddings(body)
		if (p == nil) != (wantP == nil) {
			t.Fatalf("%q: problem %+v, want %+v", body, p, wantP)
		}
		if p != nil {
			got, _ := json.Marshal(p.Body)
			want, _ := json.Marshal(wantP.Body)
			if p.Status != wantP.Status || !bytes.Equal(got, want) {
				t.Fatalf("%q: problem %d %s, want %d %s", body, p.Status, got, wantP.Status, want)
			}
		}
		if !proto.Equal(req, wantReq) {
			t.Fatalf("%q: request %v, want %v", body, req, wantReq)
		}
	})
}

// BenchmarkParseEmbeddings parses what an SDK sends, as ServeHTTP did
// (CheckJSON in readJSON, then the former parser, refParseEmbeddings: a
// second CheckJSON and json.Unmarshal of every member) and as it does now.
func BenchmarkParseEmbeddings(b *testing.B) {
	body := []byte(`{"model":"text-embedding-3-small","input":"The quick brown fox jumps over the lazy dog","encoding_format":"float"}`)
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if CheckJSON(body) != nil {
				b.Fatal("bad")
			}
			if _, p := refParseEmbeddings(body); p != nil {
				b.Fatal(p)
			}
		}
	})
	b.Run("after", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if CheckJSON(body) != nil {
				b.Fatal("bad")
			}
			if _, p := parseEmbeddings(body); p != nil {
				b.Fatal(p)
			}
		}
	})
}
