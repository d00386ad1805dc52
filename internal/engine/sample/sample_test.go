package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	nan  = float32(math.NaN())
)

// randomLogits returns n deterministic logits; with ties, values are rounded
// to a coarse grid so that many entries are equal.
func randomLogits(seed uint64, n int, ties bool) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]float32, n)
	for i := range l {
		v := float32(r.NormFloat64() * 3)
		if ties {
			v = float32(math.Round(float64(v)))
		}
		l[i] = v
	}
	return l
}

// naiveArgmax is the reference greedy choice: first index of the max,
// treating NaN as -Inf.
func naiveArgmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if sanitize(v) > sanitize(l[best]) {
			best = i
		}
	}
	return int32(best)
}

func TestGreedyIsArgmax(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		temp   float32
		want   int32
	}{
		{"simple", []float32{0.1, 3, -2, 2.9}, 0, 1},
		{"tie goes to lowest id", []float32{1, 5, 5, 5}, 0, 1},
		{"negative temperature is greedy", []float32{1, 2, 7, 3}, -1, 2},
		{"NaN never wins", []float32{nan, -100, nan}, 0, 1},
		{"+Inf wins", []float32{1e30, inf, 3}, 0, 1},
		{"all -Inf picks id 0", []float32{ninf, ninf}, 0, 0},
		{"all -Inf with temperature picks id 0", []float32{ninf, ninf, ninf}, 1, 0},
		{"single token", []float32{-3}, 0.8, 0},
	}
	for _, c := range cases {
		s := New(Params{Temperature: c.temp})
		if got, _ := s.Sample(c.logits, nil); got != c.want {
			t.Errorf("%s: Sample(%v) with temperature %v = %d, want %d", c.name, c.logits, c.temp, got, c.want)
		}
	}
	for seed := range uint64(20) {
		l := randomLogits(seed, 5000, seed%2 == 0)
		want := naiveArgmax(l)
		if got, _ := New(Params{}).Sample(l, nil); got != want {
			t.Errorf("greedy Sample(random logits seed %d) = %d, want %d", seed, got, want)
		}
	}
}

func TestEmptyLogits(t *testing.T) {
	id, lp := New(Params{Temperature: 1}).Sample(nil, []int32{1, 2})
	if id != -1 || !math.IsInf(float64(lp), -1) {
		t.Errorf("Sample(nil) = (%d, %v), want (-1, -Inf)", id, lp)
	}
}

