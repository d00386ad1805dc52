package kvwire

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Shape is what two workers must agree on before KV pages can move between
// them: the model, its attention geometry and the page layout. The
// handshake exchanges shapes and refuses the connection when they differ.
type Shape struct {
	Model      string // model name as both workers load it (≤ ModelBytesMax bytes)
	Layers     uint32 // transformer layers
	KVHeads    uint32 // key/value heads per layer
	HeadDim    uint32 // dimension of one head
	PageTokens uint32 // tokens per KV page
	DType      string // KV element type: "f16" or "f32" (≤ DTypeBytesMax bytes)
	// Window is the attention window in tokens of the layers WindowMask
	// marks (0: no sliding-window layers). Their KV frames cover only the
	// prompt's last window (pages from FirstWindowPage on).
	Window uint32
	// WindowMask has bit l%8 of byte l/8 set when layer l is a
	// sliding-window layer: ceil(Layers/8) bytes when Window > 0, empty
	// otherwise (≤ WindowMaskBytesMax bytes). WindowMaskOf builds it.
	WindowMask string
	// StateBytes is the size of one sequence's recurrent state (hybrid
	// models: the state of their linear-attention layers), 0 when every
	// layer keeps KV pages. Prefill ships a prompt's final state after its
	// pages in KV frames of kind KindState, StateFrameSize bytes each (the
	// last shorter): StateFrames of them.
	StateBytes uint32
	// StateLayout names how the state's bytes are laid out (the engine's
	// Model.StateLayout: layer order, tensor shapes, element type), so two
	// workers whose states have the same size but not the same meaning
	// refuse each other. Empty exactly when StateBytes is 0 (≤
	// StateLayoutBytesMax bytes).
	StateLayout string
}

// StateFrameSize is the data length of every state frame but the last for
// a state of stateBytes and KV pages of pageBytes: the state cut into about
// StateFramesTarget pieces, each a whole number of pages, at least one page
// and at most StateFrameBytesMax (or one page, when a page is larger).
// Fewer, larger frames cost less per byte; each still fits the smallest
// shared-memory ring. 0 when either size is not positive.
func StateFrameSize(stateBytes, pageBytes int) int {
	if stateBytes <= 0 || pageBytes <= 0 {
		return 0
	}
	pages := (stateBytes/StateFramesTarget + pageBytes - 1) / pageBytes
	return max(pageBytes, min(pages*pageBytes, StateFrameBytesMax/pageBytes*pageBytes))
}

// StateFrames is the number of KV frames of kind KindState that carry
// one sequence's state (0 without state).
func (s Shape) StateFrames() int {
	n := StateFrameSize(int(s.StateBytes), int(s.PageBytes()))
	if n == 0 {
		return 0
	}
	return (int(s.StateBytes) + n - 1) / n
}

// StateFrameBytes is the data length of state frame ordinal i:
// StateFrameSize, the rest of the state for the last one, and 0 for an
// ordinal past the last.
func (s Shape) StateFrameBytes(i int) int {
	if i < 0 || i >= s.StateFrames() {
		return 0
	}
	n := StateFrameSize(int(s.StateBytes), int(s.PageBytes()))
	return min(n, int(s.StateBytes)-i*n)
}

// WindowMaskOf packs a per-layer sliding-window flag list into
// Shape.WindowMask form ("" when no layer is windowed).
func WindowMaskOf(windowed []bool) string {
	if !slices.Contains(windowed, true) {
		return ""
	}
	b := make([]byte, (len(windowed)+7)/8)
	for l, w := range windowed {
		if w {
			b[l/8] |= 1 << (l % 8)
		}
	}
	return string(b)
}

// Windowed reports whether layer l is a sliding-window layer of s.
func (s Shape) Windowed(l int) bool {
	return s.Window > 0 && l >= 0 && l/8 < len(s.WindowMask) && s.WindowMask[l/8]&(1<<(l%8)) != 0
}

// FirstWindowPage is the first page ordinal of a promptTokens-token
// prompt that a sliding-window layer of s needs after the prompt: the
// page of position promptTokens-Window+1 (0 without a window). A KV frame
// of a windowed layer with a smaller ordinal is one no decode side asks
// for.
func (s Shape) FirstWindowPage(promptTokens int) int {
	if s.Window == 0 || s.PageTokens == 0 {
		return 0
	}
	return max(0, promptTokens-int(s.Window)+1) / int(s.PageTokens)
}

