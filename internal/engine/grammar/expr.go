package grammar

// This file holds the grammar's building blocks: byte sets and expressions
// over bytes and rule references, which compile.go turns into one DFA per
// rule.

// byteSet is a set of byte values.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}
func (s byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// exprKind names the kind of an expression node.
type exprKind uint8

const (
	exEmpty  exprKind = iota // matches the empty string
	exBytes                  // one byte from set
	exSeq                    // subs in order
	exAlt                    // one of subs
	exRepeat                 // subs[0] between min and max times (max < 0: unbounded)
	exRef                    // the rule numbered rule
	exNone                   // matches nothing
)

// expr is a node of a grammar expression. Expressions are trees built by
// the schema and regex compilers; sharing a node between parents is allowed
// because nodes are never modified after construction.
type expr struct {
	kind     exprKind
	set      byteSet
	subs     []*expr
	min, max int
	rule     int
}

var (
	emptyExpr = &expr{kind: exEmpty}
	noneExpr  = &expr{kind: exNone}
)

func byteExpr(b byte) *expr {
	e := &expr{kind: exBytes}
	e.set.add(b)
	return e
}

func rangeExpr(lo, hi byte) *expr {
	e := &expr{kind: exBytes}
	e.set.addRange(lo, hi)
	return e
}

func setExpr(s byteSet) *expr {
	if s.empty() {
		return noneExpr
	}
	return &expr{kind: exBytes, set: s}
}

// lit matches the bytes of s.
func lit(s string) *expr {
	if s == "" {
		return emptyExpr
	}
	subs := make([]*expr, len(s))
	for i := 0; i < len(s); i++ {
		subs[i] = byteExpr(s[i])
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return &expr{kind: exSeq, subs: subs}
}

// seqFlatten is the longest sequence seq copies into a sequence that
// contains it; a longer one stays a child. Copying every nested sequence
// made chains such as an object's property list (each step a sequence of
// one property and the rest) quadratic in memory: 830 MB for 10,000
// properties. A nested sequence compiles to the same automaton.
const seqFlatten = 16

// seq matches its parts in order; empty parts are dropped and a none part
// makes the whole sequence none.
func seq(parts ...*expr) *expr {
	var subs []*expr
	for _, p := range parts {
		switch p.kind {
		case exEmpty:
			continue
		case exNone:
			return noneExpr
		case exSeq:
			if len(p.subs) > seqFlatten {
				subs = append(subs, p)
				continue
			}
			subs = append(subs, p.subs...)
		default:
			subs = append(subs, p)
		}
	}
	switch len(subs) {
	case 0:
		return emptyExpr
	case 1:
		return subs[0]
	}
	return &expr{kind: exSeq, subs: subs}
}

// alt matches any one of its alternatives; none alternatives are dropped.
func alt(alts ...*expr) *expr {
	var subs []*expr
	for _, a := range alts {
		switch a.kind {
		case exNone:
			continue
		case exAlt:
			subs = append(subs, a.subs...)
		default:
			subs = append(subs, a)
		}
	}
	// Single-byte alternatives become one byte set (fewer NFA states).
	var merged *expr
	kept := subs[:0:0]
	for _, a := range subs {
		if a.kind == exBytes {
			if merged == nil {
				merged = &expr{kind: exBytes}
				kept = append(kept, merged)
			}
			for i := range merged.set {
				merged.set[i] |= a.set[i]
			}
			continue
		}
		kept = append(kept, a)
	}
	subs = kept
	switch len(subs) {
	case 0:
		return noneExpr
	case 1:
		return subs[0]
	}
	return &expr{kind: exAlt, subs: subs}
}

// repeat matches e between min and max times; max < 0 means no upper bound.
func repeat(e *expr, min, max int) *expr {
	if max >= 0 && min > max {
		return noneExpr
	}
	if max == 0 {
		return emptyExpr
	}
	if e.kind == exEmpty {
		return emptyExpr
	}
	if e.kind == exNone {
		if min == 0 {
			return emptyExpr
		}
		return noneExpr
	}
	if min == 1 && max == 1 {
		return e
	}
	return &expr{kind: exRepeat, subs: []*expr{e}, min: min, max: max}
}

func opt(e *expr) *expr  { return repeat(e, 0, 1) }
func star(e *expr) *expr { return repeat(e, 0, -1) }
func plus(e *expr) *expr { return repeat(e, 1, -1) }

func ref(rule int) *expr { return &expr{kind: exRef, rule: rule} }

// size estimates the number of NFA states e compiles to, saturating at
// limit so that callers can refuse huge expansions cheaply.
func (e *expr) size(limit int) int {
	n := 0
	var walk func(x *expr, mult int)
	walk = func(x *expr, mult int) {
		if n > limit {
			return
		}
		switch x.kind {
		case exBytes, exRef, exEmpty, exNone:
			n += 2 * mult
		case exSeq, exAlt:
			n += 2 * mult
			for _, s := range x.subs {
				walk(s, mult)
			}
		case exRepeat:
			reps := x.max
			if reps < 0 {
				reps = x.min + 1
			}
			if reps < 1 {
				reps = 1
			}
			n += 2 * mult
			if mult*reps > limit {
				n = limit + 1
				return
			}
			walk(x.subs[0], mult*reps)
		}
	}
	walk(e, 1)
	return n
}
