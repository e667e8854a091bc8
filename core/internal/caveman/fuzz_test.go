package caveman

import (
	"encoding/json"
	"testing"
)

var fuzzSeeds = []string{
	`{}`,
	`[]`,
	`null`,
	`{"messages":[]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"system","content":"s"},{"role":"system","content":"t"}]}`,
	`{"messages":[{"role":"developer","content":[{"type":"text","text":"d"}]}]}`,
	`{"messages":[{"role":"system","content":null},1,"x"]}`,
	`{"instructions":"i","input":"hi"}`,
	`{"instructions":null}`,
	`{"system":"s","messages":[]}`,
	`{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}]}`,
	`{"system":[1,null,{"cache_control":null}]}`,
	`{"a":"<\u00e9>","a":1,"messages":[],"system":[],"instructions":""}`,
	"{\"system\":\"\xff\xfe\"}",
	`{"messages":[{"role":"system","content":"x"}]`,
}

func fuzzInjector(f *testing.F, inject injector) {
	for _, s := range fuzzSeeds {
		for i, level := range Levels() {
			if i%2 == 0 { // a spread of levels, not every pair
				f.Add([]byte(s), level)
			}
		}
	}
	f.Add([]byte(`{}`), "bogus")
	f.Fuzz(func(t *testing.T, body []byte, level string) {
		out, err := inject(body, level)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with non-nil output", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if !json.Valid(out) {
			t.Fatalf("valid JSON in, invalid out:\nin:  %q\nout: %q", body, out)
		}
		again, err := inject(out, level)
		if err != nil {
			t.Fatalf("second injection failed: %v\nout: %q", err, out)
		}
		if string(again) != string(out) {
			t.Fatalf("not idempotent:\nonce:  %q\ntwice: %q", out, again)
		}
	})
}

func FuzzInjectOpenAI(f *testing.F)    { fuzzInjector(f, InjectOpenAI) }
func FuzzInjectResponses(f *testing.F) { fuzzInjector(f, InjectResponses) }
func FuzzInjectAnthropic(f *testing.F) { fuzzInjector(f, InjectAnthropic) }
