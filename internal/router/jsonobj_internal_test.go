package router

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestObjectEditsKeepOtherBytes(t *testing.T) {
	in := `{"b": [1, 2],"a":{"x" : 1},"s":"é\u00e9","a":2}`
	o, err := parseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := o.get("a"); !ok || string(v) != "2" {
		t.Errorf("get(a) = %s, %v; want the last duplicate, 2", v, ok)
	}
	got := string(o.set("a", json.RawMessage("3")).set("n", json.RawMessage("null")).del("s").marshal())
	want := `{"b":[1, 2],"a":3,"n":null}`
	if got != want {
		t.Errorf("edit = %s, want %s", got, want)
	}
	if _, ok := o.set("n", json.RawMessage("null")).get("n"); ok {
		t.Errorf("get of a null member reports it present")
	}
	if got := string(o.marshal()); got != `{"b":[1, 2],"a":{"x" : 1},"s":"é\u00e9","a":2}` {
		t.Errorf("marshal without edits = %s, want members as they were", got)
	}
}

func TestParseObjectRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"a":}`, `{"a":1`, `nul`} {
		if _, err := parseObject([]byte(in)); err == nil {
			t.Errorf("parseObject(%q) = nil error, want one", in)
		}
	}
}

func TestJSONInt(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"3", 3, true}, {"-7", -7, true}, {"2.0", 2, true}, {"1e2", 100, true},
		{"1.5", 0, false}, {`"3"`, 0, false}, {"true", 0, false}, {"1e30", 0, false}, {"9223372036854775807", 1<<63 - 1, true},
	}
	for _, tc := range cases {
		got, ok := jsonInt(json.RawMessage(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("jsonInt(%s) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSampleBodies(t *testing.T) {
	client := `{"prompt":"x","n":2,"seed":9,"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":40}`
	r, e := parseRequest(endpointCompletions, []byte(client), "req-t")
	if e != nil {
		t.Fatal(e)
	}
	if !r.stream || !r.includeUsage || r.n != 2 || *r.seed != 9 {
		t.Fatalf("parseRequest(%s) = stream %v usage %v n %d seed %d", client, r.stream, r.includeUsage, r.n, *r.seed)
	}
	dec, pre := r.bodies(1)
	if want := `{"prompt":"x","n":1,"seed":10,"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":40}`; string(dec) != want {
		t.Errorf("decode body of sample 1 = %s, want %s", dec, want)
	}
	if want := `{"prompt":"x","n":1,"seed":10,"stream":false,"max_completion_tokens":1,"max_tokens":1}`; string(pre) != want {
		t.Errorf("prefill body of sample 1 = %s, want %s", pre, want)
	}
	one, _ := parseRequest(endpointChat, []byte(`{"messages":[]}`), "req-t")
	dec, pre = one.bodies(0)
	if string(dec) != `{"messages":[]}` || !strings.Contains(string(pre), `"max_completion_tokens":1`) {
		t.Errorf("chat n=1 bodies = %s, %s; want the client's body, and max_completion_tokens 1 for prefill", dec, pre)
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[{"c":null}]}`, `{"a":"\u00e9"}`, `[1]`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := parseObject(in)
		if err != nil {
			return
		}
		out := o.marshal()
		if !json.Valid(out) {
			t.Fatalf("marshal of parsed %q = %q, not valid JSON", in, out)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("parseObject accepted %q, which encoding/json rejects", in)
		}
	})
}
