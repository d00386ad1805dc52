package sample

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"tandem/internal/engine/kernels"
)

// DefaultRepeatLastN is the penalty window used when Params.RepeatLastN is 0
// (llama.cpp's default for --repeat-last-n).
const DefaultRepeatLastN = 64

// MaxPresenceFrequency is the largest magnitude Validate accepts for the
// presence and frequency penalties (OpenAI's documented range is [-2, 2]).
const MaxPresenceFrequency = 2

// Params selects the sampling chain. The zero value is greedy decoding with
// no penalties.
type Params struct {
	// Temperature divides the logits before the draw. Zero or below means
	// greedy decoding (argmax of the penalized logits, ties to the lowest id).
	Temperature float32
	// TopK keeps only the K most likely tokens; <= 0 turns it off.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability sum
	// reaches TopP; 0 (or 1) turns it off.
	TopP float32
	// MinP drops tokens whose probability is below MinP times the most likely
	// token's; 0 turns it off.
	MinP float32
	// RepeatPenalty divides positive logits and multiplies negative ones of
	// every token seen in the penalty window (llama.cpp semantics); 0 or 1
	// turns it off.
	RepeatPenalty float32
	// RepeatLastN is the penalty window: the last RepeatLastN tokens of the
	// history. 0 means DefaultRepeatLastN, -1 the whole history. It applies
	// to all three penalties.
	RepeatLastN int
	// PresencePenalty is subtracted once from the logit of every token seen
	// in the window (OpenAI semantics); 0 turns it off.
	PresencePenalty float32
	// FrequencyPenalty is subtracted from a token's logit once per occurrence
	// in the window (OpenAI semantics); 0 turns it off.
	FrequencyPenalty float32
	// Seed seeds the Sampler's PRNG: same seed and same inputs give the same
	// choices.
	Seed uint64
}

