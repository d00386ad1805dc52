package answer

import (
	"encoding/json"
	"testing"
)

func TestObjectEditsKeepOtherBytes(t *testing.T) {
	in := `{"b": [1, 2],"a":{"x" : 1},"s":"é\u00e9","a":2}`
	o, err := ParseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := o.Get("a"); !ok || string(v) != "2" {
		t.Errorf("get(a) = %s, %v; want the last duplicate, 2", v, ok)
	}
	got := string(o.Set("a", json.RawMessage("3")).Set("n", json.RawMessage("null")).Del("s").Marshal())
	want := `{"b":[1, 2],"a":3,"n":null}`
	if got != want {
		t.Errorf("edit = %s, want %s", got, want)
	}
	if _, ok := o.Set("n", json.RawMessage("null")).Get("n"); ok {
		t.Errorf("get of a null member reports it present")
	}
	if got := string(o.Marshal()); got != `{"b":[1, 2],"a":{"x" : 1},"s":"é\u00e9","a":2}` {
		t.Errorf("marshal without edits = %s, want members as they were", got)
	}
}

func TestParseObjectRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"a":}`, `{"a":1`, `nul`} {
		if _, err := ParseObject([]byte(in)); err == nil {
			t.Errorf("ParseObject(%q) = nil error, want one", in)
		}
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[{"c":null}]}`, `{"a":"\u00e9"}`, `[1]`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := ParseObject(in)
		if err != nil {
			return
		}
		out := o.Marshal()
		if !json.Valid(out) {
			t.Fatalf("marshal of parsed %q = %q, not valid JSON", in, out)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("parseObject accepted %q, which encoding/json rejects", in)
		}
	})
}
