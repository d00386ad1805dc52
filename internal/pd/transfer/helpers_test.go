package transfer_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

var token = []byte("test-cluster-token-0123456789")

func testShape() kvwire.Shape {
	return kvwire.Shape{Model: "tiny", Layers: 2, KVHeads: 2, HeadDim: 8, PageTokens: 16, DType: "f16"}
}

// event is one Handler call.
type event struct {
	kind    string // frame, kvdone, up, lost
	at      time.Time
	peer    string
	typ     kvwire.Type
	room    room.ID
	payload []byte
	kv      kvwire.KV
	n       int
	ok      bool
	hb      kvwire.Heartbeat
	err     error
}

func (e event) String() string {
	switch e.kind {
	case "frame":
		return fmt.Sprintf("frame %v room %x from %s", e.typ, e.room[:2], e.peer)
	case "kvdone":
		return fmt.Sprintf("kvdone layer %d %v ordinal %d n %d ok %v", e.kv.Layer, e.kv.Kind, e.kv.Ordinal, e.n, e.ok)
	case "up":
		return fmt.Sprintf("up %s seq %d", e.peer, e.hb.Seq)
	}
	return fmt.Sprintf("%s %s %v", e.kind, e.peer, e.err)
}

// recorder is a Handler that records every call. KVDest returns slices
// from dest when set.
type recorder struct {
	mu     sync.Mutex
	events []event
	notify chan struct{}
	dest   func(peer string, id room.ID, kv kvwire.KV, n int) []byte
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(e event) {
	e.at = time.Now()
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) Frame(peer string, h kvwire.Header, payload []byte) {
	r.add(event{kind: "frame", peer: peer, typ: h.Type, room: h.Room, payload: slices.Clone(payload)})
}

func (r *recorder) KVDest(peer string, id room.ID, kv kvwire.KV, n int) []byte {
	r.mu.Lock()
	dest := r.dest
	r.mu.Unlock()
	if dest == nil {
		return nil
	}
	return dest(peer, id, kv, n)
}

func (r *recorder) KVDone(peer string, id room.ID, kv kvwire.KV, n int, ok bool) {
	r.add(event{kind: "kvdone", peer: peer, room: id, kv: kv, n: n, ok: ok})
}

func (r *recorder) PeerUp(peer string, hb kvwire.Heartbeat) {
	r.add(event{kind: "up", peer: peer, hb: hb})
}

func (r *recorder) PeerLost(peer string, err error) {
	r.add(event{kind: "lost", peer: peer, err: err})
}

// all returns the events matching match.
func (r *recorder) all(match func(event) bool) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// wait returns the n-th (from 1) event matching match, waiting up to
// timeout (real or, in a bubble, fake time).
func (r *recorder) wait(t *testing.T, timeout time.Duration, n int, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if got := r.all(match); len(got) >= n {
			return got[n-1]
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			t.Fatalf("no %s (#%d) within %v; events: %v", what, n, timeout, r.all(func(event) bool { return true }))
			return event{}
		}
	}
}

func isKind(kind string) func(event) bool { return func(e event) bool { return e.kind == kind } }

func isFrame(typ kvwire.Type) func(event) bool {
	return func(e event) bool { return e.kind == "frame" && e.typ == typ }
}

// kvTransport is the KV transport of the tests' transports. With auto
// (the default) the pairs on 127.0.0.1 carry KV through shared memory on
// Linux and the pipe-network pairs over TCP; -kv-transport=tcp runs them
// all over TCP.
var kvTransport = flag.String("kv-transport", "auto", "KV transport of the test transports: auto or tcp")

func config(listen string) transfer.Config {
	kv, err := transfer.ParseKVTransport(*kvTransport)
	if err != nil {
		panic(err)
	}
	return transfer.Config{
		KVTransport:       kv,
		ListenAddr:        listen,
		ClusterToken:      token,
		Shape:             testShape(),
		HeartbeatInterval: 50 * time.Millisecond,
		DialTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
	}
}

// node is a Transport with its Handler and its Serve goroutine.
type node struct {
	*transfer.Transport
	rec    *recorder
	cancel context.CancelFunc
	served chan error
}

// start creates a Transport and runs Serve until stop.
func start(t *testing.T, cfg transfer.Config) *node {
	t.Helper()
	rec := newRecorder()
	tr, err := transfer.New(cfg, rec)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Transport: tr, rec: rec, cancel: cancel, served: make(chan error, 1)}
	go func() { n.served <- tr.Serve(ctx) }()
	t.Cleanup(n.stop)
	return n
}

// stop cancels Serve and waits for it; it may be called more than once.
func (n *node) stop() {
	n.cancel()
	if err, ok := <-n.served; ok {
		close(n.served)
		if err != nil {
			panic(fmt.Sprintf("Serve returned %v", err))
		}
	}
}

func roomID(i int) room.ID { return room.ID{0xaa, byte(i >> 8), byte(i), 1} }

func payload(p kvwire.Payload) []byte { return p.AppendTo(nil) }

// faultFunc adapts functions to transfer.Faults.
type faultFunc struct {
	write func(peer string, h kvwire.Header) transfer.Fault
	read  func(peer string, h kvwire.Header) transfer.Fault
}

func (f *faultFunc) BeforeWrite(peer string, h kvwire.Header) transfer.Fault {
	if f.write == nil {
		return transfer.Fault{}
	}
	return f.write(peer, h)
}

func (f *faultFunc) BeforeRead(peer string, h kvwire.Header) transfer.Fault {
	if f.read == nil {
		return transfer.Fault{}
	}
	return f.read(peer, h)
}

// pipeNet is an in-memory network of net.Pipe connections for synctest
// bubbles: listeners by name, dials that hand one end to the listener.
type pipeNet struct {
	mu sync.Mutex
	ls map[string]*pipeListener
}

func newPipeNet() *pipeNet { return &pipeNet{ls: map[string]*pipeListener{}} }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

type pipeListener struct {
	n     *pipeNet
	addr  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (n *pipeNet) listen(addr string) *pipeListener {
	l := &pipeListener{n: n, addr: addr, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	n.mu.Lock()
	n.ls[addr] = l
	n.mu.Unlock()
	return l
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		if l.n.ls[l.addr] == l {
			delete(l.n.ls, l.addr)
		}
		l.n.mu.Unlock()
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.addr) }

var errRefused = errors.New("connection refused")

func (n *pipeNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	return n.dialFrom(ctx, addr, "")
}

// addrConn is a pipe end whose RemoteAddr names a host, so tests can play
// connections from different machines.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// dialFrom dials addr; the listener sees the connection coming from from
// (a host:port), or from "pipe" when from is empty.
func (n *pipeNet) dialFrom(ctx context.Context, addr, from string) (net.Conn, error) {
	n.mu.Lock()
	l := n.ls[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("dial %s: %w", addr, errRefused)
	}
	c1, c2 := net.Pipe()
	var end net.Conn = c2
	if from != "" {
		end = addrConn{Conn: c2, remote: pipeAddr(from)}
	}
	select {
	case l.conns <- end:
		return c1, nil
	case <-l.done:
	case <-ctx.Done():
	}
	c1.Close()
	c2.Close()
	return nil, fmt.Errorf("dial %s: %w", addr, errRefused)
}

// pipeConfig is a Config on the pipe network, listening at addr.
func (n *pipeNet) config(addr string) transfer.Config {
	cfg := config("")
	cfg.Listener = n.listen(addr)
	cfg.Dial = n.dial
	cfg.HeartbeatInterval = time.Second
	return cfg
}