// Validate reports the first out-of-range field, naming it as the OpenAI and
// llama.cpp request fields do. Accepted: any finite temperature (zero or
// negative = greedy), any top_k (<= 0 = off), top_p in [0, 1] (0 or 1 = off),
// min_p in [0, 1], repeat_penalty finite and >= 0 (0 or 1 = off),
// repeat_last_n >= -1, presence and frequency penalties in [-2, 2].
func (p Params) Validate() error {
	switch {
	case !finite(p.Temperature):
		return fmt.Errorf("temperature must be a finite number, got %v", p.Temperature)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("top_p must be in (0, 1] (0 turns it off), got %v", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("min_p must be in [0, 1], got %v", p.MinP)
	case !finite(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return fmt.Errorf("repeat_penalty must be a finite number >= 0 (0 or 1 turns it off), got %v", p.RepeatPenalty)
	case p.RepeatLastN < -1:
		return fmt.Errorf("repeat_last_n must be -1 (whole history), 0 (default %d) or a positive window, got %d", DefaultRepeatLastN, p.RepeatLastN)
	case !(p.PresencePenalty >= -MaxPresenceFrequency && p.PresencePenalty <= MaxPresenceFrequency):
		return fmt.Errorf("presence_penalty must be in [-2, 2], got %v", p.PresencePenalty)
	case !(p.FrequencyPenalty >= -MaxPresenceFrequency && p.FrequencyPenalty <= MaxPresenceFrequency):
		return fmt.Errorf("frequency_penalty must be in [-2, 2], got %v", p.FrequencyPenalty)
	}
	return nil
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// candidate is one token still in the running: its id and current logit.
type candidate struct {
	id    int32
	logit float32
}

// better is the total order of candidates: higher logit first, then lower id.
func better(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

// compare orders candidates best first, for slices.SortFunc.
func compare(a, b candidate) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

// sanitize maps NaN to -Inf and +Inf to the largest float32 so that every
// comparison and softmax below is well defined.
func sanitize(l float32) float32 {
	if l != l {
		return float32(math.Inf(-1))
	}
	if l > math.MaxFloat32 {
		return math.MaxFloat32
	}
	return l
}

// Sampler draws tokens for one sequence. It owns its PRNG and scratch
// buffers, so it is not safe for concurrent use; create one per sequence.
type Sampler struct {
	p    Params
	src  *rand.PCG
	rng  *rand.Rand
	step uint64 // draws so far (Sample calls and Skip): draw k's randomness depends only on (Seed, k)

	cands   []candidate // one per vocabulary entry; cands[i].id == i until the cut-offs reorder it
	nucleus []candidate // top-p output when candidates are popped from a heap
	weights []float64   // draw weights of the final candidates
	counts  []int32     // occurrences per token in the penalty window; all zero between calls
	touched []int32     // tokens whose counts are non-zero during a call
}

// pcgStream is the second PCG seed word; fixed so that Seed alone decides
// the stream.
const pcgStream = 0x9e3779b97f4a7c15

// New returns a Sampler for p. It expects p to have passed Validate; values
// that did not are still handled without panicking (a NaN temperature means
// greedy, NaN cut-offs and penalties are off, a window below -1 means the
// whole history).
func New(p Params) *Sampler {
	if p.Temperature != p.Temperature {
		p.Temperature = 0
	}
	if p.Temperature > math.MaxFloat32 {
		p.Temperature = math.MaxFloat32
	}
	if p.RepeatLastN < -1 {
		p.RepeatLastN = -1
	}
	src := rand.NewPCG(p.Seed, pcgStream)
	return &Sampler{p: p, src: src, rng: rand.New(src)}
}

// Skip advances the Sampler past n draws made elsewhere, so that its next
// call draws what the (n+1)-th call of a fresh Sampler with the same Params
// would have drawn after n calls: a decode worker that resumes a sequence
// whose first token was sampled by the prefill worker calls Skip(1).
func (s *Sampler) Skip(n int) {
	if n > 0 {
		s.step += uint64(n)
	}
}

// reseed points the PRNG at the stream of the current step: the draw of
// call k uses a generator seeded from (Seed, k) alone, whatever the
// earlier calls consumed.
func (s *Sampler) reseed() {
	z := s.p.Seed + (s.step+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	s.src.Seed(z^z>>31, pcgStream)
	s.step++
}

// TokenBias is an additive adjustment of one token's logit.
type TokenBias struct {
	ID   int32
	Bias float32
}

// Constraint narrows one draw; the zero value changes nothing.
type Constraint struct {
	// Allow, when not nil, is a bitset over token ids (token i is bit i%64
	// of word i/64): only tokens whose bit is set may be drawn. Words past
	// its end count as zero.
	Allow []uint64
	// Bias is added to the listed tokens' logits before the penalties
	// (OpenAI's logit_bias). Ids outside the vocabulary are ignored.
	Bias []TokenBias
}

// Params returns the parameters the Sampler was created with (after New's
// normalization of invalid values).
func (s *Sampler) Params() Params { return s.p }

// Sample picks the next token from logits (one entry per vocabulary token)
// given the sequence's history (prompt and generated tokens, used by the
// penalties). It does not modify logits or history. It returns the chosen id
// and its log-probability under the model's distribution: the log-softmax of
// the raw logits, before penalties and temperature. An empty logits row
// returns (-1, -Inf).
func (s *Sampler) Sample(logits []float32, history []int32) (id int32, logprob float32) {
	return s.SampleConstrained(logits, history, Constraint{})
}

// SampleConstrained is Sample under a Constraint: the bias is added to the
// logits, then the penalties apply, then only the allowed tokens take part
// in the chain (top-k, top-p and min-p see the allowed tokens only, as if
// the others had a logit of -Inf). The reported log-probability is still
// the log-softmax of the raw logits. When no token is allowed it returns
// (-1, -Inf).
func (s *Sampler) SampleConstrained(logits []float32, history []int32, con Constraint) (id int32, logprob float32) {
	s.reseed()
	if len(logits) == 0 {
		return -1, float32(math.Inf(-1))
	}
	rawMax, rawSum, rawBest := s.load(logits)
	changed := s.bias(con.Bias)
	changed = s.penalize(history) || changed
	c := s.cands
	if con.Allow != nil {
		c = allowed(c, con.Allow)
		if len(c) == 0 {
			return -1, float32(math.Inf(-1))
		}
		changed = true
	}
	switch {
	case s.p.Temperature > 0:
		id = s.pick(c, changed, rawMax, rawSum)
	case !changed:
		id = rawBest // greedy on the raw logits: load found it
	default:
		id = argmax(c)
	}
	return id, logSoftmaxAt(logits[id], rawMax, rawSum)
}

// bias adds b to s.cands (still indexed by id) and reports whether any
// logit changed.
func (s *Sampler) bias(b []TokenBias) bool {
	changed := false
	for _, x := range b {
		if x.ID < 0 || int(x.ID) >= len(s.cands) || x.Bias == 0 || x.Bias != x.Bias {
			continue
		}
		s.cands[x.ID].logit = sanitize(s.cands[x.ID].logit + x.Bias)
		changed = true
	}
	return changed
}

// allowed compacts c, still indexed by id, to the candidates whose bit is
// set in allow, keeping id order, and returns the prefix. Words of allow
// that are zero skip 64 candidates at once.
func allowed(c []candidate, allow []uint64) []candidate {
	n := 0
	for w, word := range allow {
		base := w * 64
		if base >= len(c) {
			break
		}
		for word != 0 {
			i := base + bits.TrailingZeros64(word)
			word &= word - 1
			if i >= len(c) {
				break
			}
			c[n] = c[i] // n <= i: the write never overtakes the read
			n++
		}
	}
	return c[:n]
}

// load copies logits into the candidate scratch (sanitized) and returns the
// max and the sum of exp(l - max) of the sanitized logits, and the argmax
// (the first id with the max, as argmax of the candidates gives).
func (s *Sampler) load(logits []float32) (maxLogit float32, sum float64, best int32) {
	n := len(logits)
	if cap(s.cands) < n {
		s.cands = make([]candidate, n)
	}
	c := s.cands[:n]
	s.cands = c
	maxLogit = float32(math.Inf(-1))
	best = 0
	for i, l := range logits {
		l = sanitize(l)
		c[i] = candidate{id: int32(i), logit: l}
		if l > maxLogit {
			maxLogit, best = l, int32(i)
		}
	}
	return maxLogit, expSum(logits, maxLogit), best
}

// logSoftmaxAt returns log(exp(l - max) / sum) for a logit l of a row whose
// sanitized max and sum of exp(l - max) are given.
func logSoftmaxAt(l, maxLogit float32, sum float64) float32 {
	l = sanitize(l)
	if math.IsInf(float64(l), -1) || sum == 0 {
		return float32(math.Inf(-1))
	}
	return float32(float64(l) - float64(maxLogit) - math.Log(sum))
}

// penalize applies the repeat, presence and frequency penalties to s.cands
// (still indexed by id) for the tokens in the history window. It reports
// whether any logit changed.
func (s *Sampler) penalize(history []int32) bool {
	rp := s.p.RepeatPenalty
	repeat := rp > 0 && rp != 1 && rp <= math.MaxFloat32
	presence, frequency := s.p.PresencePenalty, s.p.FrequencyPenalty
	if presence != presence {
		presence = 0
	}
	if frequency != frequency {
		frequency = 0
	}
	if !repeat && presence == 0 && frequency == 0 {
		return false
	}
	window := history
	last := s.p.RepeatLastN
	if last == 0 {
		last = DefaultRepeatLastN
	}
	if last > 0 && last < len(window) {
		window = window[len(window)-last:]
	}
	n := len(s.cands)
	if len(s.counts) < n {
		s.counts = make([]int32, n) // zero, so the between-calls invariant holds
	}
	counts := s.counts[:n]
	s.touched = s.touched[:0]
	for _, t := range window {
		if t < 0 || int(t) >= n {
			continue
		}
		if counts[t] == 0 {
			s.touched = append(s.touched, t)
		}
		counts[t]++
	}
	for _, t := range s.touched {
		l := s.cands[t].logit
		if repeat {
			if l > 0 {
				l /= rp
			} else {
				l *= rp
			}
		}
		l -= float32(counts[t])*frequency + presence
		s.cands[t].logit = sanitize(l)
		counts[t] = 0
	}
	return len(s.touched) > 0
}

// argmax returns the id of the best candidate (highest logit, lowest id).
func argmax(c []candidate) int32 {
	best := c[0]
	for _, x := range c[1:] {
		if better(x, best) {
			best = x
		}
	}
	return best.id
}

// pick runs top-k → top-p → min-p → temperature → draw on c. rawMax and
// rawSum describe the unpenalized row; changed says whether penalties moved
// any logit (if not, they also describe c and spare a pass for top-p).
func (s *Sampler) pick(c []candidate, changed bool, rawMax float32, rawSum float64) int32 {
	sorted := false
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = selectTop(c, k)
		sorted = true
	}
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		var maxLogit float32
		var sum float64
		if !sorted && !changed {
			maxLogit, sum = rawMax, rawSum
		} else {
			maxLogit, sum = sumExp(c)
		}
		c = s.topP(c, sorted, float64(tp), maxLogit, sum)
		sorted = true
	}
	if mp := s.p.MinP; mp > 0 && mp <= 1 {
		c = minP(c, sorted, mp)
	}
	return s.draw(c)
}

// selectTop moves the k best candidates of c into c[:k], sorted best first,
// and returns c[:k]. It keeps a heap of the k best seen so far whose root is
// the worst of them, so most candidates cost one comparison.
func selectTop(c []candidate, k int) []candidate {
	h := c[:k]
	heapifyWorst(h)
	for _, x := range c[k:] {
		if better(x, h[0]) {
			h[0] = x
			siftWorst(h, 0)
		}
	}
	slices.SortFunc(h, compare)
	return h
}

// heapifyWorst makes h a heap whose root is its worst candidate.
func heapifyWorst(h []candidate) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftWorst(h, i)
	}
}

// siftWorst moves h[i] down until both children are better than it.
func siftWorst(h []candidate, i int) {
	n := len(h)
	for {
		w := i
		if l := 2*i + 1; l < n && better(h[w], h[l]) {
			w = l
		}
		if r := 2*i + 2; r < n && better(h[w], h[r]) {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// siftBest moves h[i] down until both children are worse than it (a heap
// whose root is the best candidate).
func siftBest(h []candidate, i int) {
	n := len(h)
	for {
		b := i
		if l := 2*i + 1; l < n && better(h[l], h[b]) {
			b = l
		}
		if r := 2*i + 2; r < n && better(h[r], h[b]) {
			b = r
		}
		if b == i {
			return
		}
		h[i], h[b] = h[b], h[i]
		i = b
	}
}

// sumExp returns the max logit of c and the sum of exp(l - max).
func sumExp(c []candidate) (maxLogit float32, sum float64) {
	maxLogit = float32(math.Inf(-1))
	for _, x := range c {
		maxLogit = max(maxLogit, x.logit)
	}
	if math.IsInf(float64(maxLogit), -1) {
		return maxLogit, 0
	}
	for _, x := range c {
		sum += math.Exp(float64(x.logit) - float64(maxLogit))
	}
	return maxLogit, sum
}

// topP returns the smallest best-first prefix of c whose probability reaches
// p (at least one candidate). When c is not sorted, it heapifies c and pops
// only as many candidates as the prefix needs.
func (s *Sampler) topP(c []candidate, sorted bool, p float64, maxLogit float32, sum float64) []candidate {
	if sum == 0 {
		return c // every candidate is impossible; leave the draw to decide
	}
	target := p * sum
	var acc float64
	if sorted {
		for i, x := range c {
			acc += math.Exp(float64(x.logit) - float64(maxLogit))
			if acc >= target {
				return c[:i+1]
			}
		}
		return c
	}
	for i := len(c)/2 - 1; i >= 0; i-- {
		siftBest(c, i)
	}
	out := s.nucleus[:0]
	h := c
	for len(h) > 0 {
		x := h[0]
		out = append(out, x)
		acc += math.Exp(float64(x.logit) - float64(maxLogit))
		if acc >= target {
			break
		}
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		siftBest(h, 0)
	}
	s.nucleus = out
	return out
}

// minP keeps the candidates whose probability is at least p times the best
// one's, i.e. logit >= max + ln p, preserving their order.
func minP(c []candidate, sorted bool, p float32) []candidate {
	maxLogit := c[0].logit
	if !sorted {
		for _, x := range c {
			maxLogit = max(maxLogit, x.logit)
		}
	}
	if math.IsInf(float64(maxLogit), -1) {
		return c
	}
	threshold := float64(maxLogit) + math.Log(float64(p))
	kept := c[:0]
	for _, x := range c {
		if float64(x.logit) >= threshold {
			kept = append(kept, x)
		}
	}
	return kept
}

// draw applies the temperature and samples one candidate from the softmax.
func (s *Sampler) draw(c []candidate) int32 {
	if len(c) == 1 {
		return c[0].id
	}
	maxLogit := float32(math.Inf(-1))
	for _, x := range c {
		maxLogit = max(maxLogit, x.logit)
	}
	if math.IsInf(float64(maxLogit), -1) {
		return argmax(c)
	}
	t := float64(s.p.Temperature)
	if cap(s.weights) < len(c) {
		s.weights = make([]float64, len(c))
	}
	w := s.weights[:len(c)]
	var total float64
	for i, x := range c {
		w[i] = math.Exp((float64(x.logit) - float64(maxLogit)) / t)
		total += w[i]
	}
	u := s.rng.Float64() * total
	var acc float64
	for i, x := range c {
		acc += w[i]
		if u < acc {
			return x.id
		}
	}
	return argmax(c) // unreachable: acc ends equal to total > u
}

// TokenLogprob is a token id with its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// TopLogprobs returns the k tokens with the highest logits and their
// log-softmax values, best first (ties: lower id first). k is capped at
// len(logits); k <= 0 returns nil. It allocates O(k), not O(len(logits)).
func TopLogprobs(logits []float32, k int) []TokenLogprob {
	if k <= 0 || len(logits) == 0 {
		return nil
	}
	k = min(k, len(logits))
	h := make([]candidate, k)
	for i := range h {
		h[i] = candidate{id: int32(i), logit: sanitize(logits[i])}
	}
	heapifyWorst(h)
	for i := k; i < len(logits); i++ {
		x := candidate{id: int32(i), logit: sanitize(logits[i])}
		if better(x, h[0]) {
			h[0] = x
			siftWorst(h, 0)
		}
	}
	slices.SortFunc(h, compare)
	maxLogit, sum := logSumExp(logits)
	out := make([]TokenLogprob, k)
	for i, x := range h {
		out[i] = TokenLogprob{ID: x.id, Logprob: logSoftmaxAt(x.logit, maxLogit, sum)}
	}
	return out
}

// LogSoftmax returns log(softmax(logits)[id]). An id outside logits, or a
// token whose logit is -Inf or NaN, gets -Inf.
func LogSoftmax(logits []float32, id int32) float32 {
	if id < 0 || int(id) >= len(logits) {
		return float32(math.Inf(-1))
	}
	maxLogit, sum := logSumExp(logits)
	return logSoftmaxAt(logits[id], maxLogit, sum)
}

// logSumExp returns the sanitized max of logits and the sum of exp(l - max).
func logSumExp(logits []float32) (maxLogit float32, sum float64) {
	maxLogit = float32(math.Inf(-1))
	for _, l := range logits {
		maxLogit = max(maxLogit, sanitize(l))
	}
	return maxLogit, expSum(logits, maxLogit)
}

// expChunk is how many logits expSum exponentiates per vector call (a
// stack buffer, so it allocates nothing).
const expChunk = 512

// expSum returns the sum of exp(sanitize(l) - maxLogit) over logits, where
// maxLogit is their sanitized maximum: the exponentials in float32 by the
// kernels' vectorized ExpShiftF32 (within 2 ulp; e^-87.3 and below count as
// 0), summed in float64 in a fixed order. Sample and LogSoftmax share it,
// so they report bit-identical log-probabilities. A row of -Inf sums to 0.
func expSum(logits []float32, maxLogit float32) float64 {
	if math.IsInf(float64(maxLogit), -1) {
		return 0
	}
	var buf [expChunk]float32
	var s0, s1, s2, s3 float64
	for len(logits) > 0 {
		n := min(len(logits), expChunk)
		e := buf[:n]
		for i, l := range logits[:n] {
			e[i] = sanitize(l)
		}
		kernels.ExpShiftF32(e, maxLogit)
		i := 0
		for ; i+4 <= n; i += 4 {
			s0 += float64(e[i])
			s1 += float64(e[i+1])
			s2 += float64(e[i+2])
			s3 += float64(e[i+3])
		}
		for ; i < n; i++ {
			s0 += float64(e[i])
		}
		logits = logits[n:]
	}
	return (s0 + s1) + (s2 + s3)
}
