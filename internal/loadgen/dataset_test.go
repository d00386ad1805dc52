package loadgen

import (
	"strings"
	"testing"
)

func TestParseMixedAndMixedItems(t *testing.T) {
	cs, err := ParseMixed("long:share=0.25,in=1000,out=16; short:share=0.75,in=30,out=96-128")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Name != "long" || cs[0].InMin != 1000 || cs[0].OutMax != 16 || cs[1].OutMin != 96 || cs[1].OutMax != 128 || cs[1].Share != 0.75 {
		t.Fatalf("parsed %+v", cs)
	}
	items := MixedItems(4000, cs, 1)
	count := map[string]int{}
	for _, it := range items {
		count[it.Class]++
		switch it.Class {
		case "long":
			if it.InputLen != 1000 || it.MaxTokens != 16 || len(strings.Fields(it.Text())) != 1000 {
				t.Fatalf("long item %d words, in %d, out %d", len(strings.Fields(it.Text())), it.InputLen, it.MaxTokens)
			}
		case "short":
			if it.InputLen != 30 || it.MaxTokens < 96 || it.MaxTokens > 128 {
				t.Fatalf("short item in %d, out %d", it.InputLen, it.MaxTokens)
			}
		default:
			t.Fatalf("class %q", it.Class)
		}
	}
	if l := count["long"]; l < 900 || l > 1100 {
		t.Errorf("%d long of 4000, want about 1000", l)
	}
	for _, bad := range []string{"", "long", "long:share=0.5,in=10", "a:share=0,in=1,out=1", "a:share=1,in=5-2,out=1", "a:share=1,in=1,out=1,x=2", "a:share=1,in=1,out=1;a:share=1,in=1,out=1"} {
		if _, err := ParseMixed(bad); err == nil {
			t.Errorf("ParseMixed(%q) gave no error", bad)
		}
	}
}

func TestRandomItemsRange(t *testing.T) {
	if lo, hi := RandomRange(100, 0.5); lo != 50 || hi != 150 {
		t.Errorf("RandomRange(100, 0.5) = %d, %d; want 50, 150", lo, hi)
	}
	items := RandomItems(500, 100, 20, 0.5, 2)
	sawLow, sawHigh := false, false
	for _, it := range items {
		if it.InputLen < 50 || it.InputLen > 150 || it.MaxTokens < 10 || it.MaxTokens > 30 {
			t.Fatalf("item in %d out %d outside the ranges", it.InputLen, it.MaxTokens)
		}
		if got := len(strings.Fields(it.Text())); got != it.InputLen {
			t.Fatalf("prompt has %d words, InputLen %d", got, it.InputLen)
		}
		sawLow = sawLow || it.InputLen < 75
		sawHigh = sawHigh || it.InputLen > 125
	}
	if !sawLow || !sawHigh {
		t.Errorf("lengths do not spread over the range")
	}
	for _, it := range RandomItems(10, 64, 8, 0, 2) {
		if it.InputLen != 64 || it.MaxTokens != 8 {
			t.Fatalf("ratio 0: in %d out %d", it.InputLen, it.MaxTokens)
		}
	}
}

func TestReadItems(t *testing.T) {
	in := `{"prompt": "hello there world", "max_tokens": 5, "class": "a"}

{"prompt": "x", "max_tokens": 7}
`
	items, err := ReadItems(strings.NewReader(in), 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 {
		t.Fatalf("%d items", len(items))
	}
	byPrompt := map[string]Item{}
	for _, it := range items {
		byPrompt[it.Prompt] = it
	}
	if a := byPrompt["hello there world"]; a.MaxTokens != 5 || a.Class != "a" || a.InputLen != 3 {
		t.Errorf("item %+v", a)
	}
	if b := byPrompt["x"]; b.MaxTokens != 7 || b.Class != "" {
		t.Errorf("item %+v", b)
	}
	for _, bad := range []string{"", "not json", `{"max_tokens": 3}`, `{"prompt": "a", "max_tokens": 0}`} {
		if _, err := ReadItems(strings.NewReader(bad), 2, 0); err == nil {
			t.Errorf("ReadItems(%q) gave no error", bad)
		}
	}
}
