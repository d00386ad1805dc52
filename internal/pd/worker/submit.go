package worker

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/sample"
	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/server"
	"tandem/internal/telemetry"

	"go.opentelemetry.io/otel/trace"
)

// The Worker is the server's Legs (server.Options.Legs): the HTTP API
// hands it every request whose router leg signature verified.
var _ server.Legs = (*Worker)(nil)

// SubmitLeg serves one router leg (server.Legs): a prefill or decode leg
// becomes a room on this worker; a local leg (decode workers; see
// local.go) runs whole on the engine, as a colocated request does. A leg
// this worker cannot take is refused with an *Error (400 for a leg of
// another role or without what its role needs, 409 for a room id in use,
// 503 when the worker is full or stopping; see httpStatus); a room that
// fails later ends the returned stream with one.
func (w *Worker) SubmitLeg(ctx context.Context, li apileg.Info, req engine.Request) (server.Stream, error) {
	id, err := room.ParseID(li.Room)
	if err != nil {
		return nil, fmt.Errorf("%w: header X-Tandem-Room: %w", engine.ErrBadRequest, err)
	}
	if li.Leg == apileg.KindLocal {
		return w.submitLocal(ctx, id, li, req)
	}
	want := w.role.String()
	if li.Leg != want {
		return nil, refusal(room.ReasonBadRequest, fmt.Sprintf("this is a %s worker; the request is a %q leg", want, li.Leg))
	}
	if w.role == room.RoleDecode && li.Prefill == "" {
		return nil, refusal(room.ReasonBadRequest, "a decode leg needs the X-Tandem-Prefill header (the prefill worker's transfer address)")
	}
	return w.submit(ctx, id, li, req)
}

// submit turns a router leg into a room.
func (w *Worker) submit(ctx context.Context, id room.ID, li apileg.Info, req engine.Request) (server.Stream, error) {
	l := newLeg(w, id, req)
	peer := ""
	if w.role == room.RoleDecode {
		peer = li.Prefill
	}
	tctx := traceContext(ctx, li)
	l.ctx, l.requestID, l.peer = ctx, li.RequestID, peer
	l.parent, l.traceID = trace.SpanContextFromContext(tctx), telemetry.TraceID(tctx)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, legError(room.ReasonShutdown, "the worker is stopping")
	}
	rej := w.d.Request(w.now(), id, li.RequestID, peer, l)
	if rej == nil {
		w.addView(l)
	}
	w.mu.Unlock()
	w.kickTimer()
	if rej != nil {
		return nil, rejectError(rej)
	}
	if w.role == room.RolePrefill {
		return &prefillStream{l: l}, nil
	}
	return &decodeStream{l: l}, nil
}

// engineAdapter is the driver's Engine: the worker's engine, with a KV sink
// (prefill) or an import (decode) per room. Its methods run with w.mu held
// and only queue work in the engine.
type engineAdapter struct{ w *Worker }

// StartCompute runs the prompt on the prefill engine with a sink that ships
// pages to the decode worker.
func (a engineAdapter) StartCompute(l *leg, pages int) error {
	w := a.w
	if want := w.kvCfg.PagesFor(len(l.req.Prompt)); want != pages {
		return fmt.Errorf("the prompt needs %d pages, decode allocated %d", want, pages)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	req := l.req
	req.MaxTokens = 1
	req.MinTokens = min(req.MinTokens, 1) // still holds off an end as the first token
	req.KVSink = &sink{w: w, l: l, pageCount: pages, stateChunk: kvwire.StateFrameSize(w.stateBytes, w.kvCfg.PageBytes())}
	// Stamped before Submit, which stamps the engine's enqueue time: the
	// admission time derived from it (computeAt + QueueTime) is then never
	// later than the true one, however long Submit takes to return.
	computeAt := time.Now()
	h, err := w.eng.Submit(ctx, req)
	if err != nil {
		cancel()
		return err
	}
	l.setHandle(h, cancel)
	l.computeAt = computeAt
	w.wg.Add(1)
	go w.watchPrefill(l, h)
	return nil
}

// Admit asks the decode engine for the prompt's pages; the engine calls
// back (Allocated) from its step loop.
func (a engineAdapter) Admit(l *leg) error {
	w := a.w
	ctx, cancel := context.WithCancel(w.ctx)
	req := l.req
	req.Import = &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) {
		// The driver names the room's pages by ordinal (the page index
		// of the prompt, as KV frames do); cachePages maps an ordinal to
		// the page of the frame's layer group.
		ords := make([]int32, kv.Config().PagesFor(len(req.Prompt)))
		for i := range ords {
			ords[i] = int32(i)
		}
		// The state buffer is allocated with the pages, before ALLOC
		// goes out: prefill's state frames land in it.
		var state []byte
		if w.stateBytes > 0 {
			state = make([]byte, w.stateBytes)
		}
		w.locked(func(now room.Instant) {
			l.state = state
			w.rep.Admitted(now, l.id, l, cachePages{kv, t}, ords, state)
		})
	}}
	h, err := w.eng.Submit(ctx, req)
	if err != nil {
		cancel()
		return err
	}
	l.setHandle(h, cancel)
	return nil
}