func TestTopK1IsGreedy(t *testing.T) {
	for seed := range uint64(30) {
		l := randomLogits(seed, 3000, seed%3 == 0)
		s := New(Params{Temperature: 1.5, TopK: 1, TopP: 0.9, MinP: 0.01, Seed: seed})
		for range 5 {
			if got, want := s.Sample(l, nil); got != naiveArgmax(l) {
				t.Errorf("Sample with top_k=1 (seed %d) = %d (logprob %v), want argmax %d", seed, got, want, naiveArgmax(l))
			}
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	l := randomLogits(7, 1000, false)
	for i := range l {
		l[i] /= 4 // flat enough that draws vary
	}
	draw := func(p Params) []int32 {
		s := New(p)
		out := make([]int32, 200)
		hist := []int32{}
		for i := range out {
			out[i], _ = s.Sample(l, hist)
			hist = append(hist, out[i])
		}
		return out
	}
	for _, p := range []Params{
		{Temperature: 1, Seed: 42},
		{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42},
		{Temperature: 1.2, TopP: 0.9, RepeatPenalty: 1.1, PresencePenalty: 0.3, FrequencyPenalty: 0.2, Seed: 42},
	} {
		a, b := draw(p), draw(p)
		if !slices.Equal(a, b) {
			t.Errorf("two samplers with %+v drew different tokens:\n%v\n%v", p, a, b)
		}
		q := p
		q.Seed = 43
		if c := draw(q); slices.Equal(a, c) {
			t.Errorf("seeds 42 and 43 with %+v drew the same 200 tokens", p)
		}
	}
}

// frequencies draws n tokens and returns the share of each id.
func frequencies(p Params, logits []float32, n int) []float64 {
	s := New(p)
	f := make([]float64, len(logits))
	for range n {
		id, _ := s.Sample(logits, nil)
		f[id]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

func TestDistribution(t *testing.T) {
	ln2 := float32(math.Ln2)
	const draws = 40000
	// With 40000 draws the standard error of a share is at most 0.0025;
	// the tolerance is 4 of those. The seed makes the outcome fixed.
	const tol = 0.01
	cases := []struct {
		name   string
		p      Params
		logits []float32
		want   []float64
	}{
		{"temperature 1", Params{Temperature: 1, Seed: 1}, []float32{0, ln2}, []float64{1.0 / 3, 2.0 / 3}},
		{"temperature 0.5 squares the odds", Params{Temperature: 0.5, Seed: 2}, []float32{0, ln2}, []float64{0.2, 0.8}},
		{"temperature 2 takes the square root", Params{Temperature: 2, Seed: 3}, []float32{0, ln2},
			[]float64{1 / (1 + math.Sqrt2), math.Sqrt2 / (1 + math.Sqrt2)}},
		{"-Inf is never drawn", Params{Temperature: 1, Seed: 4}, []float32{0, ninf, 0, nan}, []float64{0.5, 0, 0.5, 0}},
		{"top_k 2 renormalizes", Params{Temperature: 1, TopK: 2, Seed: 5}, []float32{0, 2 * ln2, ln2, -1}, []float64{0, 2.0 / 3, 1.0 / 3, 0}},
	}
	for _, c := range cases {
		got := frequencies(c.p, c.logits, draws)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > tol {
				t.Errorf("%s: share of token %d over %d draws = %.4f, want %.4f ± %v", c.name, i, draws, got[i], c.want[i], tol)
			}
		}
	}
}

// logitsOf returns log(p) for each probability.
func logitsOf(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, v := range p {
		l[i] = float32(math.Log(v))
	}
	return l
}

// drawnSet returns the sorted ids drawn at least once in n draws.
func drawnSet(p Params, logits []float32, n int) []int32 {
	var ids []int32
	for i, f := range frequencies(p, logits, n) {
		if f > 0 {
			ids = append(ids, int32(i))
		}
	}
	return ids
}

func TestTopPAndMinPKeepTheRightSet(t *testing.T) {
	// Tokens shuffled so that id order is not probability order.
	logits := logitsOf(0.05, 0.5, 0.15, 0.3)
	cases := []struct {
		name string
		p    Params
		want []int32
	}{
		{"top_p 0.45 keeps the best", Params{TopP: 0.45}, []int32{1}},
		{"top_p 0.75 keeps two", Params{TopP: 0.75}, []int32{1, 3}},
		{"top_p 0.85 keeps three", Params{TopP: 0.85}, []int32{1, 2, 3}},
		{"top_p 0.99 keeps all", Params{TopP: 0.99}, []int32{0, 1, 2, 3}},
		{"top_p 1 is off", Params{TopP: 1}, []int32{0, 1, 2, 3}},
		{"top_k 3 then top_p 0.75", Params{TopK: 3, TopP: 0.75}, []int32{1, 3}},
		{"top_k 3 then top_p 0.85 (renormalized: 0.53, 0.84, 1)", Params{TopK: 3, TopP: 0.85}, []int32{1, 2, 3}},
		{"min_p 0.25 drops below 0.125", Params{MinP: 0.25}, []int32{1, 2, 3}},
		{"min_p 0.5 drops below 0.25", Params{MinP: 0.5}, []int32{1, 3}},
		{"min_p 1 keeps the best", Params{MinP: 1}, []int32{1}},
		{"top_p 0.85 then min_p 0.5", Params{TopP: 0.85, MinP: 0.5}, []int32{1, 3}},
	}
	for _, c := range cases {
		c.p.Temperature = 1
		c.p.Seed = 9
		if got := drawnSet(c.p, logits, 3000); !slices.Equal(got, c.want) {
			t.Errorf("%s: ids drawn = %v, want %v", c.name, got, c.want)
		}
	}
}

// nucleusRef is the reference top-p: sort all, keep the minimal prefix whose
// probability sum reaches p.
func nucleusRef(l []float32, p float64) []int32 {
	c := make([]candidate, len(l))
	for i, v := range l {
		c[i] = candidate{int32(i), v}
	}
	slices.SortFunc(c, compare)
	m, sum := sumExp(c)
	var acc float64
	var ids []int32
	for _, x := range c {
		ids = append(ids, x.id)
		acc += math.Exp(float64(x.logit) - float64(m))
		if acc >= p*sum {
			break
		}
	}
	return ids
}

func TestTopPIsMinimalPrefix(t *testing.T) {
	for seed := range uint64(20) {
		l := randomLogits(seed, 2000, seed%2 == 1)
		for _, p := range []float64{0.1, 0.5, 0.9, 0.99} {
			want := nucleusRef(l, p)
			s := New(Params{Temperature: 1})
			s.load(l)
			m, sum := sumExp(s.cands)
			got := s.topP(s.cands, false, p, m, sum)
			ids := make([]int32, len(got))
			for i, x := range got {
				ids[i] = x.id
			}
			if !slices.Equal(ids, want) {
				t.Errorf("topP(seed %d, p %v) kept %d ids %v..., want %d ids %v...", seed, p, len(ids), head(ids), len(want), head(want))
			}
		}
	}
}

func head(ids []int32) []int32 { return ids[:min(len(ids), 8)] }

func TestSelectTopMatchesSort(t *testing.T) {
	for seed := range uint64(10) {
		l := randomLogits(seed, 1000, true) // many ties
		full := make([]candidate, len(l))
		for i, v := range l {
			full[i] = candidate{int32(i), v}
		}
		slices.SortFunc(full, compare)
		for _, k := range []int{1, 2, 40, 999} {
			c := make([]candidate, len(l))
			for i, v := range l {
				c[i] = candidate{int32(i), v}
			}
			if got := selectTop(c, k); !slices.Equal(got, full[:k]) {
				t.Errorf("selectTop(seed %d, k %d) = %v..., want %v...", seed, k, got[:min(k, 5)], full[:min(k, 5)])
			}
		}
	}
}

func TestPenalties(t *testing.T) {
	base := []float32{2, -2, 1, 0.5}
	long := []int32{3}
	for range 64 {
		long = append(long, 0)
	}
	cases := []struct {
		name    string
		p       Params
		history []int32
		want    []float32
	}{
		{"off", Params{}, []int32{0, 1, 1}, []float32{2, -2, 1, 0.5}},
		{"repeat 1 is off", Params{RepeatPenalty: 1}, []int32{0, 1}, []float32{2, -2, 1, 0.5}},
		{"repeat divides positive, multiplies negative, once per token", Params{RepeatPenalty: 2}, []int32{0, 1, 1}, []float32{1, -4, 1, 0.5}},
		{"presence once, frequency per occurrence", Params{PresencePenalty: 0.5, FrequencyPenalty: 0.25}, []int32{0, 1, 1},
			[]float32{2 - 0.5 - 0.25, -2 - 0.5 - 0.5, 1, 0.5}},
		{"negative presence raises", Params{PresencePenalty: -1}, []int32{2}, []float32{2, -2, 2, 0.5}},
		{"repeat then presence", Params{RepeatPenalty: 2, PresencePenalty: 1}, []int32{0}, []float32{0, -2, 1, 0.5}},
		{"window of 2", Params{RepeatPenalty: 2, RepeatLastN: 2}, []int32{0, 1, 1}, []float32{2, -4, 1, 0.5}},
		{"default window of 64 drops the 65th-last token", Params{FrequencyPenalty: 0.01}, long, []float32{2 - 0.64, -2, 1, 0.5}},
		{"window -1 is the whole history", Params{FrequencyPenalty: 0.01, RepeatLastN: -1}, long, []float32{2 - 0.64, -2, 1, 0.5 - 0.01}},
		{"ids outside the vocabulary are ignored", Params{RepeatPenalty: 2}, []int32{-1, 4, 99, 2}, []float32{2, -2, 0.5, 0.5}},
	}
	for _, c := range cases {
		s := New(c.p)
		s.load(base)
		s.penalize(c.history)
		for i, x := range s.cands {
			if x.id != int32(i) || math.Abs(float64(x.logit-c.want[i])) > 1e-6 {
				t.Errorf("%s: penalized logit %d = %v (id %d), want %v", c.name, i, x.logit, x.id, c.want[i])
			}
		}
		// The counts scratch must be clean for the next call.
		for i, n := range s.counts {
			if n != 0 {
				t.Errorf("%s: counts[%d] = %d after the call, want 0", c.name, i, n)
			}
		}
	}
}

func TestPenaltyChangesGreedyChoice(t *testing.T) {
	logits := []float32{1, 0.9, -5}
	cases := []struct {
		p    Params
		want int32
	}{
		{Params{}, 0},
		{Params{RepeatPenalty: 1.5}, 1},
		{Params{PresencePenalty: 0.2}, 1},
		{Params{FrequencyPenalty: 0.05}, 1}, // token 0 seen 3 times: 1 - 0.15
		{Params{FrequencyPenalty: 0.05, RepeatLastN: 1}, 0},
	}
	for _, c := range cases {
		s := New(c.p)
		for range 2 { // the second call checks that scratch state does not leak
			if got, _ := s.Sample(logits, []int32{0, 2, 0, 0}); got != c.want {
				t.Errorf("greedy Sample with %+v = %d, want %d", c.p, got, c.want)
			}
		}
	}
}

func TestLogprobs(t *testing.T) {
	ln2 := float32(math.Ln2)
	l := []float32{0, ln2}
	if got, want := LogSoftmax(l, 0), float32(math.Log(1.0/3)); math.Abs(float64(got-want)) > 1e-6 {
		t.Errorf("LogSoftmax([0 ln2], 0) = %v, want %v", got, want)
	}
	if got, want := LogSoftmax(l, 1), float32(math.Log(2.0/3)); math.Abs(float64(got-want)) > 1e-6 {
		t.Errorf("LogSoftmax([0 ln2], 1) = %v, want %v", got, want)
	}
	for _, id := range []int32{-1, 2} {
		if got := LogSoftmax(l, id); !math.IsInf(float64(got), -1) {
			t.Errorf("LogSoftmax([0 ln2], %d) = %v, want -Inf", id, got)
		}
	}
	if got := LogSoftmax([]float32{0, nan}, 1); !math.IsInf(float64(got), -1) {
		t.Errorf("LogSoftmax([0 NaN], 1) = %v, want -Inf", got)
	}
	if got := LogSoftmax([]float32{0, nan}, 0); got != 0 {
		t.Errorf("LogSoftmax([0 NaN], 0) = %v, want 0", got)
	}
	// Large logits must not overflow.
	if got := LogSoftmax([]float32{1000, 1000}, 0); math.Abs(float64(got)+math.Ln2) > 1e-6 {
		t.Errorf("LogSoftmax([1000 1000], 0) = %v, want %v", got, -math.Ln2)
	}

	// Sample reports the log-softmax of the raw logits, whatever the chain did.
	big := randomLogits(3, 5000, false)
	s := New(Params{Temperature: 0.8, TopK: 50, TopP: 0.9, RepeatPenalty: 1.3, Seed: 5})
	hist := []int32{}
	for range 50 {
		id, lp := s.Sample(big, hist)
		if want := LogSoftmax(big, id); lp != want {
			t.Errorf("Sample logprob for id %d = %v, want LogSoftmax = %v", id, lp, want)
		}
		if want := naiveLogSoftmax(big, id); math.Abs(float64(lp)-want) > 1e-5 {
			t.Errorf("Sample logprob for id %d = %v, want %v (float64 reference)", id, lp, want)
		}
		hist = append(hist, id)
	}
}

func naiveLogSoftmax(l []float32, id int32) float64 {
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v))
	}
	return float64(l[id]) - math.Log(sum)
}

