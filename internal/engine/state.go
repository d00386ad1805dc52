package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"tandem/internal/invariant"
)

// Recurrent state of hybrid models (model.Config.State; qwen35's Gated
// DeltaNet layers): every sequence the loop runs holds one state slot of
// Model.StateSize() float32s beside its page tables, the state after its
// first computed tokens, which Forward reads and rewrites in place
// (model.Seq.State). See the package doc, "Recurrent state".

// ErrStateRequired is returned by Handle.Resume for a model with recurrent
// state: an imported sequence needs the prompt's state as well as its
// pages, so it must be resumed with Handle.ResumeState.
var ErrStateRequired = errors.New("engine: the model keeps recurrent state: resume the import with ResumeState and the prompt's state")

// StateSink is a KVSink that also receives the sequence's recurrent state
// after the whole prompt (models with state only; a model without it never
// calls PromptState). On a model with state, Submit refuses a KVSink that is
// not a StateSink (ErrBadRequest): its pages alone could not resume. PromptState is called exactly once, from the step loop,
// in the step that completes the prompt, after the last
// LayerComputed(final=true): state is Model.StateSize() float32s,
// little-endian, Model.StateSize()*4 bytes. The sink must copy what it needs
// before returning (the engine reuses the buffer) and must not block.
type StateSink interface {
	PromptState(state []byte)
}

func isStateSink(k KVSink) bool {
	_, ok := k.(StateSink)
	return ok
}

// statePool is the fixed set of state slots. A slot's floats are allocated
// on its first use and kept for reuse, so an engine pays for the slots it
// has used at once at most, never more than Config.StateSlots of them. It
// is the loop's alone.
type statePool struct {
	size  int         // float32s per slot
	slots [][]float32 // nil until first used
	free  []int       // free slot indexes, a stack
	held  []bool      // per slot: a sequence holds it
}

func newStatePool(slots, size int) *statePool {
	p := &statePool{size: size, slots: make([][]float32, slots), held: make([]bool, slots)}
	for i := slots - 1; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	return p
}

// used returns the slots held.
func (p *statePool) used() int {
	if p == nil {
		return 0
	}
	return len(p.slots) - len(p.free)
}

// acquire takes a free slot and returns its index and floats (as the last
// holder left them: the caller zeroes or fills them), or -1 when none is
// free.
func (p *statePool) acquire() (int, []float32) {
	if len(p.free) == 0 {
		return -1, nil
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	if p.slots[i] == nil {
		p.slots[i] = make([]float32, p.size)
	}
	p.held[i] = true
	return i, p.slots[i]
}

// release gives slot i back. Releasing a slot that is not held is a broken
// invariant: two sequences could then share one state.
func (p *statePool) release(id string, i int) {
	if i < 0 || i >= len(p.slots) || !p.held[i] {
		invariant.Failf("engine", "state slot accounting broken: request %q releasing slot %d, which is not held", id, i)
	}
	p.held[i] = false
	p.free = append(p.free, i)
}

// takeSlot gives s a state slot and reports whether one was free; admit
// zeroes it (the state at position 0) or fills it from a snapshot. Models
// without state need none.
func (e *Engine) takeSlot(s *seq) bool {
	if e.states == nil {
		return true
	}
	if s.slot >= 0 {
		invariant.Failf("engine", "state slot accounting broken: request %q already holds slot %d", s.req.ID, s.slot)
	}
	i, st := e.states.acquire()
	if i < 0 {
		return false
	}
	s.slot, s.state = i, st
	return true
}

// dropSlot gives s's slot back, if it holds one.
func (e *Engine) dropSlot(s *seq) {
	if e.states == nil || s.slot < 0 {
		return
	}
	e.states.release(s.req.ID, s.slot)
	s.slot, s.state = -1, nil
}

// stateBytes encodes state as little-endian float32s into the engine's
// scratch buffer and returns it (valid until the next call).
func (e *Engine) stateBytes(state []float32) []byte {
	n := 4 * len(state)
	if cap(e.stateBuf) < n {
		e.stateBuf = make([]byte, n)
	}
	b := e.stateBuf[:n]
	for i, f := range state {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeState decodes little-endian float32s into dst, whose length must
// be len(b)/4 (checked by the caller).
func decodeState(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// checkState checks an imported state's length against the model's.
func (e *Engine) checkState(state []byte) error {
	want := 4 * e.r.Model().StateSize()
	if len(state) != want {
		return fmt.Errorf("%w: the imported state has %d bytes, the model's state has %d (%d float32s, layout %q); the prefill worker runs another model or layout",
			ErrBadRequest, len(state), want, want/4, e.r.Model().StateLayout())
	}
	return nil
}

// sendPromptState hands s's state after the whole prompt to its StateSink,
// once; the caller calls it right after the forward step that completed
// the prompt.
func (e *Engine) sendPromptState(s *seq) {
	if e.states == nil || s.stateSent || s.computed != s.nPrompt {
		return
	}
	sink, ok := s.req.KVSink.(StateSink)
	if !ok {
		return
	}
	s.stateSent = true
	sink.PromptState(e.stateBytes(s.state))
}
