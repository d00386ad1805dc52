package engine

import (
	"math"
	"time"
)

// The step cost model behind Config.ITLTarget.
//
// A step's wall time is modelled as linear in four features: a constant
// (weights streamed once per step, scheduling), the tokens fed (the
// matmuls), the sequences in the step (one logits row and one sample
// each) and the query-key pairs of attention (each fed token at position
// q attends to q+1 keys). After every step the engine adds the observation
// to exponentially forgotten normal equations (forgetting factor
// costForget, so the estimate follows load and thermal changes within a
// few dozen steps) and re-solves them by non-negative least squares:
// every coefficient is a cost, so one that comes out negative is fixed at
// zero and the rest re-solved. A small ridge keeps the system solvable
// while a feature has not varied yet (decodes only, say).

const (
	costFeatures = 4
	costForget   = 0.97
	// costWarm is how many steps the model must have seen before its
	// predictions are trusted; until then a step that carries decodes gets
	// only the floor of prefill (measured: unlimited warm-up steps beside
	// decodes were the worst inter-token gaps of a whole run).
	costWarm = 4
	// attnScale brings query-key pairs to the scale of tokens, so the
	// relative ridge treats the features alike.
	attnScale = 1024
)

// stepFeatures describe a step for the cost model.
type stepFeatures struct {
	tokens int // tokens fed, all sequences together
	seqs   int // sequences in the step
	attn   int // query-key pairs of attention
}

// add accounts for take tokens of one sequence starting at position pos.
func (f *stepFeatures) add(pos, take int) {
	f.tokens += take
	f.seqs++
	f.attn += take*pos + take*(take+1)/2
}

func (f stepFeatures) vec() [costFeatures]float64 {
	return [costFeatures]float64{1, float64(f.tokens), float64(f.seqs), float64(f.attn) / attnScale}
}

// costModel is the online estimate of step cost in seconds. Only the step
// loop uses it.
type costModel struct {
	a     [costFeatures][costFeatures]float64 // forgotten sum of x xᵀ
	b     [costFeatures]float64               // forgotten sum of x·seconds
	theta [costFeatures]float64               // the current coefficients, all >= 0
	n     int                                 // observations so far
}

// observe adds one step's measured cost and re-solves the coefficients.
func (m *costModel) observe(f stepFeatures, cost time.Duration) {
	x, y := f.vec(), cost.Seconds()
	for i := range costFeatures {
		for j := range costFeatures {
			m.a[i][j] = costForget*m.a[i][j] + x[i]*x[j]
		}
		m.b[i] = costForget*m.b[i] + x[i]*y
	}
	m.n++
	m.solve()
}

// ready reports whether the model has seen enough steps to be trusted.
func (m *costModel) ready() bool { return m.n >= costWarm }

// predict returns the modelled cost of a step in seconds.
func (m *costModel) predict(f stepFeatures) float64 {
	x := f.vec()
	c := 0.0
	for i := range costFeatures {
		c += m.theta[i] * x[i]
	}
	return c
}

// marginal returns the modelled cost in seconds of adding take tokens of a
// sequence at position pos to a step.
func (m *costModel) marginal(pos, take int) float64 {
	var f stepFeatures
	f.add(pos, take)
	return m.predict(f) - m.theta[0]
}

// solve finds non-negative coefficients by an active-set loop: solve the
// ridge-regularized normal equations over the active features, drop the
// most negative coefficient, repeat.
func (m *costModel) solve() {
	active := [costFeatures]bool{true, true, true, true}
	for range costFeatures {
		theta, ok := m.solveActive(active)
		if !ok {
			return // keep the previous estimate
		}
		worst, wi := 0.0, -1
		for i := range costFeatures {
			if active[i] && theta[i] < worst {
				worst, wi = theta[i], i
			}
		}
		if wi < 0 {
			m.theta = theta
			return
		}
		active[wi] = false
	}
	m.theta = [costFeatures]float64{}
}

// solveActive solves the normal equations restricted to the active
// features (the others are zero) by Gaussian elimination with partial
// pivoting.
func (m *costModel) solveActive(active [costFeatures]bool) ([costFeatures]float64, bool) {
	var idx []int
	for i := range costFeatures {
		if active[i] {
			idx = append(idx, i)
		}
	}
	n := len(idx)
	var mat [costFeatures][costFeatures + 1]float64
	for r, i := range idx {
		for c, j := range idx {
			mat[r][c] = m.a[i][j]
		}
		mat[r][r] += 1e-6*m.a[i][i] + 1e-12 // ridge
		mat[r][n] = m.b[i]
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(mat[r][col]) > math.Abs(mat[p][col]) {
				p = r
			}
		}
		if mat[p][col] == 0 {
			return [costFeatures]float64{}, false
		}
		mat[col], mat[p] = mat[p], mat[col]
		for r := range n {
			if r == col {
				continue
			}
			k := mat[r][col] / mat[col][col]
			for c := col; c <= n; c++ {
				mat[r][c] -= k * mat[col][c]
			}
		}
	}
	var theta [costFeatures]float64
	for r, i := range idx {
		theta[i] = mat[r][n] / mat[r][r]
	}
	return theta, true
}

// prefillPlan sizes the prefill chunks of one step under the ITL target.
// It is unlimited when the target is off or nothing decodes in the step (no
// inter-token gap to protect), and allows only the floor while the cost
// model is not warm yet.
type prefillPlan struct {
	m       *costModel
	limited bool
	left    float64 // seconds of the target the step has left
	floor   int     // prefill tokens the step gets even over the target
	gave    bool    // a prefill chunk is in the step already
	cold    bool    // the cost model is not warm: the floor only
}

// planPrefill starts the plan for a step whose decode part is decodes.
func (e *Engine) planPrefill(decodes stepFeatures) prefillPlan {
	p := prefillPlan{m: &e.cost, floor: e.cfg.MinPrefillTokens}
	if e.cfg.ITLTarget <= 0 || decodes.seqs == 0 {
		return p
	}
	p.limited = true
	p.cold = !e.cost.ready()
	if !p.cold {
		p.left = e.cfg.ITLTarget.Seconds() - e.cost.predict(decodes)
	}
	return p
}

// exhausted reports whether the step cannot carry another prefill token
// under the target (the floor chunk is given already).
func (p *prefillPlan) exhausted() bool {
	return p.limited && p.gave && (p.cold || p.m.marginal(0, 1) > p.left)
}

// take returns how many of a sequence's next tokens (at most limit, from
// position pos) the step can carry, and accounts for them. The first
// prefill chunk of a step gets at least the floor, so prefill progresses
// however many sequences decode.
func (p *prefillPlan) take(pos, limit int) int {
	if limit <= 0 {
		return 0
	}
	if !p.limited {
		return limit
	}
	// The largest t in [0, limit] whose marginal cost fits: marginal is
	// increasing in t.
	lo, hi := 0, limit
	if p.cold {
		hi = 0
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p.m.marginal(pos, mid) <= p.left {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	t := lo
	if t < p.floor && !p.gave {
		t = min(p.floor, limit)
	}
	if t > 0 {
		p.gave = true
		p.left -= p.m.marginal(pos, t) // p.left is unused when cold
	}
	return t
}