func TestTopLogprobs(t *testing.T) {
	l := []float32{1, 3, 3, -1, 2, nan}
	got := TopLogprobs(l, 4)
	wantIDs := []int32{1, 2, 4, 0}
	if len(got) != len(wantIDs) {
		t.Fatalf("TopLogprobs(%v, 4) returned %d entries, want %d", l, len(got), len(wantIDs))
	}
	for i, g := range got {
		if g.ID != wantIDs[i] || g.Logprob != LogSoftmax(l, g.ID) {
			t.Errorf("TopLogprobs(%v, 4)[%d] = %+v, want {ID:%d Logprob:%v}", l, i, g, wantIDs[i], LogSoftmax(l, wantIDs[i]))
		}
	}
	if n := len(TopLogprobs(l, 100)); n != len(l) {
		t.Errorf("len(TopLogprobs(6 logits, 100)) = %d, want 6", n)
	}
	for _, k := range []int{0, -3} {
		if got := TopLogprobs(l, k); got != nil {
			t.Errorf("TopLogprobs(l, %d) = %v, want nil", k, got)
		}
	}
	if got := TopLogprobs(nil, 3); got != nil {
		t.Errorf("TopLogprobs(nil, 3) = %v, want nil", got)
	}
	// Agreement with a full sort on a large row with ties.
	big := randomLogits(11, 20000, true)
	ref := make([]candidate, len(big))
	for i, v := range big {
		ref[i] = candidate{int32(i), v}
	}
	slices.SortFunc(ref, compare)
	top := TopLogprobs(big, 20)
	for i, g := range top {
		if g.ID != ref[i].id {
			t.Errorf("TopLogprobs(big, 20)[%d].ID = %d, want %d", i, g.ID, ref[i].id)
		}
		if i > 0 && g.Logprob > top[i-1].Logprob {
			t.Errorf("TopLogprobs(big, 20) not sorted at %d: %v after %v", i, g.Logprob, top[i-1].Logprob)
		}
	}
}

