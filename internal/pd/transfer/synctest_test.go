package transfer_test

// Timer-driven behaviour, on net.Pipe connections inside synctest bubbles:
// time is fake, so the bounds here are exact.

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

const interval = time.Second // the pipe configs' heartbeat interval

// fakeListener plays a listener by hand on l: it completes the handshake
// for every connection, then reads and discards everything and never
// writes. It returns when l is closed.
func fakeListener(l *pipeListener, self string, answer bool) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			go func() { <-l.done; c.Close() }()
			if answer {
				if err := fakeHandshake(c, self); err != nil {
					return
				}
			}
			io.Copy(io.Discard, c)
		})
	}
}

// fakeHandshake answers a dialer's handshake as a listener at self.
func fakeHandshake(c net.Conn, self string) error {
	var hdr [kvwire.HeaderBytes]byte
	read := func(p kvwire.Payload) ([]byte, error) {
		h, err := kvwire.ReadHeader(c, &hdr)
		if err != nil {
			return nil, err
		}
		b := make([]byte, h.Length)
		if _, err := io.ReadFull(c, b); err != nil {
			return nil, err
		}
		return b, p.Decode(b)
	}
	write := func(p kvwire.Payload) ([]byte, error) {
		b := p.AppendTo(nil)
		_, err := c.Write(kvwire.AppendFrame(nil, p.Type(), room.ID{}, b))
		return b, err
	}
	var hello kvwire.AuthHello
	helloRaw, err := read(&hello)
	if err != nil {
		return err
	}
	ch := kvwire.AuthChallenge{Nonce: [32]byte{1}, NodeAddr: self}
	chRaw, err := write(&ch)
	if err != nil {
		return err
	}
	var resp kvwire.AuthResponse
	if _, err := read(&resp); err != nil {
		return err
	}
	ok := &kvwire.AuthOK{Shape: testShape(), Incarnation: 99, HeartbeatMillis: uint32(interval.Milliseconds())}
	ok.MAC = kvwire.AuthMAC(token, kvwire.AuthRoleListener, kvwire.HandshakeHash(helloRaw, chRaw, ok.AppendTo(nil)))
	_, err = write(ok)
	return err
}

func TestSilentPeerLostAfterPeerTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		l := n.listen("p:1")
		var fake sync.WaitGroup
		fake.Go(func() { fakeListener(l, "p:1", true) })
		d := start(t, n.config("d:1"))
		defer func() { d.stop(); l.Close(); fake.Wait() }()

		if err := d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil); err != nil {
			t.Fatalf("Send to the fake listener = %v", err)
		}
		up := time.Now()
		timeout := d.PeerTimeout()
		if timeout != 2*interval {
			t.Fatalf("PeerTimeout() = %v, want %v", timeout, 2*interval)
		}
		time.Sleep(timeout - time.Millisecond)
		synctest.Wait()
		if lost := d.rec.all(isKind("lost")); len(lost) != 0 {
			t.Fatalf("PeerLost %v after %v of silence, want none before %v", lost, time.Since(up), timeout)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		lost := d.rec.all(isKind("lost"))
		if len(lost) != 1 || !errors.Is(lost[0].err, transfer.ErrPeerLost) || lost[0].at.Sub(up) != timeout {
			t.Fatalf("after %v of silence: PeerLost calls %v, want one with ErrPeerLost at exactly %v", time.Since(up), lost, timeout)
		}
		if got := d.Counters()["read_timeouts"]; got != 1 {
			t.Errorf("read_timeouts = %d, want 1", got)
		}
		if ps := d.Peers(); len(ps) != 0 {
			t.Errorf("Peers() after the loss = %+v, want none", ps)
		}
	})
}

// pipePair starts a decode and a prefill node on a pipe network and
// connects them with a HELLO.
func pipePair(t *testing.T, n *pipeNet, change func(d, p *transfer.Config)) (d, p *node) {
	t.Helper()
	dc, pc := n.config("d:1"), n.config("p:1")
	pc.AcceptOnly = true
	if change != nil {
		change(&dc, &pc)
	}
	d, p = start(t, dc), start(t, pc)
	if err := d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil); err != nil {
		t.Fatalf("Send(HELLO) = %v", err)
	}
	synctest.Wait()
	return d, p
}