// Resume continues the decode sequence from the first token.
func (a engineAdapter) Resume(l *leg, first driver.Token) error {
	if l.h == nil {
		return fmt.Errorf("room %s has no engine sequence to resume", l.id)
	}
	l.resumed = true
	l.resumedAt, l.resumedIn = time.Now(), l.w.now()
	tok := engine.Token{ID: first.ID, Logprob: first.Logprob}
	if n := l.req.TopLogprobs; n > 0 {
		for _, t := range first.Top[:min(n, len(first.Top))] {
			tok.Top = append(tok.Top, sample.TokenLogprob{ID: t.ID, Logprob: t.Logprob})
		}
	}
	if l.w.stateBytes == 0 {
		return l.h.Resume(tok)
	}
	// A hybrid model: the sequence resumes from the prompt's final
	// state too, which the room received into l.state. ResumeState
	// copies it, so the leg lets it go (it lives as long as the stream).
	state := l.state
	l.state = nil
	return l.h.ResumeState(tok, state)
}

// Cancel ends the leg's engine sequence.
func (a engineAdapter) Cancel(l *leg) { l.cancelEngine() }

// cachePages is the decode engine's KV cache as the driver's Pages: the
// driver's page numbers are the prompt's page ordinals, and each layer
// reads its group's table. A window-group ordinal before the prompt's
// last window has no page on this side: nil, which the driver drops as
// bad coordinates (the prefill side never sends one; a peer that does
// fails the room at DONE, whose byte count it then misses).
type cachePages struct {
	kv *kvcache.Cache
	t  kvcache.Tables
}

func (c cachePages) KVPage(layer int, kind kvwire.KVKind, ord int32) []byte {
	if layer < 0 || layer >= c.kv.Config().Layers {
		return nil
	}
	tab := c.t.Layer(c.kv, layer)
	if ord < 0 || int(ord) >= len(tab) || tab[ord] < 0 {
		return nil
	}
	if kind == kvwire.KindK {
		return c.kv.KPage(layer, tab[ord])
	}
	return c.kv.VPage(layer, tab[ord])
}

// legsAdapter is the driver's Legs: it wakes the leg's HTTP stream.
type legsAdapter struct{}

// The adapters implement the driver's interfaces.
var (
	_ driver.Engine[*leg] = engineAdapter{}
	_ driver.Legs[*leg]   = legsAdapter{}
	_ driver.Wire         = wireAdapter{}
	_ driver.Pages        = cachePages{}
	_ driver.Observer     = (*metrics)(nil)
)

func (legsAdapter) Succeed(l *leg)                  { l.succeed() }
func (legsAdapter) Fail(l *leg, reason room.Reason) { l.fail(legError(reason, "")) }

// watchPrefill turns the prefill engine's outcome into driver calls.
func (w *Worker) watchPrefill(l *leg, h *engine.Handle) {
	defer w.wg.Done()
	for {
		u, err := h.Next(w.ctx)
		if err != nil {
			return // worker closing; Close fails the rooms
		}
		if len(u.Tokens) > 0 {
			t := u.Tokens[0]
			first := driver.Token{ID: t.ID, Logprob: t.Logprob}
			for _, tl := range t.Top {
				first.Top = append(first.Top, kvwire.TopLogprob{ID: tl.ID, Logprob: tl.Logprob})
			}
			w.locked(func(now room.Instant) {
				l.first = u
				l.first.Done = false
				l.firstAt = time.Now()
				w.rep.ComputeDone(now, l.id, l, first)
			})
			return
		}
		if u.Done {
			if u.Finish != engine.FinishCancelled {
				w.log.Warn("prefill engine failed the prompt", "room", l.id, "err", u.Err)
				w.locked(func(now room.Instant) { w.rep.EngineError(now, l.id, l) })
			}
			return
		}
	}
}

