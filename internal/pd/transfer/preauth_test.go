package transfer_test

// What a stranger (a process that does not hold the cluster token) can do
// to the listener before authenticating: allocate, hold time, hold slots.
// All on net.Pipe inside synctest bubbles, so time and counts are exact.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// helloFrame is a well-formed AUTH_HELLO from a node calling itself addr.
func helloFrame(addr string) []byte {
	h := &kvwire.AuthHello{Version: kvwire.Version, NodeAddr: addr, Shape: testShape(), HeartbeatMillis: 1000}
	return kvwire.AppendFrame(nil, kvwire.TypeAuthHello, room.ID{}, h.AppendTo(nil))
}

// TestPreAuthHugeHeaderAllocatesNothing sends, on many connections, a
// header announcing a 16 MiB KV payload before any handshake. The
// listener must refuse each at the header (counted), without allocating
// the payload. Before the fix readAuth allocated h.Length bytes first.
func TestPreAuthHugeHeaderAllocatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		p := start(t, n.config("p:1"))
		defer p.stop()
		h := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKV, Room: roomID(1), Length: kvwire.KVPayloadBytesMax}
		const conns = 16
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range conns {
			c, err := n.dial(context.Background(), "p:1")
			if err != nil {
				t.Fatal(err)
			}
			c.Write(h.AppendTo(nil))
			io.ReadAll(c) // until the listener closes it
			c.Close()
		}
		synctest.Wait()
		runtime.ReadMemStats(&after)
		if got := p.Counters()["rejected_unauthenticated"]; got != conns {
			t.Errorf("rejected_unauthenticated = %d after %d pre-auth KV headers, want %d", got, conns, conns)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%d pre-auth headers announcing %d bytes allocated %d bytes in total, want well under 1 MiB", conns, h.Length, grew)
		}
	})
}

// TestHandshakeBudget: an accepted connection must finish its handshake
// within HandshakeTimeout (default 2s, not DialTimeout's 5s), and
// trickling bytes does not extend it.
func TestHandshakeBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget time.Duration // Config.HandshakeTimeout; 0 is the default
		want   time.Duration
	}{{"default", 0, 2 * time.Second}, {"configured", 700 * time.Millisecond, 700 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newPipeNet()
				cfg := n.config("p:1")
				cfg.HandshakeTimeout = tc.budget
				p := start(t, cfg)
				defer p.stop()
				c, err := n.dial(context.Background(), "p:1")
				if err != nil {
					t.Fatal(err)
				}
				began := time.Now()
				wrote := make(chan struct{})
				go func() { // one byte of a valid AUTH_HELLO every 100ms
					defer close(wrote)
					for _, b := range helloFrame("d:1") {
						if _, err := c.Write([]byte{b}); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
				io.ReadAll(c)
				took := time.Since(began)
				c.Close()
				<-wrote
				if took != tc.want {
					t.Errorf("a trickled handshake was closed after %v, want exactly %v", took, tc.want)
				}
				synctest.Wait()
				if got := p.Counters()["handshake_timeouts"]; got != 1 {
					t.Errorf("handshake_timeouts = %d, want 1", got)
				}
			})
		})
	}
}

// TestHandshakeFloodDoesNotLockOutPeers: strangers on the same host as
// the real peers (as in `tandem up`, all on loopback) hold twice the
// handshake slots open; a real dialer still connects at its first try,
// because the oldest pre-auth connection is evicted for a new one.
func TestHandshakeFloodDoesNotLockOutPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		pc := n.config("p:1")
		pc.AcceptOnly = true
		p := start(t, pc)
		defer p.stop()
		const strangers = 128 // handshakesMax is 64
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for range strangers {
			c, err := n.dial(context.Background(), "p:1")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			synctest.Wait()
		}
		d := start(t, n.config("d:1"))
		defer d.stop()
		if err := d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil); err != nil {
			t.Fatalf("Send(HELLO) from a real peer during a handshake flood = %v, want it through", err)
		}
		synctest.Wait()
		c := p.Counters()
		if c["handshakes_evicted"] < strangers-64+1 {
			t.Errorf("handshakes_evicted = %d, want at least %d (every stranger past the slots, and one for the peer)", c["handshakes_evicted"], strangers-64+1)
		}
		if c["handshakes_ok"] != 1 {
			t.Errorf("handshakes_ok = %d, want 1", c["handshakes_ok"])
		}
	})
}

