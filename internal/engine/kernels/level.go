package kernels

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// Level is an instruction-set level the kernels can run at. Higher levels
// need more CPU features; each level only uses kernels whose instructions
// the CPU reported at start-up.
type Level int

// The levels, lowest first.
const (
	// Generic is portable Go (unrolled loops, no assembly). Every CPU has it.
	Generic Level = iota
	// AVX2 uses 256-bit AVX2 + FMA + F16C assembly (x86-64 since Haswell / Zen 1).
	AVX2
	// AVX512 adds 512-bit AVX-512 F/BW/VL/DQ float kernels and AVX512-VNNI
	// (VPDPBUSD) integer dot products (Ice Lake, Zen 4 and later). A CPU with
	// AVX-512 but without VNNI (Skylake-SP) runs at AVX2.
	AVX512
)

// String returns the level's lower-case name ("generic", "avx2", "avx512").
func (l Level) String() string {
	switch l {
	case Generic:
		return "generic"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// kernelSet is the table of kernel functions of one level. Every field but
// dot4 is set at every level (a level without its own kernel for an
// operation reuses the next lower level's).
type kernelSet struct {
	level Level

	dotF32   func(a, b []float32) float32
	dotF16   func(a, b []uint16) float32
	axpyF32  func(alpha float32, x, y []float32)
	axpyF16  func(alpha float32, x []uint16, y []float32)
	f32ToF16 func(src []float32, dst []uint16)
	f16ToF32 func(src []uint16, dst []float32)
	expShift func(x []float32, m float32)
	swiglu   func(g, u []float32)

	// dotF16Rows and axpyF16Rows are the many-row attention forms (see
	// DotF16Rows, AxpyF16Rows); rowsFromSingle builds them from dotF16
	// and axpyF16 where a level has no kernel of its own.
	dotF16Rows  func(q, rows []uint16, stride int, scale float32, dst []float32)
	axpyF16Rows func(w []float32, rows []uint16, stride int, y []float32)
	// rowsAsm holds a level's assembly for the many-row forms (nil: none).
	rowsAsm *rowsAsm

	// vecDot is indexed by the weight type; quantize by the vec dot type.
	// Both may assume their slices hold exactly the bytes of n elements.
	vecDot   [numTypes]func(n int, w, a []byte) float32
	quantize [numTypes]func(src []float32, dst []byte)

	// dot4, where set, computes the dots of one weight row with four
	// activation rows at once (see dot4Func), bit-identical to vecDot.
	dot4 [numTypes]dot4Func
	// dot4Rows, where set, is dot4 over several consecutive weight rows in
	// one call (see dot4RowsFunc), bit-identical to dot4 row by row.
	dot4Rows [numTypes]dot4RowsFunc
	// dot8, where set, is dot4Rows for eight tokens, whose prepared data
	// is prepareTile8At's (Q8_0, Q4_0, Q5_0: rows of an even number of
	// blocks only; F16, BF16: see prep8Bytes).
	dot8 [numTypes]dot4RowsFunc
	// signedQ8Tile8: the Q8_0 dot8 reads prepareTile8Signed's layout,
	// not prepareTile8's (AVX2).
	signedQ8Tile8 bool
}

// dot4Func computes y[t·ystride] = vecDot(w, a[t·arb:]) for t < 4, for rows
// of nb blocks, given the tile's prepared activation data (see
// prepareTile). Results equal the level's vecDot bit for bit.
type dot4Func func(w, a []byte, arb int, prep []byte, nb int, y []float32, ystride int)

// dot4RowsFunc computes, for the nrows weight rows in w (wrb bytes apart),
// what dot4 computes for each: row r's output for token t goes to
// y[r + t·ystride]. It needs the tile's prepared data, not the rows.
type dot4RowsFunc func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int)

// numTypes bounds the ggml type ids used as table indices (MXFP4 = 39 is
// the largest one the kernels know).
const numTypes = int(tensor.MXFP4) + 1

var (
	// detected is what the CPU supports, filled once by detectCPU.
	detected = detectCPU()
	// sets holds one kernel table per level the CPU supports (nil above it).
	sets = buildSets()
	// active is the table in use; SetLevel swaps it.
	active atomic.Pointer[kernelSet]
	// setLevelMu serializes SetLevel calls so restore functions nest.
	setLevelMu sync.Mutex
)

func init() { active.Store(sets[bestLevel()]) }

// cpuFeatures lists the CPU features the levels need, as detected at start-up.
type cpuFeatures struct {
	avx2, fma, f16c                bool
	avx512f, avx512bw, avx512vl    bool
	avx512dq, avx512vnni, hasAMD64 bool
}

// missing returns the features level l needs that the CPU lacks (empty when
// l is usable).
func (f cpuFeatures) missing(l Level) []string {
	var m []string
	need := func(ok bool, name string) {
		if !ok {
			m = append(m, name)
		}
	}
	switch l {
	case Generic:
		return nil
	case AVX2, AVX512:
		need(f.hasAMD64, "amd64")
		need(f.avx2, "avx2")
		need(f.fma, "fma")
		need(f.f16c, "f16c")
		if l == AVX512 {
			need(f.avx512f, "avx512f")
			need(f.avx512bw, "avx512bw")
			need(f.avx512vl, "avx512vl")
			need(f.avx512dq, "avx512dq")
			need(f.avx512vnni, "avx512vnni")
		}
		return m
	}
	return []string{"unknown level"}
}

// bestLevel returns the highest level the CPU supports.
func bestLevel() Level {
	best := Generic
	for l := Generic; l <= AVX512; l++ {
		if len(detected.missing(l)) == 0 {
			best = l
		}
	}
	return best
}

// buildSets makes the kernel table of every supported level.
func buildSets() [AVX512 + 1]*kernelSet {
	var s [AVX512 + 1]*kernelSet
	s[Generic] = genericSet()
	for l := AVX2; l <= AVX512; l++ {
		if len(detected.missing(l)) == 0 {
			k := new(kernelSet)
			*k = *s[l-1]
			k.level = l
			archSet(l, k)
			bindFloat(k)
			s[l] = k
		}
	}
	return s
}

// CurrentLevel returns the level the kernels run at: the best one the CPU
// supports, unless SetLevel chose another.
func CurrentLevel() Level { return active.Load().level }

// MaxLevel returns the best level this CPU supports.
func MaxLevel() Level { return bestLevel() }

// CheckLevel reports whether this CPU can run level l: nil when it can, else
// an error naming the missing CPU features (tests skip with it).
func CheckLevel(l Level) error {
	if l < Generic || l > AVX512 {
		return fmt.Errorf("kernel level %s: no such level", l)
	}
	if m := detected.missing(l); len(m) > 0 {
		return fmt.Errorf("kernel level %s: cpu lacks %s", l, strings.Join(m, ", "))
	}
	return nil
}

// SetLevel makes the kernels run at level l, for tests and benchmarks that
// compare levels, and returns a function that restores the previous level.
// It refuses, by panicking with CheckLevel's error, a level the CPU cannot
// run: callers check CheckLevel first (tests skip on its error). Calls
// already running finish at the level they started with.
func SetLevel(l Level) (restore func()) {
	if err := CheckLevel(l); err != nil {
		invariant.Failf("kernels", "SetLevel: %v", err)
	}
	setLevelMu.Lock()
	defer setLevelMu.Unlock()
	prev := active.Swap(sets[l])
	return func() {
		setLevelMu.Lock()
		defer setLevelMu.Unlock()
		active.Store(prev)
	}
}

// SetLevelByName makes the kernels run at the level named name (generic,
// avx2 or avx512), as SetLevel does; an empty name changes nothing. It is
// for test binaries that take the level from the environment
// (TANDEM_KERNEL_LEVEL). An unknown name, or a level the CPU cannot run,
// is an error (CheckLevel's: "cpu lacks ...") and changes nothing.
func SetLevelByName(name string) error {
	if name == "" {
		return nil
	}
	for _, l := range []Level{Generic, AVX2, AVX512} {
		if l.String() != name {
			continue
		}
		if err := CheckLevel(l); err != nil {
			return err
		}
		SetLevel(l)
		return nil
	}
	return fmt.Errorf("kernel level %q: want generic, avx2 or avx512", name)
}
