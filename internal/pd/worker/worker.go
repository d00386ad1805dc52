package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
	"tandem/internal/server"
	"tandem/internal/telemetry"
)

// Config configures a Worker.
type Config struct {
	Role     room.Role
	Room     room.Config     // deadlines and limits; Role is set from Role
	Transfer transfer.Config // listen address, cluster token; Shape is filled in from the engine
	Logger   *slog.Logger
	// Tracing exports the rooms' spans (package telemetry); nil: none.
	Tracing *telemetry.Tracing
	// Limits bounds the send queues (one worker-wide byte budget, per-peer
	// shares derived from it); the zero value means driver.DefaultLimits.
	Limits driver.Limits

	// noTimer disables the deadline timer, so tests can show the watchdog
	// catches what a broken timer would leave behind. Unexported: only
	// this package's tests set it.
	noTimer bool
}

// DefaultRoomConfig returns the room core's deadlines and limits for
// workers on one machine. No phase waits longer than a minute for its
// next step (AllocTimeout and PrefillTimeout 60 s, ProgressTimeout 15 s
// between two steps of a transfer), so a room that stops moving ends
// within the sum of its phases' timeouts: prefill 10+60+60+15 = 145 s up
// to its DONE and then at most DoneAckWaitMax (8) progress timeouts more
// while decode's heartbeats keep coming (2 min), decode 10+50+60+15 =
// 135 s. A transfer that keeps moving is not cut short, however slow.
// How soon a lost peer is noticed is the transport's business
// (transfer.Config.HeartbeatInterval), not configured here.
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
//
// It is the I/O around a driver.Driver, which holds every decision: the
// Worker owns the goroutines (one per peer send lane, the timer, the
// watchdog, a watcher per prefill sequence), the transport, the engine and
// the HTTP legs, and calls the driver with mu held.
type Worker struct {
	role    room.Role
	eng     *engine.Engine
	tr      *transfer.Transport
	log     *slog.Logger
	tracing *telemetry.Tracing
	start   time.Time
	// instance identifies this process in /pd/info and /pd/status (16 hex
	// digits, new at each start): a router sees a restart on the same
	// address by it.
	instance string
	kvCfg    kvcache.Config
	// stateBytes is one sequence's recurrent state (0: the model keeps
	// KV pages only); prefill ships it after the pages, decode receives
	// it into a buffer of this size per admitted room.
	stateBytes int
	shape      kvwire.Shape // what the handshake compares (Shape)
	met        *metrics

	mu sync.Mutex
	d  *driver.Driver[*leg]
	// rep is where the adapters report (Sent, KVReady, ComputeDone,
	// EngineError, Admitted): d, or a conformance test's recorder.
	rep    driver.Reports[*leg]
	lanes  map[string]*peerLanes // per peer, while the driver holds frames for it
	closed bool
	// views are recent rooms' legs, for /debug/rooms (observe.go).
	views     map[room.ID]*leg
	viewOrder []room.ID

	loadMu sync.Mutex
	loads  map[string]peerLoad // the peers' last heartbeats

	local     localLegs      // room ids of recent local legs (local.go)
	colocated server.Backend // the engine as a colocated server uses it: local legs run on it

	closeOnce sync.Once
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
	kvc := eng.KVCache().Config()
	mc := eng.Model().Config
	stateBytes := 4 * eng.Model().StateSize() // float32s
	cfg.Transfer.Shape = kvwire.Shape{Model: mc.Name, Layers: uint32(kvc.Layers), KVHeads: uint32(kvc.KVHeads),
		HeadDim: uint32(kvc.HeadDim), PageTokens: uint32(kvc.PageTokens), DType: kvc.DType.String(),
		Window: uint32(kvc.Window), WindowMask: kvwire.WindowMaskOf(kvc.WindowLayers),
		StateBytes: uint32(stateBytes), StateLayout: eng.Model().StateLayout()}
	if err := cfg.Transfer.Shape.Validate(); err != nil {
		return nil, fmt.Errorf("worker: the model's KV and state layout cannot be moved between workers: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{role: cfg.Role, eng: eng, log: log.With("role", cfg.Role.String()), tracing: cfg.Tracing, start: time.Now(), kvCfg: kvc,
		stateBytes: stateBytes, shape: cfg.Transfer.Shape,
		lanes: map[string]*peerLanes{}, loads: map[string]peerLoad{}, timerWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, instance: NewInstanceID()}
	w.met = newMetrics(w)
	w.colocated = server.EngineBackend(eng)
	lim := cfg.Limits
	if lim == (driver.Limits{}) {
		lim = driver.DefaultLimits()
	}
	d, err := driver.New(driver.Config[*leg]{Room: cfg.Room, Layers: kvc.Layers, PageBytes: kvc.PageBytes(), StateBytes: stateBytes, Limits: lim,
		Engine: engineAdapter{w}, Wire: wireAdapter{w}, Legs: legsAdapter{}, Observer: w.met, Logger: w.log})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.d, w.rep = d, d
	// Decode workers dial prefill workers; a prefill worker only answers.
	cfg.Transfer.AcceptOnly = cfg.Role == room.RolePrefill
	if cfg.Role == room.RoleDecode {
		// Nothing dials a decode worker, so it listens nowhere: no
		// transfer port, no pre-auth surface. Its identity is
		// Transfer.AdvertiseAddr, or a random name per process.
		if cfg.Transfer.Listener != nil {
			cfg.Transfer.Listener.Close()
		}
		cfg.Transfer.DialOnly, cfg.Transfer.ListenAddr, cfg.Transfer.Listener = true, "", nil
	}
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

// Role returns the worker's role.
func (w *Worker) Role() room.Role { return w.role }

// TransferAddr returns the address peers reach this worker's transport at:
// the advertised address when one is configured, else the listen address.
// It is this worker's identity in the handshake, so it is what /pd/info
// and /pd/status publish.
func (w *Worker) TransferAddr() string { return w.tr.AdvertiseAddr() }

// Engine returns the worker's engine.
func (w *Worker) Engine() *engine.Engine { return w.eng }

// Close fails every live room (shutdown), stops the transport, the timer
// and the sender goroutines, and waits for them. It is idempotent and safe
// to call concurrently: every call returns after the worker has stopped.
func (w *Worker) Close() {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.d.Shutdown(w.now())
		w.mu.Unlock()
		w.cancel()
		w.tr.Close()
		w.wg.Wait()
	})
}