// sink is the prefill side's engine.KVSink: as soon as a layer of a
// prefill step is in the cache, it hands that layer's finished pages to
// the driver as KV frames for the decode worker, so the transfer of layer
// l overlaps the compute of the layers after it. The frames' data is the
// cache's own page memory: the sink takes a reference on each page (a
// pageHold), so the engine does not reuse it until both of its frames are
// released, once sent (or copied out by decode, for a KV_SRC frame) or
// dropped. Its fields are touched only by the engine's step loop.
type sink struct {
	w          *Worker
	l          *leg
	pageCount  int
	stateChunk int   // a state frame carries at most this much
	sentPages  []int // per layer: pages handed to the driver
}

// PromptState runs on the engine's step loop once, after the prompt's last
// LayerComputed: it hands the prompt's final recurrent state (models with
// one) to the driver as state frames of stateChunk bytes each
// (kvwire.StateFrameSize), the last one shorter. The engine keeps its
// buffer, so the frames share one copy.
func (s *sink) PromptState(state []byte) {
	if s.stateChunk <= 0 {
		return // a model without state: nothing is expected
	}
	buf := slices.Clone(state)
	frames := make([]driver.KVFrame, 0, (len(buf)+s.stateChunk-1)/s.stateChunk)
	for o := 0; o*s.stateChunk < len(buf); o++ {
		frames = append(frames, driver.KVFrame{KV: kvwire.KV{Kind: kvwire.KindState, Ordinal: uint32(o)},
			Data: buf[o*s.stateChunk : min(len(buf), (o+1)*s.stateChunk)]})
	}
	s.w.locked(func(now room.Instant) { s.w.rep.KVReady(now, s.l.id, s.l, frames) })
}

// LayerComputed runs on the engine's step loop.
func (s *sink) LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool) {
	if s.sentPages == nil {
		s.sentPages = make([]int, kv.Config().Layers)
	}
	full := computed / kv.Config().PageTokens
	if final {
		full = kv.Config().PagesFor(computed)
	}
	full = min(full, s.pageCount, len(pages))
	from := s.sentPages[layer]
	if kv.Group(layer) == kvcache.GroupWindow {
		// decode reads only the prompt's last window of this layer
		from = max(from, kv.Config().FirstNeeded(kvcache.GroupWindow, len(s.l.req.Prompt)))
	}
	if full <= from {
		return
	}
	frames := make([]driver.KVFrame, 0, 2*(full-from))
	g := kv.Group(layer)
	span := pages[from:full]
	live := make([]int32, 0, len(span))
	for _, p := range span {
		if p >= 0 { // -1: released, before the window (not reached: from is past them)
			live = append(live, p)
		}
	}
	held := kv.Pool(g).Ref(live) == nil // the sequence holds them: this cannot fail
	for i, p := range span {
		if p < 0 {
			continue
		}
		ord := from + i
		var release func()
		if held {
			h := &pageHold{eng: s.w.eng, group: g, page: p}
			h.left.Store(2)
			release = h.done
		}
		for kind, page := range [2][]byte{kv.KPage(layer, p), kv.VPage(layer, p)} {
			if !held {
				page = slices.Clone(page)
			}
			frames = append(frames, driver.KVFrame{KV: kvwire.KV{Layer: uint16(layer), Kind: kvwire.KVKind(kind), Ordinal: uint32(ord)},
				Data: page, Release: release})
		}
	}
	s.sentPages[layer] = full
	s.w.locked(func(now room.Instant) {
		if layer == 0 && len(s.l.chunks) < chunksMax && s.w.tracing.Enabled() && !unsampled(s.l.parent) {
			s.l.chunks = append(s.l.chunks, chunk{at: time.Now(), computed: computed})
		}
		s.w.rep.KVReady(now, s.l.id, s.l, frames)
	})
}

// pageHold is the sink's reference on one cache page, shared by the K and
// V frames of one layer: the last of the two releases gives it back.
type pageHold struct {
	eng   *engine.Engine
	group int
	page  int32
	left  atomic.Int32
}

func (h *pageHold) done() {
	if h.left.Add(-1) == 0 {
		h.eng.ReleasePage(h.group, h.page)
	}
}

// The prefill sink is a StateSink: a hybrid model's engine hands it the
// prompt's final state.
var _ engine.StateSink = (*sink)(nil)