func TestSampleDoesNotMutateInputs(t *testing.T) {
	l := randomLogits(5, 4000, true)
	l[7], l[8], l[9] = nan, inf, ninf
	hist := []int32{3, 3, 9, 4000, -2, 17, 8}
	lBits := make([]uint32, len(l))
	for i, v := range l {
		lBits[i] = math.Float32bits(v)
	}
	hCopy := slices.Clone(hist)
	for _, p := range []Params{
		{},
		{Temperature: 1, TopK: 10},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, MinP: 0.1},
		{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.2, PresencePenalty: 1, FrequencyPenalty: 1, RepeatLastN: -1},
	} {
		s := New(p)
		for range 3 {
			s.Sample(l, hist)
		}
		TopLogprobs(l, 5)
		LogSoftmax(l, 3)
		for i, v := range l {
			if math.Float32bits(v) != lBits[i] {
				t.Fatalf("with %+v logits[%d] changed from %v to %v", p, i, math.Float32frombits(lBits[i]), v)
			}
		}
		if !slices.Equal(hist, hCopy) {
			t.Fatalf("with %+v history changed from %v to %v", p, hCopy, hist)
		}
	}
}

func TestValidate(t *testing.T) {
	valid := []Params{
		{},
		{Temperature: -1},
		{Temperature: 2, TopK: -5, TopP: 1, MinP: 1, RepeatPenalty: 0, RepeatLastN: -1, PresencePenalty: -2, FrequencyPenalty: 2},
		{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 256, PresencePenalty: 0.5, FrequencyPenalty: -0.5},
	}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("Params%+v.Validate() = %v, want nil", p, err)
		}
	}
	invalid := []struct {
		p    Params
		want string
	}{
		{Params{Temperature: nan}, "temperature"},
		{Params{Temperature: inf}, "temperature"},
		{Params{TopP: -0.1}, "top_p"},
		{Params{TopP: 1.5}, "top_p"},
		{Params{TopP: nan}, "top_p"},
		{Params{MinP: -0.01}, "min_p"},
		{Params{MinP: 2}, "min_p"},
		{Params{RepeatPenalty: -1}, "repeat_penalty"},
		{Params{RepeatPenalty: inf}, "repeat_penalty"},
		{Params{RepeatLastN: -2}, "repeat_last_n"},
		{Params{PresencePenalty: 2.5}, "presence_penalty"},
		{Params{PresencePenalty: nan}, "presence_penalty"},
		{Params{FrequencyPenalty: -3}, "frequency_penalty"},
	}
	for _, c := range invalid {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Params%+v.Validate() = %v, want an error naming %s", c.p, err, c.want)
		}
	}
}

