package faults

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/transfer"
)

// Spec is a parsed fault specification.
type Spec struct {
	Drop, Corrupt, Cut, Fail float64
	DelayP                   float64
	Delay                    time.Duration
	StallP                   float64
	Stall                    time.Duration
	KVOnly                   bool
	Seed                     uint64
}

// Parse parses a spec (see the package doc).
func Parse(s string) (Spec, error) {
	sp := Spec{Seed: 1}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return sp, fmt.Errorf("fault spec %q: want name=value", part)
		}
		var err error
		switch name {
		case "drop":
			sp.Drop, err = prob(val)
		case "corrupt":
			sp.Corrupt, err = prob(val)
		case "cut":
			sp.Cut, err = prob(val)
		case "fail":
			sp.Fail, err = prob(val)
		case "delay":
			sp.DelayP, sp.Delay, err = probDur(val)
		case "stall":
			sp.StallP, sp.Stall, err = probDur(val)
		case "kvonly":
			sp.KVOnly, err = strconv.ParseBool(val)
		case "seed":
			sp.Seed, err = strconv.ParseUint(val, 10, 64)
		default:
			return sp, fmt.Errorf("fault spec: unknown fault %q (want drop, corrupt, cut, fail, delay, stall, kvonly, seed)", name)
		}
		if err != nil {
			return sp, fmt.Errorf("fault spec %q: %w", part, err)
		}
	}
	if sp.Drop+sp.Corrupt+sp.Cut+sp.Fail > 1 {
		return sp, fmt.Errorf("fault spec: drop+corrupt+cut+fail must not exceed 1")
	}
	return sp, nil
}

func prob(s string) (float64, error) {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p < 0 || p > 1 {
		return 0, fmt.Errorf("probability %q must be a number in 0..1", s)
	}
	return p, nil
}

func probDur(s string) (float64, time.Duration, error) {
	ps, ds, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want P:DURATION, got %q", s)
	}
	p, err := prob(ps)
	if err != nil {
		return 0, 0, err
	}
	d, err := time.ParseDuration(ds)
	if err != nil || d < 0 {
		return 0, 0, fmt.Errorf("duration %q: want a non-negative Go duration", ds)
	}
	return p, d, nil
}

// Injector is a transfer.Faults driven by a Spec. It counts what it did.
type Injector struct {
	sp     Spec
	mu     sync.Mutex
	rng    *rand.Rand
	counts map[string]uint64
}

var _ transfer.Faults = (*Injector)(nil)

// New returns an Injector for sp.
func New(sp Spec) *Injector {
	return &Injector{sp: sp, rng: rand.New(rand.NewPCG(sp.Seed, 0x7a6d)), counts: map[string]uint64{}}
}

// Counts returns how many frames each fault touched.
func (in *Injector) Counts() map[string]uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]uint64, len(in.counts))
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

// BeforeWrite implements transfer.Faults.
func (in *Injector) BeforeWrite(peer string, h kvwire.Header) transfer.Fault { return in.decide(h) }

// BeforeRead implements transfer.Faults: faults are injected on the write
// side only, so each frame is judged once.
func (in *Injector) BeforeRead(peer string, h kvwire.Header) transfer.Fault { return transfer.Fault{} }

func (in *Injector) decide(h kvwire.Header) transfer.Fault {
	if in.sp.KVOnly && h.Type != kvwire.TypeKV {
		return transfer.Fault{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var f transfer.Fault
	if in.sp.StallP > 0 && in.rng.Float64() < in.sp.StallP {
		f.Delay = in.sp.Stall
		in.counts["stall"]++
	} else if in.sp.DelayP > 0 && in.rng.Float64() < in.sp.DelayP {
		f.Delay = in.sp.Delay
		in.counts["delay"]++
	}
	x := in.rng.Float64()
	for _, c := range []struct {
		p    float64
		a    transfer.FaultAction
		name string
	}{{in.sp.Drop, transfer.FaultDrop, "drop"}, {in.sp.Corrupt, transfer.FaultCorrupt, "corrupt"},
		{in.sp.Cut, transfer.FaultCut, "cut"}, {in.sp.Fail, transfer.FaultFail, "fail"}} {
		if x < c.p {
			f.Action = c.a
			in.counts[c.name]++
			break
		}
		x -= c.p
	}
	return f
}