// TestHandshakeFloodFromOneHostSparesOthers: a flood from one host evicts
// that host's own pre-auth connections (per-host cap), not a connection
// from another host that is in the middle of its handshake.
func TestHandshakeFloodFromOneHostSparesOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		p := start(t, n.config("p:1"))
		defer p.stop()
		ctx := context.Background()
		victim, err := n.dialFrom(ctx, "p:1", "10.0.0.7:4000")
		if err != nil {
			t.Fatal(err)
		}
		defer victim.Close()
		synctest.Wait()
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		const flood = 200
		for i := range flood {
			c, err := n.dialFrom(ctx, "p:1", fmt.Sprintf("10.0.0.66:%d", 5000+i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			synctest.Wait()
		}
		if got := p.Counters()["handshakes_evicted"]; got < flood-64 {
			t.Errorf("handshakes_evicted = %d, want at least %d", got, flood-64)
		}
		// The victim's handshake still proceeds: it gets its challenge.
		go victim.Write(helloFrame("10.0.0.7:4000"))
		var hdr [kvwire.HeaderBytes]byte
		victim.SetReadDeadline(time.Now().Add(time.Second))
		h, err := kvwire.ReadHeader(victim, &hdr)
		if err != nil || h.Type != kvwire.TypeAuthChallenge {
			t.Errorf("the other host's pending handshake after a flood: %v %v, want AUTH_CHALLENGE (it was evicted)", h.Type, err)
		}
	})
}

// TestSendErrorsSayWhetherOnlyTheFrameIsBad: errors about the frame
// itself wrap ErrFrame (and their kvwire cause); errors about the peer or
// the connection do not.
func TestSendErrorsSayWhetherOnlyTheFrameIsBad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		d, p := pipePair(t, n, nil)
		defer d.stop()
		defer p.stop()
		ctx := context.Background()
		tooMany := &kvwire.Alloc{Pages: make([]int32, kvwire.AllocPagesMax+1)}
		for _, tc := range []struct {
			name  string
			err   error
			cause error
		}{
			{"alloc too large", d.Send(ctx, "p:1", kvwire.TypeAlloc, roomID(1), tooMany.AppendTo(nil)), kvwire.ErrTooLarge},
			{"unknown type", d.Send(ctx, "p:1", kvwire.Type(0), roomID(1), nil), kvwire.ErrType},
			{"codec refuses", d.Send(ctx, "p:1", kvwire.TypeAlloc, roomID(1), []byte{9, 0, 0, 0}), kvwire.ErrMalformed},
			{"kv too large", d.SendKV(ctx, "p:1", roomID(1), kvwire.KV{}, make([]byte, kvwire.KVDataBytesMax+1)), kvwire.ErrTooLarge},
			{"kv kind", d.SendKV(ctx, "p:1", roomID(1), kvwire.KV{Kind: 3}, nil), kvwire.ErrMalformed},
		} {
			if !errors.Is(tc.err, transfer.ErrFrame) || !errors.Is(tc.err, tc.cause) {
				t.Errorf("%s: %v, want ErrFrame wrapping %v", tc.name, tc.err, tc.cause)
			}
		}
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"not connected", p.Send(ctx, "x:1", kvwire.TypeHello, roomID(1), nil)},
			{"unreachable", d.Send(ctx, "nowhere:1", kvwire.TypeHello, roomID(1), nil)},
		} {
			if tc.err == nil || errors.Is(tc.err, transfer.ErrFrame) {
				t.Errorf("%s: %v, want a peer error that is not ErrFrame", tc.name, tc.err)
			}
		}
		d.stop()
		if err := d.Send(ctx, "p:1", kvwire.TypeHello, roomID(1), nil); !errors.Is(err, transfer.ErrClosed) || errors.Is(err, transfer.ErrFrame) {
			t.Errorf("Send after Close = %v, want ErrClosed and not ErrFrame", err)
		}
	})
}