func TestInvalidParamsDoNotPanic(t *testing.T) {
	l := randomLogits(1, 100, false)
	for _, p := range []Params{
		{Temperature: nan},
		{Temperature: inf, TopP: nan, MinP: nan},
		{Temperature: 1, TopP: -1, MinP: 5, RepeatPenalty: -2, RepeatLastN: -7, PresencePenalty: nan, FrequencyPenalty: inf},
	} {
		id, _ := New(p).Sample(l, []int32{1, 2, 3})
		if id < 0 || int(id) >= len(l) {
			t.Errorf("Sample with invalid %+v = %d, want an id in [0, %d)", p, id, len(l))
		}
	}
}

func BenchmarkSample(b *testing.B) {
	l := randomLogits(1, 152000, false)
	hist := make([]int32, 512)
	for i := range hist {
		hist[i] = int32(i * 97)
	}
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"temp", Params{Temperature: 0.8}},
		{"topk40", Params{Temperature: 0.8, TopK: 40}},
		{"topp0.9", Params{Temperature: 0.8, TopP: 0.9}},
		{"llamacpp-default", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := New(c.p)
			for b.Loop() {
				s.Sample(l, hist)
			}
		})
	}
}

// TestConstraintAllowAndBias: only allowed tokens are drawn, greedy picks
// the best allowed one, the bias moves logits before the draw, the
// logprob stays the raw one, and an empty mask gives -1.
func TestConstraintAllowAndBias(t *testing.T) {
	l := randomLogits(11, 300, false)
	allow := make([]uint64, 5)
	var ids []int32
	for _, id := range []int32{3, 64, 65, 130, 299} {
		allow[id/64] |= 1 << (id % 64)
		ids = append(ids, id)
	}
	best := ids[0]
	for _, id := range ids {
		if l[id] > l[best] {
			best = id
		}
	}
	g := New(Params{})
	if got, lp := g.SampleConstrained(l, nil, Constraint{Allow: allow}); got != best || lp != LogSoftmax(l, best) {
		t.Errorf("greedy under a mask: %d (logprob %v), want %d (raw logprob %v)", got, lp, best, LogSoftmax(l, best))
	}
	if got, _ := g.SampleConstrained(l, nil, Constraint{Allow: allow, Bias: []TokenBias{{ID: 299, Bias: 100}}}); got != 299 {
		t.Errorf("greedy with bias +100 on 299: %d", got)
	}
	if got, _ := g.SampleConstrained(l, nil, Constraint{Bias: []TokenBias{{ID: naiveArgmax(l), Bias: -100}}}); got == naiveArgmax(l) {
		t.Errorf("greedy with bias -100 on the argmax still picked it")
	}
	for _, p := range []Params{{Temperature: 1, Seed: 1}, {Temperature: 1.5, TopK: 2, Seed: 2}, {Temperature: 1, TopP: 0.5, Seed: 3}, {Temperature: 1, MinP: 0.2, Seed: 4}} {
		s := New(p)
		seen := map[int32]bool{}
		for range 400 {
			id, _ := s.SampleConstrained(l, nil, Constraint{Allow: allow})
			if !slices.Contains(ids, id) {
				t.Fatalf("%+v drew %d outside the mask", p, id)
			}
			seen[id] = true
		}
		if p.TopK == 0 && p.TopP == 0 && p.MinP == 0 && len(seen) < 3 {
			t.Errorf("%+v drew only %v from 5 allowed tokens", p, seen)
		}
	}
	if got, lp := g.SampleConstrained(l, nil, Constraint{Allow: make([]uint64, 5)}); got != -1 || lp == lp && lp > -1e30 {
		t.Errorf("empty mask: (%d, %v), want (-1, -Inf)", got, lp)
	}
	// A mask shorter than the row and bits past the row are both fine.
	if got, _ := g.SampleConstrained(l[:100], nil, Constraint{Allow: allow}); got != 3 && got != 64 && got != 65 {
		t.Errorf("row of 100 under the mask: %d", got)
	}
}