// Validate reports whether s can describe a local KV cache: a model name,
// non-zero sizes and a known dtype, all within the wire limits.
func (s Shape) Validate() error {
	var errs []error
	if s.Model == "" || len(s.Model) > ModelBytesMax {
		errs = append(errs, fmt.Errorf("model name must have 1 to %d bytes, has %d", ModelBytesMax, len(s.Model)))
	}
	for _, f := range []struct {
		name string
		v    uint32
	}{{"layers", s.Layers}, {"kv_heads", s.KVHeads}, {"head_dim", s.HeadDim}, {"page_tokens", s.PageTokens}} {
		if f.v == 0 {
			errs = append(errs, fmt.Errorf("%s is 0", f.name))
		}
	}
	if s.DType != "f16" && s.DType != "f32" {
		errs = append(errs, fmt.Errorf("dtype %q is not f16 or f32", s.DType))
	}
	if err := s.validWindow(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case s.StateBytes > StateBytesMax:
		errs = append(errs, fmt.Errorf("state of %d bytes is over the %d-byte limit", s.StateBytes, StateBytesMax))
	case (s.StateBytes == 0) != (s.StateLayout == ""):
		errs = append(errs, fmt.Errorf("state of %d bytes with layout %q: want both or neither", s.StateBytes, s.StateLayout))
	case len(s.StateLayout) > StateLayoutBytesMax:
		errs = append(errs, fmt.Errorf("state layout must have at most %d bytes, has %d", StateLayoutBytesMax, len(s.StateLayout)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("check shape: %w", err)
	}
	return nil
}

// validWindow checks Window and WindowMask against Layers.
func (s Shape) validWindow() error {
	switch {
	case s.Window == 0 && s.WindowMask != "":
		return fmt.Errorf("window layers are marked (%d mask bytes) without a window", len(s.WindowMask))
	case s.Window == 0:
		return nil
	case uint64(len(s.WindowMask)) != (uint64(s.Layers)+7)/8:
		return fmt.Errorf("window mask has %d bytes, %d layers need %d", len(s.WindowMask), s.Layers, (uint64(s.Layers)+7)/8)
	}
	for l := int(s.Layers); l < 8*len(s.WindowMask); l++ {
		if s.WindowMask[l/8]&(1<<(l%8)) != 0 {
			return fmt.Errorf("window mask marks layer %d of %d", l, s.Layers)
		}
	}
	if strings.Trim(s.WindowMask, "\x00") == "" {
		return fmt.Errorf("a window of %d tokens with no window layer marked", s.Window)
	}
	return nil
}

// Diff names every field in which s and o differ, s's value first:
// "page_tokens 16 vs 32; dtype f16 vs f32". It returns "" when they are
// equal. The text goes into handshake rejections and from there into the
// errors the edges report.
func (s Shape) Diff(o Shape) string {
	var parts []string
	str := func(name, a, b string) {
		if a != b {
			parts = append(parts, fmt.Sprintf("%s %s vs %s", name, quoteEmpty(a), quoteEmpty(b)))
		}
	}
	num := func(name string, a, b uint32) {
		if a != b {
			parts = append(parts, fmt.Sprintf("%s %d vs %d", name, a, b))
		}
	}
	str("model", s.Model, o.Model)
	num("layers", s.Layers, o.Layers)
	num("kv_heads", s.KVHeads, o.KVHeads)
	num("head_dim", s.HeadDim, o.HeadDim)
	num("page_tokens", s.PageTokens, o.PageTokens)
	str("dtype", s.DType, o.DType)
	num("window", s.Window, o.Window)
	str("window_layers", fmt.Sprintf("%x", s.WindowMask), fmt.Sprintf("%x", o.WindowMask))
	num("state_bytes", s.StateBytes, o.StateBytes)
	str("state_layout", s.StateLayout, o.StateLayout)
	return strings.Join(parts, "; ")
}

// quoteEmpty shows an empty string as "" so a diff line stays readable.
func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// ElementBytes is the size of one KV element for s.DType (2 or 4), or 0
// for an unknown dtype.
func (s Shape) ElementBytes() int {
	switch s.DType {
	case "f16":
		return 2
	case "f32":
		return 4
	}
	return 0
}

// PageBytes is the size of one page of one layer's K (or V):
// PageTokens × KVHeads × HeadDim × ElementBytes. It is what a KV frame
// carries.
func (s Shape) PageBytes() int64 {
	return int64(s.PageTokens) * int64(s.KVHeads) * int64(s.HeadDim) * int64(s.ElementBytes())
}

// AppendTo appends s's encoding: model, layers, kv_heads, head_dim,
// page_tokens, dtype, window, window_mask, state_bytes, state_layout.
func (s Shape) AppendTo(b []byte) []byte {
	b = appendStr(b, s.Model)
	b = appendU32(b, s.Layers)
	b = appendU32(b, s.KVHeads)
	b = appendU32(b, s.HeadDim)
	b = appendU32(b, s.PageTokens)
	b = appendStr(b, s.DType)
	b = appendU32(b, s.Window)
	b = appendStr(b, s.WindowMask)
	b = appendU32(b, s.StateBytes)
	return appendStr(b, s.StateLayout)
}

// Decode decodes exactly one encoded Shape from b.
func (s *Shape) Decode(b []byte) error {
	d := decoder{what: "shape", b: b}
	s.decodeFrom(&d)
	return d.done()
}

func (s *Shape) decodeFrom(d *decoder) {
	s.Model = d.str("model", ModelBytesMax)
	s.Layers = d.u32("layers")
	s.KVHeads = d.u32("kv_heads")
	s.HeadDim = d.u32("head_dim")
	s.PageTokens = d.u32("page_tokens")
	s.DType = d.str("dtype", DTypeBytesMax)
	s.Window = d.u32("window")
	s.WindowMask = d.str("window_mask", WindowMaskBytesMax)
	s.StateBytes = d.u32("state_bytes")
	s.StateLayout = d.str("state_layout", StateLayoutBytesMax)
}
