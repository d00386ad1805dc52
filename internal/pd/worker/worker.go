package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// Config configures a Worker.
type Config struct {
	Role     room.Role
	Room     room.Config     // deadlines and limits; Role is set from Role
	Transfer transfer.Config // listen address, cluster token; Shape is filled in from the engine
	Logger   *slog.Logger

	// noTimer disables the deadline timer, so tests can show the watchdog
	// catches what a broken timer would leave behind. Unexported: only
	// this package's tests set it.
	noTimer bool
}

// DefaultRoomConfig returns deadlines that suit one machine: every
// non-terminal state ends within a minute, and a lost peer is noticed by
// the transport within two heartbeat intervals.
func DefaultRoomConfig() room.Config {
	s := func(d time.Duration) room.Duration { return room.Duration(d) }
	return room.Config{
		HelloTimeout:     s(10 * time.Second),
		RequestTimeout:   s(10 * time.Second),
		AllocTimeout:     s(60 * time.Second),
		HandshakeTimeout: s(10 * time.Second),
		AdmissionTimeout: s(50 * time.Second),
		PrefillTimeout:   s(60 * time.Second),
		ProgressTimeout:  s(15 * time.Second),
		TombstoneTTL:     s(5 * time.Minute),
		RoomsMax:         4096,
		TombstonesMax:    8192,
	}
}

// Worker is one disaggregated worker (prefill or decode). Its methods are
// safe for concurrent use.
type Worker struct {
	role  room.Role
	eng   *engine.Engine
	tr    *transfer.Transport
	log   *slog.Logger
	start time.Time
	kvCfg kvcache.Config
	met   *metrics

	mu     sync.Mutex
	m      *room.Machine
	legs   map[room.ID]*leg
	peers  map[string]*peerQueue
	closed bool
	// submitting is the leg whose EventRequest is being stepped, so an
	// EffectReject reaches it and not a live leg with the same id.
	submitting *leg
	// released holds legs whose room ended while a KV write into their
	// pages was in flight; KVDone cancels their sequence afterwards.
	released map[room.ID]*leg

	timerWake chan struct{} // capacity 1
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New builds a worker around a running engine and starts its transport and
// timer. Close stops them.
func New(eng *engine.Engine, cfg Config) (*Worker, error) {
	if cfg.Role != room.RolePrefill && cfg.Role != room.RoleDecode {
		return nil, fmt.Errorf("worker: role must be prefill or decode")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Room.Role = cfg.Role
	m, err := room.New(cfg.Room)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	kvc := eng.KVCache().Config()
	mc := eng.Model().Config
	cfg.Transfer.Shape = kvwire.Shape{Model: mc.Name, Layers: uint32(kvc.Layers), KVHeads: uint32(kvc.KVHeads),
		HeadDim: uint32(kvc.HeadDim), PageTokens: uint32(kvc.PageTokens), DType: kvc.DType.String()}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{role: cfg.Role, eng: eng, log: log.With("role", roleName(cfg.Role)), start: time.Now(), kvCfg: kvc,
		m: m, legs: map[room.ID]*leg{}, released: map[room.ID]*leg{}, peers: map[string]*peerQueue{}, timerWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel}
	w.met = newMetrics(w)
	// Decode workers dial prefill workers; a prefill worker only answers.
	cfg.Transfer.AcceptOnly = cfg.Role == room.RolePrefill
	if cfg.Transfer.Load == nil {
		cfg.Transfer.Load = w.load
	}
	if cfg.Transfer.Logger == nil {
		cfg.Transfer.Logger = w.log
	}
	tr, err := transfer.New(cfg.Transfer, w)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.tr = tr
	w.wg.Add(3)
	go func() {
		defer w.wg.Done()
		if err := tr.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error("transfer listener stopped", "err", err)
		}
	}()
	go func() {
		defer w.wg.Done()
		if cfg.noTimer {
			<-ctx.Done()
			return
		}
		w.timerLoop()
	}()
	go func() {
		defer w.wg.Done()
		w.watchdogLoop()
	}()
	return w, nil
}

func roleName(r room.Role) string {
	if r == room.RolePrefill {
		return "prefill"
	}
	return "decode"
}

// Role returns the worker's role.
func (w *Worker) Role() room.Role { return w.role }

// TransferAddr returns the address peers reach this worker's transport at.
func (w *Worker) TransferAddr() string { return w.tr.Addr() }

// Engine returns the worker's engine.
func (w *Worker) Engine() *engine.Engine { return w.eng }

// Close fails every live room (shutdown), stops the transport, the timer
// and the sender goroutines, and waits for them.
func (w *Worker) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.step(room.Event{Kind: room.EventShutdown})
	w.mu.Lock()
	w.closed = true
	peers := w.peers
	w.mu.Unlock()
	for _, q := range peers {
		q.close()
	}
	w.cancel()
	w.tr.Close()
	w.wg.Wait()
}

func (w *Worker) now() room.Instant { return room.Instant(time.Since(w.start)) }

// step applies one event and carries out its effects. Effects that would
// feed further events (an engine that refuses a request) are stepped after.
func (w *Worker) step(ev room.Event) room.Outcome {
	w.mu.Lock()
	out, more := w.stepLocked(ev)
	w.mu.Unlock()
	w.kickTimer()
	for _, e := range more {
		w.step(e)
	}
	return out
}

