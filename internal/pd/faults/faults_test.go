package faults

import (
	"testing"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/transfer"
)

func TestParse(t *testing.T) {
	sp, err := Parse("drop=0.1, corrupt=0.05,cut=0.01,fail=0.02,delay=0.5:20ms,stall=0.001:3s,kvonly=true,seed=9")
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Drop: 0.1, Corrupt: 0.05, Cut: 0.01, Fail: 0.02, DelayP: 0.5, Delay: 20 * time.Millisecond, StallP: 0.001, Stall: 3 * time.Second, KVOnly: true, Seed: 9}
	if sp != want {
		t.Errorf("Parse = %+v, want %+v", sp, want)
	}
	for _, bad := range []string{"drop", "drop=2", "nope=1", "delay=0.5", "delay=0.5:x", "drop=0.6,cut=0.6", "seed=-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", bad)
		}
	}
}

func TestInjectorRatesAndKVOnly(t *testing.T) {
	in := New(Spec{Drop: 0.2, Cut: 0.1, KVOnly: true, Seed: 3})
	kv := kvwire.Header{Type: kvwire.TypeKV}
	n := 20000
	for range n {
		in.BeforeWrite("p", kv)
		if f := in.BeforeWrite("p", kvwire.Header{Type: kvwire.TypeDone}); f != (transfer.Fault{}) {
			t.Fatalf("kvonly injected %+v into a DONE frame", f)
		}
		if f := in.BeforeRead("p", kv); f != (transfer.Fault{}) {
			t.Fatalf("read side injected %+v", f)
		}
	}
	c := in.Counts()
	for name, want := range map[string]float64{"drop": 0.2, "cut": 0.1} {
		got := float64(c[name]) / float64(n)
		if got < want-0.02 || got > want+0.02 {
			t.Errorf("%s rate %.3f, want about %.2f", name, got, want)
		}
	}
}