func TestPeerLostWithinTwoIntervalsOfClose(t *testing.T) {
	for _, killed := range []string{"prefill", "decode"} {
		t.Run(killed, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d, p := pipePair(t, newPipeNet(), nil)
				defer d.stop()
				defer p.stop()
				time.Sleep(3*interval + interval/2) // heartbeats flow; nobody is lost
				synctest.Wait()
				victim, survivor := p, d
				if killed == "decode" {
					victim, survivor = d, p
				}
				if lost := survivor.rec.all(isKind("lost")); len(lost) != 0 {
					t.Fatalf("PeerLost %v while heartbeats flowed", lost)
				}
				heard := survivor.Peers()[0].LastHeard
				victim.stop()
				closed := time.Now()
				e := survivor.rec.wait(t, time.Minute, 1, "PeerLost", isKind("lost"))
				if e.peer != victim.AdvertiseAddr() || !errors.Is(e.err, transfer.ErrPeerLost) {
					t.Errorf("PeerLost(%s, %v), want (%s, ErrPeerLost)", e.peer, e.err, victim.AdvertiseAddr())
				}
				if took := e.at.Sub(closed); took > 2*interval || took <= 0 {
					t.Errorf("PeerLost %v after the peer closed, want within 2 heartbeat intervals (%v)", took, 2*interval)
				}
				if since := e.at.Sub(heard); since != 2*interval {
					t.Errorf("PeerLost %v after the last frame heard, want exactly PeerTimeout %v", since, 2*interval)
				}
			})
		})
	}
}

func TestHeartbeatsBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		d, p := pipePair(t, n, func(dc, pc *transfer.Config) {
			dc.Load = func() kvwire.Heartbeat { return kvwire.Heartbeat{Waiting: 3, PagesFree: 100} }
			pc.Load = func() kvwire.Heartbeat { return kvwire.Heartbeat{Running: 5, RoomsLive: 2} }
		})
		defer d.stop()
		defer p.stop()
		time.Sleep(5*interval + time.Millisecond)
		synctest.Wait()
		for _, tc := range []struct {
			name string
			at   *node
			want kvwire.Heartbeat
		}{{"decode", d, kvwire.Heartbeat{Running: 5, RoomsLive: 2}}, {"prefill", p, kvwire.Heartbeat{Waiting: 3, PagesFree: 100}}} {
			hbs := tc.at.rec.all(func(e event) bool { return e.kind == "up" && e.hb.Seq > 0 })
			if len(hbs) != 5 {
				t.Errorf("%s received %d heartbeats in 5 intervals, want 5", tc.name, len(hbs))
			}
			for i, e := range hbs {
				want := tc.want
				want.Seq = uint64(i + 1)
				if e.hb != want {
					t.Errorf("%s heartbeat %d = %+v, want %+v", tc.name, i, e.hb, want)
				}
			}
			if ps := tc.at.Peers(); len(ps) != 1 || ps[0].LastHeartbeat.Seq != 5 {
				t.Errorf("%s Peers() = %+v, want the last heartbeat (seq 5)", tc.name, ps)
			}
		}
	})
}

func TestRedialWithinGraceKeepsPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		cut := false
		faults := &faultFunc{write: func(_ string, h kvwire.Header) transfer.Fault {
			mu.Lock()
			defer mu.Unlock()
			if cut && h.Type == kvwire.TypeHeartbeat {
				cut = false
				return transfer.Fault{Action: transfer.FaultCut}
			}
			return transfer.Fault{}
		}}
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { pc.Faults = faults })
		defer d.stop()
		defer p.stop()
		mu.Lock()
		cut = true
		mu.Unlock()
		time.Sleep(interval + time.Millisecond) // prefill's next heartbeat cuts the connection mid-frame
		synctest.Wait()
		for _, x := range []*node{d, p} {
			if handshakes := x.rec.all(func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 }); len(handshakes) != 2 {
				t.Errorf("%s: %d handshakes, want 2 (the redial)", x.AdvertiseAddr(), len(handshakes))
			}
		}
		time.Sleep(10 * interval)
		synctest.Wait()
		for _, x := range []*node{d, p} {
			if lost := x.rec.all(isKind("lost")); len(lost) != 0 {
				t.Errorf("%s: PeerLost %v after a redial within the grace, want none", x.AdvertiseAddr(), lost)
			}
		}
		if err := p.Send(context.Background(), "d:1", kvwire.TypeHelloAck, roomID(1), nil); err != nil {
			t.Errorf("Send after the redial = %v", err)
		}
		if got := p.Counters()["faults_injected"]; got != 1 {
			t.Errorf("faults_injected = %d, want 1", got)
		}
	})
}

func TestRestartedPeerReportedLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		d, p := pipePair(t, n, nil)
		defer d.stop()
		old := d.Peers()[0].Incarnation
		p.stop()
		cfg := n.config("p:1")
		cfg.AcceptOnly = true
		p2 := start(t, cfg)
		defer p2.stop()
		time.Sleep(interval)
		synctest.Wait()
		var kinds []string
		for _, e := range d.rec.all(func(e event) bool { return e.kind == "lost" || (e.kind == "up" && e.hb.Seq == 0) }) {
			kinds = append(kinds, e.kind)
		}
		if len(kinds) != 3 || kinds[1] != "lost" || kinds[2] != "up" {
			t.Fatalf("decode saw %v, want up, lost (restarted), up", kinds)
		}
		if lost := d.rec.all(isKind("lost")); !errors.Is(lost[0].err, transfer.ErrPeerRestarted) {
			t.Errorf("PeerLost(%v), want ErrPeerRestarted", lost[0].err)
		}
		if ps := d.Peers(); len(ps) != 1 || ps[0].Incarnation == old || !ps[0].Connected {
			t.Errorf("Peers() = %+v, want a connected peer with a new incarnation (old %#x)", ps, old)
		}
		if got := d.Counters()["peer_restarts"]; got != 1 {
			t.Errorf("peer_restarts = %d, want 1", got)
		}
	})
}

func TestSendQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := &faultFunc{write: func(_ string, h kvwire.Header) transfer.Fault {
			if h.Type == kvwire.TypeAbort {
				return transfer.Fault{Delay: interval / 2}
			}
			return transfer.Fault{}
		}}
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { dc.SendQueueMax = 2; dc.Faults = faults })
		defer d.stop()
		defer p.stop()
		ctx := context.Background()
		abort := payload(&kvwire.Abort{Reason: room.ReasonShutdown})
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- d.Send(ctx, "p:1", kvwire.TypeAbort, roomID(1), abort) }()
			synctest.Wait() // the first holds the write lock (stalled), the second waits
		}
		if err := d.Send(ctx, "p:1", kvwire.TypeAbort, roomID(1), abort); !errors.Is(err, transfer.ErrSendQueueFull) {
			t.Errorf("third Send with SendQueueMax 2 = %v, want ErrSendQueueFull", err)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("a queued Send = %v, want nil", err)
			}
		}
		if got := d.Counters()["send_queue_full"]; got != 1 {
			t.Errorf("send_queue_full = %d, want 1", got)
		}
		// A sender whose context ends while it waits gives up.
		go func() { errs <- d.Send(ctx, "p:1", kvwire.TypeAbort, roomID(1), abort) }()
		synctest.Wait()
		short, cancel := context.WithTimeout(ctx, interval/10)
		defer cancel()
		if err := d.Send(short, "p:1", kvwire.TypeAbort, roomID(2), abort); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Send with a context ending while it waits = %v, want DeadlineExceeded", err)
		}
		<-errs
	})
}

func TestCloseInterruptsHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		l := n.listen("p:1")
		var fake sync.WaitGroup
		fake.Go(func() { fakeListener(l, "p:1", false) }) // accepts, never answers
		defer func() { l.Close(); fake.Wait() }()
		d := start(t, n.config("d:1"))
		errs := make(chan error, 1)
		go func() { errs <- d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil) }()
		synctest.Wait()
		began := time.Now()
		d.stop()
		if err := <-errs; !errors.Is(err, transfer.ErrClosed) {
			t.Errorf("Send during a stalled handshake, after Close = %v, want ErrClosed", err)
		}
		if took := time.Since(began); took != 0 {
			t.Errorf("Close took %v of fake time with a stalled handshake, want 0 (not DialTimeout)", took)
		}
	})
}

func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		l := n.listen("p:1")
		var fake sync.WaitGroup
		fake.Go(func() { fakeListener(l, "p:1", false) })
		defer func() { l.Close(); fake.Wait() }()
		d := start(t, n.config("d:1"))
		defer d.stop()
		began := time.Now()
		err := d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Send to a listener that never answers = %v, want a deadline error", err)
		}
		if ps := d.Peers(); len(ps) != 0 {
			t.Errorf("Peers() after a failed first dial = %+v, want none", ps)
		}
		if took := time.Since(began); took != 5*time.Second {
			t.Errorf("the stalled handshake failed after %v, want DialTimeout (5s)", took)
		}
	})
}

func TestDroppedFramesAreNotDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := &faultFunc{read: func(_ string, h kvwire.Header) transfer.Fault {
			if h.Type == kvwire.TypeKV || h.Type == kvwire.TypeFirstToken {
				return transfer.Fault{Action: transfer.FaultDrop}
			}
			return transfer.Fault{}
		}}
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { dc.Faults = faults })
		defer d.stop()
		defer p.stop()
		page := make([]byte, 64)
		d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte { return page }
		ctx := context.Background()
		if err := p.SendKV(ctx, "d:1", roomID(1), kvwire.KV{}, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		for i := range page {
			page[i] = 0xee
		}
		if err := p.SendKV(ctx, "d:1", roomID(1), kvwire.KV{Ordinal: 1}, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		if err := p.Send(ctx, "d:1", kvwire.TypeFirstToken, roomID(1), payload(&kvwire.FirstToken{})); err != nil {
			t.Fatal(err)
		}
		if err := p.Send(ctx, "d:1", kvwire.TypeDone, roomID(1), payload(&kvwire.Done{})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := d.rec.all(func(e event) bool { return e.kind == "kvdone" || (e.kind == "frame" && e.typ != kvwire.TypeDone) }); len(got) != 0 {
			t.Errorf("dropped frames were delivered: %v", got)
		}
		if page[0] != 0xee {
			t.Errorf("a dropped KV frame wrote into the page")
		}
		if got := d.rec.all(isFrame(kvwire.TypeDone)); len(got) != 1 {
			t.Errorf("DONE delivered %d times, want 1", len(got))
		}
	})
}

func TestFailedPageWriteKeepsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := &faultFunc{write: func(_ string, h kvwire.Header) transfer.Fault {
			if h.Type == kvwire.TypeKV {
				return transfer.Fault{Action: transfer.FaultFail}
			}
			return transfer.Fault{}
		}}
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { pc.Faults = faults })
		defer d.stop()
		defer p.stop()
		ctx := context.Background()
		if err := p.SendKV(ctx, "d:1", roomID(1), kvwire.KV{}, make([]byte, 8)); !errors.Is(err, transfer.ErrInjected) {
			t.Errorf("SendKV with FaultFail = %v, want ErrInjected", err)
		}
		if err := p.Send(ctx, "d:1", kvwire.TypeFailed, roomID(1), payload(&kvwire.Failed{Reason: room.ReasonEngine})); err != nil {
			t.Errorf("Send after a failed page write = %v, want nil (the connection stays)", err)
		}
		synctest.Wait()
		if got := d.rec.all(isFrame(kvwire.TypeFailed)); len(got) != 1 {
			t.Errorf("FAILED delivered %d times, want 1", len(got))
		}
	})
}

func TestDifferentHeartbeatIntervalsDoNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { pc.HeartbeatInterval = 3 * interval })
		defer d.stop()
		defer p.stop()
		time.Sleep(20 * interval)
		synctest.Wait()
		for _, x := range []*node{d, p} {
			if lost := x.rec.all(isKind("lost")); len(lost) != 0 {
				t.Errorf("%s: PeerLost %v with heartbeat intervals 1s and 3s", x.AdvertiseAddr(), lost)
			}
			if ps := x.Peers(); len(ps) != 1 || ps[0].Timeout != 6*interval {
				t.Errorf("%s: Peers() = %+v, want Timeout %v (twice the longer interval)", x.AdvertiseAddr(), ps, 6*interval)
			}
		}
	})
}

func TestKVDoneAfterCutMidData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := &faultFunc{write: func(_ string, h kvwire.Header) transfer.Fault {
			if h.Type == kvwire.TypeKV {
				return transfer.Fault{Action: transfer.FaultCut}
			}
			return transfer.Fault{}
		}}
		d, p := pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) { pc.Faults = faults })
		defer d.stop()
		defer p.stop()
		page := make([]byte, 256)
		d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte { return page }
		err := p.SendKV(context.Background(), "d:1", roomID(1), kvwire.KV{Ordinal: 3}, make([]byte, 256))
		if !errors.Is(err, transfer.ErrInjected) {
			t.Errorf("SendKV cut mid-frame = %v, want ErrInjected", err)
		}
		synctest.Wait()
		done := d.rec.all(isKind("kvdone"))
		if len(done) != 1 || done[0].ok || done[0].kv.Ordinal != 3 || done[0].n != 256 {
			t.Errorf("KVDone calls after a cut inside the data = %v, want one with checksumOK false", done)
		}
	})
}