// stepLocked is step with w.mu held; it returns follow-up events.
func (w *Worker) stepLocked(ev room.Event) (room.Outcome, []room.Event) {
	out := w.m.Step(w.now(), ev)
	w.met.event(ev.Kind, out)
	rd := w.m.Ready()
	w.m.Advance()
	return out, w.apply(rd)
}

// apply carries out effects in order; w.mu is held. Nothing here blocks:
// frames are queued to per-peer senders, engine calls only enqueue.
func (w *Worker) apply(rd room.Ready) []room.Event {
	for _, t := range rd.Transitions {
		w.met.transition(t)
	}
	var more []room.Event
	for _, e := range rd.Effects {
		if ev, ok := w.applyOne(e); ok {
			more = append(more, ev)
		}
	}
	return more
}

func (w *Worker) applyOne(e room.Effect) (room.Event, bool) {
	l := w.legs[e.Room]
	switch e.Kind {
	case room.EffectSend:
		w.sendControl(e)
	case room.EffectStartCompute:
		if l != nil {
			return w.startCompute(l, e)
		}
	case room.EffectCancelCompute:
		if l != nil && l.h != nil {
			l.h.Cancel()
		}
	case room.EffectAdmit:
		if l != nil {
			return w.admit(l)
		}
	case room.EffectResume:
		if l != nil && l.h != nil {
			l.resumed = true
			tok := engine.Token{ID: e.Token, Logprob: e.Logprob}
			if n := l.req.TopLogprobs; n > 0 {
				tok.Top = l.firstTop[:min(n, len(l.firstTop))]
			}
			if err := l.h.Resume(tok); err != nil {
				w.log.Error("resume failed", "room", e.Room, "err", err)
			}
		}
	case room.EffectCancelRequest:
		if l != nil {
			l.fail(legError(e.Reason, ""))
			w.cancelSequence(l)
		}
	case room.EffectReplyDone:
		if l != nil {
			l.succeed()
		}
	case room.EffectReject:
		if s := w.submitting; s != nil && s.id == e.Room {
			s.rejected = &Error{Status: e.Status, Reason: e.Reason, Msg: rejectMessage(e)}
		}
	case room.EffectFreePages:
		// Pages reserved for a room that had already ended: the engine owns
		// them, and the room's failure cancelled the engine sequence, which
		// frees them when the engine reaps it. Nothing else to do here.
	case room.EffectRelease:
		if l != nil {
			l.roomDone = true
			if !l.resumed {
				w.cancelSequence(l)
			}
			delete(w.legs, e.Room)
			if l.cancelPending {
				w.released[e.Room] = l // KVDone finishes the cancel
			}
		}
	}
	return room.Event{}, false
}

// cancelSequence ends the leg's engine sequence once no KV write into its
// pages is in flight (decode), so no page is reused while a write can land.
func (w *Worker) cancelSequence(l *leg) {
	if l.inflight > 0 {
		l.cancelPending = true
		return
	}
	l.cancelEngine()
}

func rejectMessage(e room.Effect) string {
	switch e.Status {
	case http.StatusConflict:
		return fmt.Sprintf("room %s is already in use on this worker (room ids are single-use)", e.Room)
	case http.StatusServiceUnavailable:
		return "this worker has too many live rooms; retry later"
	}
	return fmt.Sprintf("room %s already failed here: %s", e.Room, e.Reason)
}

// timerLoop fires the core's deadlines.
func (w *Worker) timerLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		d, ok := w.m.NextDeadline()
		w.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(time.Duration(d-w.now()), 0)
		}
		t.Reset(wait)
		select {
		case <-w.ctx.Done():
			return
		case <-w.timerWake:
		case <-t.C:
			w.tick()
		}
	}
}

func (w *Worker) kickTimer() {
	select {
	case w.timerWake <- struct{}{}:
	default:
	}
}

func (w *Worker) tick() {
	w.mu.Lock()
	w.m.Tick(w.now())
	rd := w.m.Ready()
	w.m.Advance()
	more := w.apply(rd)
	w.mu.Unlock()
	for _, e := range more {
		w.step(e)
	}
}

// Watchdog timing: every watchdogInterval the watchdog fails rooms more
// than watchdogGrace past their deadline. The timer loop fails rooms at
// their deadline, so in a healthy worker the watchdog never fires; when it
// does, the failure reason is "deadline" and a bug is in the timer path.
const (
	watchdogInterval = time.Second
	watchdogGrace    = time.Second
)

func (w *Worker) watchdogLoop() {
	t := time.NewTicker(watchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		ids := w.m.Overdue(w.now()-room.Instant(watchdogGrace), 0)
		w.mu.Unlock()
		for _, id := range ids {
			w.log.Error("watchdog: room past its deadline; failing it", "room", id)
			w.step(room.Event{Kind: room.EventWatchdog, Room: id})
		}
	}
}

// load reports this worker's queues in heartbeats.
func (w *Worker) load() kvwire.Heartbeat {
	st := w.eng.Stats()
	w.mu.Lock()
	live := w.m.Live()
	w.mu.Unlock()
	return kvwire.Heartbeat{Waiting: uint32(st.Waiting), Running: uint32(st.Running),
		PagesFree: uint32(st.PagesTot - st.PagesUsed), PagesTotal: uint32(st.PagesTot), RoomsLive: uint32(live)}
}