// TestSkipAlignsDraws: a sampler that skips k draws then draws the rest
// agrees with one that made all of them, so a resumed sequence continues
// the same random stream.
func TestSkipAlignsDraws(t *testing.T) {
	l := randomLogits(7, 500, false)
	for i := range l {
		l[i] /= 4
	}
	p := Params{Temperature: 1, TopP: 0.95, Seed: 99}
	full := New(p)
	var want []int32
	for range 20 {
		id, _ := full.Sample(l, nil)
		want = append(want, id)
	}
	for _, k := range []int{1, 5} {
		s := New(p)
		s.Skip(k)
		for i := k; i < 20; i++ {
			if id, _ := s.Sample(l, nil); id != want[i] {
				t.Fatalf("after Skip(%d), draw %d = %d, want %d", k, i, id, want[i])
			}
		}
	}
}

// TestLogSoftmaxExtremes: the vectorized sum of exponentials agrees with a
// float64 reference on rows with huge, tiny, infinite and NaN logits, rows
// longer than one chunk, and a row of nothing but -Inf.
func TestLogSoftmaxExtremes(t *testing.T) {
	inf := float32(math.Inf(1))
	long := randomLogits(21, 3*expChunk+17, false)
	long[1000] = 40
	for _, l := range [][]float32{
		{math.MaxFloat32, -math.MaxFloat32, 0},
		{inf, 1, 2},
		{-inf, -inf, 5, nan},
		{-100, -100.5, -190},
		{1e-30, -1e-30, 0},
		long,
	} {
		clean := make([]float64, len(l))
		m := math.Inf(-1)
		for i, v := range l {
			clean[i] = float64(sanitize(v))
			m = max(m, clean[i])
		}
		var sum float64
		for _, v := range clean {
			sum += math.Exp(v - m)
		}
		for id := range l {
			got := LogSoftmax(l, int32(id))
			want := clean[id] - m - math.Log(sum)
			if math.IsInf(clean[id], -1) {
				if !math.IsInf(float64(got), -1) {
					t.Errorf("row %v id %d: %v, want -Inf", l[:min(len(l), 4)], id, got)
				}
				continue
			}
			if w32 := float32(want); math.IsInf(float64(w32), 0) {
				if got != w32 {
					t.Errorf("row %v id %d: %v, want %v", l[:min(len(l), 4)], id, got, w32)
				}
				continue
			}
			if math.Abs(float64(got)-want) > 1e-6*max(1, math.Abs(want)) {
				t.Errorf("row %v id %d: %v, want %v", l[:min(len(l), 4)], id, got, want)
			}
		}
	}
	if got := LogSoftmax([]float32{-inf, nan}, 0); !math.IsInf(float64(got), -1) {
		t.Errorf("LogSoftmax of a row of -Inf = %v, want -Inf", got)
	}
}

// BenchmarkLogprob32k measures greedy Sample on a 32000-token row (the
// synthesized models' vocabulary): the decode step's sampling cost, most of
// it the log-probability's sum of exponentials.
func BenchmarkLogprob32k(b *testing.B) {
	l := randomLogits(1, 32000, false)
	s := New(Params{})
	for b.Loop() {
		s.Sample(l, nil)
	}
}