// TestDialOnly: a decode node that never listens still dials, is known to
// its listener by its AdvertiseAddr (or a generated name), gets answers on
// its own connection, and its Serve only waits.
func TestDialOnly(t *testing.T) {
	for _, advertise := range []string{"decode-http:8001", ""} {
		t.Run(fmt.Sprintf("advertise %q", advertise), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newPipeNet()
				pc := n.config("p:1")
				pc.AcceptOnly = true
				p := start(t, pc)
				defer p.stop()
				dc := n.config("")
				dc.Listener = nil
				dc.DialOnly = true
				dc.AdvertiseAddr = advertise
				d := start(t, dc)
				defer d.stop()
				if d.Addr() != "" {
					t.Errorf("Addr() = %q, want empty for a dial-only transport", d.Addr())
				}
				self := d.AdvertiseAddr()
				if advertise != "" && self != advertise || advertise == "" && (!strings.HasPrefix(self, "dial-only.") || !strings.HasSuffix(self, ":0")) {
					t.Errorf("AdvertiseAddr() = %q with Config.AdvertiseAddr %q", self, advertise)
				}
				ctx := context.Background()
				if err := d.Send(ctx, "p:1", kvwire.TypeHello, roomID(1), nil); err != nil {
					t.Fatalf("dial-only Send(HELLO) = %v", err)
				}
				synctest.Wait()
				if ps := p.Peers(); len(ps) != 1 || ps[0].Addr != self || ps[0].Dialed {
					t.Fatalf("prefill Peers() = %+v, want the dial-only node as %q", ps, self)
				}
				if err := p.Send(ctx, self, kvwire.TypeHelloAck, roomID(1), nil); err != nil {
					t.Fatalf("prefill's answer to the dial-only node = %v", err)
				}
				synctest.Wait()
				if got := d.rec.all(isFrame(kvwire.TypeHelloAck)); len(got) != 1 {
					t.Errorf("dial-only node got %d HELLO_ACKs, want 1", len(got))
				}
			})
		})
	}
	for _, tc := range []struct {
		name   string
		change func(*transfer.Config)
		text   string
	}{
		{"listen addr", func(c *transfer.Config) { c.DialOnly = true }, "a dial-only transport does not listen"},
		{"accept only", func(c *transfer.Config) { c.DialOnly, c.ListenAddr, c.AcceptOnly = true, "", true }, "neither dials nor listens"},
	} {
		cfg := config("127.0.0.1:0")
		tc.change(&cfg)
		tr, err := transfer.New(cfg, newRecorder())
		if err == nil {
			tr.Close()
		}
		if !strings.Contains(errText(err), tc.text) {
			t.Errorf("New(%s) = %v, want an error containing %q", tc.name, err, tc.text)
		}
	}
}

// FuzzPreAuth sends arbitrary bytes to a listener as a stranger would:
// the listener must close the connection (within the handshake budget)
// without panicking, and still serve a real peer afterwards.
func FuzzPreAuth(f *testing.F) {
	f.Add(helloFrame("d:1"))
	f.Add(kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKV, Room: roomID(1), Length: kvwire.KVPayloadBytesMax}.AppendTo(nil))
	old := helloFrame("d:1")
	old[4] = kvwire.VersionPlaintext
	f.Add(old)
	f.Add(append(helloFrame("d:1"), kvwire.AppendFrame(nil, kvwire.TypeAuthResponse, room.ID{}, make([]byte, 32))...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) {
			n := newPipeNet()
			pc := n.config("p:1")
			pc.AcceptOnly = true
			p := start(t, pc)
			defer p.stop()
			c, err := n.dial(context.Background(), "p:1")
			if err != nil {
				t.Fatal(err)
			}
			go c.Write(data)
			io.ReadAll(c) // the listener closes it, at the latest after HandshakeTimeout
			c.Close()
			if p.Counters()["handshakes_ok"] != 0 {
				t.Fatalf("a stranger's bytes completed a handshake")
			}
			d := start(t, n.config("d:1"))
			defer d.stop()
			if err := d.Send(context.Background(), "p:1", kvwire.TypeHello, roomID(1), nil); err != nil {
				t.Fatalf("a real peer after the stranger: %v", err)
			}
		})
	})
}

// TestEveryPreAuthEndIsCounted: a stranger that hangs up, one that sends
// half a header, one that times out and one evicted are each counted
// once, under their own name.
func TestEveryPreAuthEndIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		p := start(t, n.config("p:1"))
		defer p.stop()
		ctx := context.Background()
		c, _ := n.dial(ctx, "p:1")
		c.Close() // hangs up at once
		c, _ = n.dial(ctx, "p:1")
		c.Write(helloFrame("d:1")[:10])
		c.Close() // hangs up inside the header
		synctest.Wait()
		idle, _ := n.dial(ctx, "p:1") // says nothing
		defer idle.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var held []net.Conn
		for range 17 { // one past the per-host cap: the oldest is evicted
			c, _ := n.dial(ctx, "p:1")
			held = append(held, c)
			synctest.Wait()
		}
		for _, c := range held {
			c.Close()
		}
		synctest.Wait()
		got := p.Counters()
		for name, want := range map[string]uint64{"handshakes_failed": 2 + 16, "handshake_timeouts": 1, "handshakes_evicted": 1, "conns_accepted": 3 + 17} {
			if got[name] != want {
				t.Errorf("%s = %d, want %d", name, got[name], want)
			}
		}
	})
}
