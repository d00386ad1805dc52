package router

import (
	"encoding/json"
	"strings"
	"testing"
)

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

func TestRoomIDsAreUniqueHex(t *testing.T) {
	seen := make(map[string]bool, 10000)
	for i := range 10000 {
		id := newRoomID()
		if len(id) != 32 {
			t.Fatalf("newRoomID() = %q, want 32 hex digits", id)
		}
		for _, c := range id {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("newRoomID() = %q, want lower-case hex digits only", id)
			}
		}
		if seen[id] {
			t.Fatalf("newRoomID() repeated %q after %d ids", id, i)
		}
		seen[id] = true
	}
}
