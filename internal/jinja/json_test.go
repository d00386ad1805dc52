package jinja

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestFromJSON(t *testing.T) {
	v, err := FromJSON([]byte(` {"b": 1, "a": [1.5, -2, 1e400, "x\u00e9\ud83d\ude00\n", true, null], "b": {"z": 9223372036854775808}} `), false)
	if err != nil {
		t.Fatal(err)
	}
	d := v.dict()
	if d.Len() != 2 || d.keys[0].s != "b" || d.keys[1].s != "a" {
		t.Fatalf("keys %v, want b then a (a repeated key keeps its first place)", d.keys)
	}
	if b, _ := d.GetStr("b"); b.kind != KindDict {
		t.Errorf("b = %v, want the last value", b)
	}
	a, _ := d.GetStr("a")
	items := a.list().Items
	if items[0].kind != KindFloat || items[1].kind != KindInt || items[1].n != -2 || !math.IsInf(items[2].float(), 1) ||
		items[3].s != "xé😀\n" || items[4].kind != KindBool || items[5].kind != KindNone {
		t.Errorf("array = %v", items)
	}
	big, _ := d.GetStr("b")
	if z, _ := big.dict().GetStr("z"); z.kind != KindFloat {
		t.Errorf("an integer outside int64 is %v, want a float", z)
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a":1,}`, `01`, `1.`, `-`, `"\x01"`, `"\q"`, `"\u12"`, `tru`, `[] []`, `{"a" 1}`, `{1:2}`} {
		if _, err := FromJSON([]byte(bad), false); err == nil {
			t.Errorf("FromJSON(%q) succeeded", bad)
		}
	}
	if _, err := FromJSON([]byte(strings.Repeat("[", 66)+strings.Repeat("]", 66)), false); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("deep nesting: %v", err)
	}
}

// FuzzFromJSON checks FromJSON against encoding/json: the same inputs are
// valid (but for nesting deeper than 64), and they decode to the same
// values.
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true,{"b":"\u00e9\ud800"}]}`, `"\ud83d\ude00"`, `-0.0e+5`, `[]`, `{}`, `"\u0000"`, fuzzVars} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data, true)
		valid := json.Valid(data)
		if err != nil {
			if valid && !strings.Contains(err.Error(), "nested") {
				t.Fatalf("FromJSON(%q) failed on valid JSON: %v", data, err)
			}
			return
		}
		if !valid {
			t.Fatalf("FromJSON(%q) accepted invalid JSON", data)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(v, want) {
			t.Fatalf("FromJSON(%q) = %v, encoding/json %v", data, v, want)
		}
	})
}

func sameJSON(v Value, w any) bool {
	switch w := w.(type) {
	case nil:
		return v.kind == KindNone
	case bool:
		return v.kind == KindBool && (v.n != 0) == w
	case string:
		return v.kind == KindString && v.s == w
	case json.Number:
		if v.kind == KindInt {
			n, err := strconv.ParseInt(string(w), 10, 64)
			return err == nil && n == v.n
		}
		f, _ := strconv.ParseFloat(string(w), 64)
		return v.kind == KindFloat && (f == v.float() || math.IsNaN(f) && math.IsNaN(v.float()))
	case []any:
		if v.kind != KindList || len(v.list().Items) != len(w) {
			return false
		}
		for i, it := range w {
			if !sameJSON(v.list().Items[i], it) {
				return false
			}
		}
		return true
	case map[string]any:
		if v.kind != KindDict || v.dict().Len() != len(w) {
			return false
		}
		for k, it := range w {
			got, ok := v.dict().GetStr(k)
			if !ok || !sameJSON(got, it) {
				return false
			}
		}
		return true
	}
	return false
}
