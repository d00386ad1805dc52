package worker

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

// Backend returns the server.Backend for this worker's HTTP API: requests
// that carry the router's leg headers become rooms; requests without them
// are served colocated by the engine (handy for checks and debugging).
func (w *Worker) Backend() server.Backend {
	return &backend{w: w, local: server.EngineBackend(w.eng)}
}

type backend struct {
	w     *Worker
	local server.Backend
}

func (b *backend) Stats() engine.Stats             { return b.local.Stats() }
func (b *backend) ModelConfig() model.Config       { return b.local.ModelConfig() }
func (b *backend) Tokenizer() *tokenizer.Tokenizer { return b.local.Tokenizer() }

func (b *backend) Submit(ctx context.Context, req engine.Request) (server.Stream, error) {
	li, ok := server.LegFromContext(ctx)
	if !ok {
		return b.local.Submit(ctx, req)
	}
	id, err := room.ParseID(li.Room)
	if err != nil {
		return nil, fmt.Errorf("%w: header X-Tandem-Room: %w", engine.ErrBadRequest, err)
	}
	want := roleName(b.w.role)
	if li.Leg != want {
		return nil, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("this is a %s worker; the request is a %q leg", want, li.Leg)}
	}
	if b.w.role == room.RoleDecode && li.Prefill == "" {
		return nil, &Error{Status: http.StatusBadRequest, Msg: "a decode leg needs the X-Tandem-Prefill header (the prefill worker's transfer address)"}
	}
	return b.w.submit(id, li, req)
}

// submit turns a router leg into a room.
func (w *Worker) submit(id room.ID, li server.LegInfo, req engine.Request) (server.Stream, error) {
	l := newLeg(w, id, req)
	ev := room.Event{Kind: room.EventRequest, Room: id, RequestID: li.RequestID}
	if w.role == room.RoleDecode {
		l.peer = li.Prefill
		ev.Peer = li.Prefill
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, legError(room.ReasonShutdown, "the worker is stopping")
	}
	if _, dup := w.legs[id]; !dup {
		w.legs[id] = l
	}
	w.submitting = l
	_, more := w.stepLocked(ev)
	w.submitting = nil
	rej := l.rejected
	if rej != nil && w.legs[id] == l {
		delete(w.legs, id)
	}
	w.mu.Unlock()
	w.kickTimer()
	for _, e := range more {
		w.step(e)
	}
	if rej != nil {
		return nil, rej
	}
	if w.role == room.RolePrefill {
		return &prefillStream{l: l}, nil
	}
	return &decodeStream{l: l}, nil
}

// startCompute runs the prompt on the prefill engine with a sink that ships
// pages to the decode worker. w.mu is held.
func (w *Worker) startCompute(l *leg, e room.Effect) (room.Event, bool) {
	l.pageCount = len(e.Pages)
	l.peer = e.Peer
	if want := w.kvCfg.PagesFor(len(l.req.Prompt)); want != l.pageCount {
		return room.Event{Kind: room.EventEngineError, Room: l.id}, true
	}
	ctx, cancel := context.WithCancel(w.ctx)
	req := l.req
	req.MaxTokens = 1
	req.KVSink = &sink{w: w, l: l}
	h, err := w.eng.Submit(ctx, req)
	if err != nil {
		cancel()
		w.log.Warn("prefill engine refused the prompt", "room", l.id, "err", err)
		return room.Event{Kind: room.EventEngineError, Room: l.id}, true
	}
	l.setHandle(h, cancel)
	w.wg.Add(1)
	go w.watchPrefill(l, h)
	return room.Event{Kind: room.EventComputeStarted, Room: l.id}, true
}

// watchPrefill turns the prefill engine's outcome into room events.
func (w *Worker) watchPrefill(l *leg, h *engine.Handle) {
	defer w.wg.Done()
	for {
		u, err := h.Next(w.ctx)
		if err != nil {
			return // worker closing; Close fails the rooms
		}
		if len(u.Tokens) > 0 {
			w.mu.Lock()
			l.first = u
			l.first.Done = false
			w.mu.Unlock()
			t := u.Tokens[0]
			w.step(room.Event{Kind: room.EventComputeDone, Room: l.id, Token: t.ID, Logprob: t.Logprob})
			return
		}
		if u.Done {
			if u.Finish != engine.FinishCancelled {
				w.log.Warn("prefill engine failed the prompt", "room", l.id, "err", u.Err)
				w.step(room.Event{Kind: room.EventEngineError, Room: l.id})
			}
			return
		}
	}
}

// sink is the prefill side's engine.KVSink: as soon as a layer of a
// prefill step is in the cache, it copies that layer's finished pages into
// KV frames for the decode worker, so the transfer of layer l overlaps the
// compute of the layers after it.
type sink struct {
	w *Worker
	l *leg
}

// LayerComputed runs on the engine's step loop.
func (s *sink) LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool) {
	l := s.l
	if l.sentPages == nil {
		l.sentPages = make([]int, kv.Config().Layers)
	}
	full := computed / kv.Config().PageTokens
	if final {
		full = kv.Config().PagesFor(computed)
	}
	full = min(full, l.pageCount, len(pages))
	if full <= l.sentPages[layer] {
		return
	}
	frames := make([]outFrame, 0, 2*(full-l.sentPages[layer]))
	var bytes int64
	for ord := l.sentPages[layer]; ord < full; ord++ {
		for kind, page := range [2][]byte{kv.KPage(layer, pages[ord]), kv.VPage(layer, pages[ord])} {
			frames = append(frames, outFrame{room: l.id, kv: &kvwire.KV{Layer: uint16(layer), Kind: kvwire.KVKind(kind), Ordinal: uint32(ord)},
				data: slices.Clone(page)})
			bytes += int64(len(page))
		}
	}
	l.sentPages[layer] = full
	l.sentBytes += bytes
	if !s.w.enqueue(l.peer, frames...) {
		s.w.step(room.Event{Kind: room.EventEngineError, Room: l.id})
		return
	}
	s.w.step(room.Event{Kind: room.EventKVSent, Room: l.id, Bytes: l.sentBytes})
}

// admit asks the decode engine for the prompt's pages; the engine calls
// back (onAllocated) from its step loop. w.mu is held.
func (w *Worker) admit(l *leg) (room.Event, bool) {
	ctx, cancel := context.WithCancel(w.ctx)
	req := l.req
	req.Import = &engine.Import{Allocated: func(kv *kvcache.Cache, pages []int32) { w.onAllocated(l, kv, pages) }}
	h, err := w.eng.Submit(ctx, req)
	if err != nil {
		cancel()
		w.log.Warn("decode engine refused the request", "room", l.id, "err", err)
		return room.Event{Kind: room.EventEngineError, Room: l.id}, true
	}
	l.setHandle(h, cancel)
	return room.Event{}, false
}

func (w *Worker) onAllocated(l *leg, kv *kvcache.Cache, pages []int32) {
	w.mu.Lock()
	l.kv, l.pages = kv, pages
	w.mu.Unlock()
	w.step(room.Event{Kind: room.EventAdmitted, Room: l.id, Pages: pages})
}
