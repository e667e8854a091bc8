package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// refCheckChat is checkChat as it was before it read the members in place:
// json.Unmarshal into chatBounds.
func refCheckChat(body []byte) (bool, *Problem) {
	bad := func(code, msg, param string) *Problem {
		p := NewProblem(http.StatusBadRequest, code, msg, param)
		return &p
	}
	var b chatBounds
	if err := json.Unmarshal(body, &b); err != nil {
		return false, bad("invalid_json", "the request body is not a valid chat request", "")
	}
	return b.check()
}

// refCheckLists is checkLists as it was: json.Unmarshal into a map.
func refCheckLists(body []byte, bounds ...listBound) (bool, *Problem) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		p := NewProblem(http.StatusBadRequest, "invalid_json", "the request body is not a JSON object", "")
		return false, &p
	}
	for _, l := range bounds {
		if p := checkList(members[l.name], l); p != nil {
			return false, p
		}
	}
	return isTrue(members["stream"]), nil
}

// A chat, Messages or Responses body CheckJSON accepted gets the answer it
// got when json.Unmarshal read the members: the same 400, or the same
// stream flag.
func FuzzChecksAgreeWithUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","messages":[],"stream":true}`, `{"model":"m"}`, `{"messages":null}`, `{"messages":{}}`,
		`{"messages":[1],"Messages":[]}`, `{"Messages":[1]}`, `{"meſſages":[]}`, `{"messages":[1],"Kind":1,"ſtream":true}`, `{"STREAM":true,"messages":[1]}`,
		`{"mess\u0061ges":[1],"stream":true}`, `{"messages":[1],"stream":true,"stream":false}`,
		`{"messages":[1],"n":2}`, `{"messages":[1],"n":0}`, `{"messages":[1],"n":"2"}`, `{"messages":[1],"n":1.5}`,
		`{"messages":[1],"stop":"x"}`, `{"messages":[1],"stop":["a","b","c","d","e"]}`, `{"messages":[1],"tools":{}}`,
		`{"messages":[{"content":"\"messages\":[]"}],"tools":[{"a":"]"}]}`, ` { "messages" : [ 1 ] , "stream" : true } `,
		`{"input":"x","tools":[1,2]}`, `{"input":[{"role":"user"}],"stream":true}`, `{"system":"s","messages":[1],"stop_sequences":[]}`,
		`{"input":{},"stream":1}`, `{}`, `{"a":{"b":[{"c":"d"}]},"messages":[[],{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if CheckJSON(body) != nil {
			return
		}
		same := func(what string, s bool, p *Problem, ws bool, wp *Problem) {
			t.Helper()
			if (p == nil) != (wp == nil) {
				t.Fatalf("%s %q: problem %+v, want %+v", what, body, p, wp)
			}
			if p != nil {
				got, _ := json.Marshal(p.Body)
				want, _ := json.Marshal(wp.Body)
				if p.Status != wp.Status || !bytes.Equal(got, want) {
					t.Fatalf("%s %q: problem %d %s, want %d %s", what, body, p.Status, got, wp.Status, want)
				}
				return
			}
			if s != ws {
				t.Fatalf("%s %q: streamed %v, want %v", what, body, s, ws)
			}
		}
		s, p := checkChat(body)
		ws, wp := refCheckChat(body)
		same("chat", s, p, ws, wp)
		messages := []listBound{{name: "messages", max: MaxMessagesMessages}, {name: "tools", max: MaxMessagesTools},
			{name: "stop_sequences", max: MaxMessagesStop}, {name: "system", max: MaxMessagesSystem, scalar: true}}
		s, p = checkMessages(body)
		ws, wp = refCheckLists(body, messages...)
		same("messages", s, p, ws, wp)
		s, p = checkResponses(body)
		ws, wp = refCheckLists(body, listBound{name: "input", max: MaxResponsesInput, scalar: true}, listBound{name: "tools", max: MaxResponsesTools})
		same("responses", s, p, ws, wp)
	})
}

// BenchmarkCheckChat checks what an SDK sends as checkChat did
// (refCheckChat: json.Unmarshal of the members) and as it does now.
func BenchmarkCheckChat(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the quick brown fox that jumps over the lazy dog."}],"temperature":0.2,"max_tokens":64,"stream":false}`)
	for _, c := range []struct {
		name  string
		check func([]byte) (bool, *Problem)
	}{{"before", refCheckChat}, {"now", checkChat}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, p := c.check(body); p != nil {
					b.Fatal(p)
				}
			}
		})
	}
}