func (w *Worker) now() room.Instant { return room.Instant(time.Since(w.start)) }

// locked runs f with mu held and the current time, then wakes the timer
// (f may have moved the next deadline).
func (w *Worker) locked(f func(now room.Instant)) {
	w.mu.Lock()
	f(w.now())
	w.mu.Unlock()
	w.kickTimer()
}

// step applies one event through the driver (for events it has no method
// for; tests use it).
func (w *Worker) step(ev room.Event) room.Outcome {
	var o room.Outcome
	w.locked(func(now room.Instant) { o = w.d.Step(now, ev) })
	return o
}

// timerLoop fires the core's deadlines.
func (w *Worker) timerLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		d, ok := w.d.NextDeadline()
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
			w.mu.Lock()
			w.d.Tick(w.now())
			w.mu.Unlock()
		}
	}
}

func (w *Worker) kickTimer() {
	select {
	case w.timerWake <- struct{}{}:
	default:
	}
}

// watchdogInterval is how often the watchdog looks for rooms more than
// room.WatchdogGrace past their deadline. The timer loop fails rooms at
// their deadline, so in a healthy worker the watchdog never fires; when it
// does, the failure reason is "deadline" and a bug is in the timer path.
const watchdogInterval = time.Second

func (w *Worker) watchdogLoop() {
	t := time.NewTicker(watchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		var ids []room.ID
		w.locked(func(now room.Instant) { ids = w.d.Watchdog(now) })
		for _, id := range ids {
			w.log.Error("watchdog: room past its deadline; failed it", "room", id)
		}
	}
}

// load reports this worker's queues in heartbeats.
func (w *Worker) load() kvwire.Heartbeat {
	st := w.eng.Stats()
	w.mu.Lock()
	live := w.d.Live()
	w.mu.Unlock()
	return kvwire.Heartbeat{Waiting: uint32(st.Waiting), Running: uint32(st.Running),
		PagesFree: uint32(st.PagesTot - st.PagesUsed), PagesTotal: uint32(st.PagesTot), RoomsLive: uint32(live)}
}

// LiveRooms returns how many rooms have not reached a terminal state: a
// drain waits for it to reach zero (a prefill room ends once decode
// acknowledged its KV, a decode room once its stream ended).
func (w *Worker) LiveRooms() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.Live()
}

// NewInstanceID returns 8 random bytes in hex: a process's instance id
// (/pd/info, /pd/status), new at each start; embedding workers use it too.
func NewInstanceID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

// Instance returns the worker's instance id, new at each start.
func (w *Worker) Instance() string { return w.instance }

// Shape returns what this worker's handshake sends its peers: the model,
// its KV page layout and its recurrent state. A room moves, per prompt
// page, Layers K and V pages of PageBytes each, and then StateBytes of
// state.
func (w *Worker) Shape() kvwire.Shape { return w.shape }
