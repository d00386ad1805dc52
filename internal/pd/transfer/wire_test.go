package transfer_test

// What an on-path attacker sees and can do after the handshake: a proxy
// between decode and prefill on the pipe network that records, replays,
// reorders or flips frames.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// mitm sits between a dialer and the listener it dials. edit sees every
// frame after the handshake in one direction (toDialer: listener →
// dialer) and returns the frames to pass on, in order; nil passes it.
type mitm struct {
	mu    sync.Mutex
	wire  [2]bytes.Buffer // every byte seen, per direction (0: to the listener, 1: to the dialer)
	edit  func(toDialer bool, h kvwire.Header, frame []byte) [][]byte
	wg    sync.WaitGroup
	conns []net.Conn
}

// dial is a Config.Dial that routes through the proxy.
func (m *mitm) dial(n *pipeNet) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		up, err := n.dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		mine, theirs := net.Pipe()
		m.mu.Lock()
		m.conns = append(m.conns, up, theirs)
		m.mu.Unlock()
		m.wg.Go(func() { m.relay(theirs, up, false) })
		m.wg.Go(func() { m.relay(up, theirs, true) })
		return mine, nil
	}
}

// relay copies frames from src to dst: the first two of each direction
// are handshake frames in clear, the rest sealed.
func (m *mitm) relay(src, dst net.Conn, toDialer bool) {
	defer src.Close()
	defer dst.Close()
	dir := 0
	if toDialer {
		dir = 1
	}
	for i := 0; ; i++ {
		var hdr [kvwire.HeaderBytes]byte
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		h, err := kvwire.ParseHeader(&hdr)
		if err != nil {
			return
		}
		n := int(h.Length)
		if i >= 2 || h.Type == kvwire.TypeAuthReject {
			n = kvwire.SealedBytes(h)
		}
		frame := make([]byte, kvwire.HeaderBytes+n)
		copy(frame, hdr[:])
		if _, err := io.ReadFull(src, frame[kvwire.HeaderBytes:]); err != nil {
			return
		}
		m.mu.Lock()
		m.wire[dir].Write(frame)
		edit := m.edit
		m.mu.Unlock()
		out := [][]byte{frame}
		if edit != nil && i >= 2 {
			if o := edit(toDialer, h, frame); o != nil {
				out = o
			}
		}
		for _, f := range out {
			if _, err := dst.Write(f); err != nil {
				return
			}
		}
	}
}

func (m *mitm) close() {
	m.mu.Lock()
	for _, c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// mitmPair is pipePair with the proxy on the decode node's dials.
func mitmPair(t *testing.T, m *mitm) (d, p *node) {
	n := newPipeNet()
	return pipePair(t, n, func(dc, pc *transfer.Config) { dc.Dial = m.dial(n) })
}

// TestStrangerOnPathCannotReadKV: the bytes on the wire hold no run of
// the KV page, the first token or the message, only sealed bytes; the
// pages still arrive intact.
func TestStrangerOnPathCannotReadKV(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &mitm{}
		d, p := mitmPair(t, m)
		defer m.close()
		defer d.stop()
		defer p.stop()
		secret := bytes.Repeat([]byte("SECRET-KV-PAGE!!"), 20<<10) // 320 KiB: several records
		got := make([]byte, len(secret))
		d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte { return got }
		ctx := context.Background()
		if err := p.SendKV(ctx, "d:1", roomID(1), kvwire.KV{Layer: 1}, secret); err != nil {
			t.Fatal(err)
		}
		msg := "prompt-derived text that must not leak"
		if err := p.Send(ctx, "d:1", kvwire.TypeFailed, roomID(1), payload(&kvwire.Failed{Reason: room.ReasonEngine, Message: msg})); err != nil {
			t.Fatal(err)
		}
		if err := d.Send(ctx, "p:1", kvwire.TypeAbort, roomID(1), payload(&kvwire.Abort{Message: msg})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !bytes.Equal(got, secret) {
			t.Fatalf("the page did not arrive intact")
		}
		if done := d.rec.all(isKind("kvdone")); len(done) != 1 || !done[0].ok {
			t.Fatalf("KVDone calls %v, want one ok", done)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		for dir, w := range m.wire {
			wire := w.Bytes()
			if bytes.Contains(wire, []byte("SECRET-K")) || bytes.Contains(wire, []byte(msg[:12])) {
				t.Errorf("direction %d: plaintext visible on the wire", dir)
			}
		}
		if wire := m.wire[1].Bytes(); len(wire) < len(secret) {
			t.Errorf("only %d bytes went to decode, want the sealed page (%d+)", len(wire), len(secret))
		}
	})
}

// onPathAttack runs one change to the prefill → decode stream and checks
// that decode refuses it, counts it, and delivers none of the touched
// frames.
func onPathAttack(t *testing.T, edit func(h kvwire.Header, frame []byte) [][]byte, send func(p *node) error, wantRooms ...room.ID) {
	synctest.Test(t, func(t *testing.T) {
		m := &mitm{}
		d, p := mitmPair(t, m)
		defer m.close()
		defer d.stop()
		defer p.stop()
		m.mu.Lock()
		m.edit = func(toDialer bool, h kvwire.Header, frame []byte) [][]byte {
			if !toDialer || h.Type == kvwire.TypeHeartbeat {
				return nil
			}
			return edit(h, frame)
		}
		m.mu.Unlock()
		if err := send(p); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := d.Counters()["rejected_auth_tag"]; got != 1 {
			t.Errorf("decode rejected_auth_tag = %d, want 1", got)
		}
		frames := d.rec.all(isKind("frame"))
		var delivered []room.ID
		for _, e := range frames {
			delivered = append(delivered, e.room)
		}
		if len(delivered) != len(wantRooms) {
			t.Errorf("decode delivered frames for rooms %v, want %v", delivered, wantRooms)
		}
		if ups := d.rec.all(func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 }); len(ups) != 2 {
			t.Errorf("decode handshakes %d, want 2 (the connection closed, then the redial)", len(ups))
		}
	})
}

func TestReplayedFrameRejected(t *testing.T) {
	var once sync.Once
	onPathAttack(t, func(h kvwire.Header, frame []byte) (out [][]byte) {
		once.Do(func() { out = [][]byte{frame, frame} })
		return out
	}, func(p *node) error {
		return p.Send(context.Background(), "d:1", kvwire.TypeHelloAck, roomID(1), nil)
	}, roomID(1)) // the original arrives; its copy closes the connection
}

func TestReorderedFramesRejected(t *testing.T) {
	var held []byte
	onPathAttack(t, func(h kvwire.Header, frame []byte) [][]byte {
		if held == nil {
			held = frame
			return [][]byte{}
		}
		if h.Room == roomID(2) {
			return [][]byte{frame, held}
		}
		return nil
	}, func(p *node) error {
		ctx := context.Background()
		if err := p.Send(ctx, "d:1", kvwire.TypeHelloAck, roomID(1), nil); err != nil {
			return err
		}
		return p.Send(ctx, "d:1", kvwire.TypeHelloAck, roomID(2), nil)
	}) // neither arrives
}

func TestTamperedFramesRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(frame []byte) int
	}{
		{"header room id", func([]byte) int { return 9 }},
		{"ciphertext", func(f []byte) int { return kvwire.HeaderBytes + 3 }},
		{"tag", func(f []byte) int { return len(f) - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onPathAttack(t, func(h kvwire.Header, frame []byte) [][]byte {
				if h.Type != kvwire.TypeFailed {
					return nil
				}
				f := bytes.Clone(frame)
				f[tc.at(f)] ^= 1
				return [][]byte{f}
			}, func(p *node) error {
				return p.Send(context.Background(), "d:1", kvwire.TypeFailed, roomID(1), payload(&kvwire.Failed{Reason: room.ReasonEngine, Message: "x"}))
			})
		})
	}
}

// TestPlaintextPeerRefusedClearly: a version 1 dialer (frames in clear)
// gets a version 1 AUTH_REJECT naming the versions; a version 2 dialer
// whose listener closes after AUTH_HELLO (what a version 1 listener does)
// is told the listener may speak an older version.
func TestPlaintextPeerRefusedClearly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet()
		p := start(t, n.config("p:1"))
		defer p.stop()
		c, err := n.dial(context.Background(), "p:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		v1 := &kvwire.AuthHello{Version: kvwire.VersionPlaintext, NodeAddr: "d:1", Shape: testShape()}
		old := kvwire.AppendFrame(nil, kvwire.TypeAuthHello, room.ID{}, v1.AppendTo(nil))
		old[4] = kvwire.VersionPlaintext // the version 1 header
		go c.Write(old)
		var hdr [kvwire.HeaderBytes]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatalf("a version 1 dialer got no answer: %v", err)
		}
		if hdr[4] != kvwire.VersionPlaintext || hdr[5] != byte(kvwire.TypeAuthReject) {
			t.Fatalf("answer header version %d type %d, want version 1 AUTH_REJECT", hdr[4], hdr[5])
		}
		body := make([]byte, binary.LittleEndian.Uint32(hdr[24:]))
		io.ReadFull(c, body)
		var rej kvwire.AuthReject
		if err := rej.Decode(body); err != nil || rej.Code != kvwire.RejectVersion || !strings.Contains(rej.Message, fmt.Sprintf("version %d", kvwire.Version)) {
			t.Errorf("AUTH_REJECT %+v (%v), want RejectVersion naming version %d", rej, err, kvwire.Version)
		}
		if got := p.Counters()["rejected_bad_version"]; got != 1 {
			t.Errorf("rejected_bad_version = %d, want 1", got)
		}

		// A version 2 dialer (before the recurrent state) is refused the
		// same way, in its own version.
		c2, err := n.dial(context.Background(), "p:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		v2 := kvwire.AppendFrame(nil, kvwire.TypeAuthHello, room.ID{}, v1.AppendTo(nil))
		v2[4] = kvwire.Version - 1
		go c2.Write(v2)
		if _, err := io.ReadFull(c2, hdr[:]); err != nil {
			t.Fatalf("a version %d dialer got no answer: %v", kvwire.Version-1, err)
		}
		if hdr[4] != kvwire.Version-1 || hdr[5] != byte(kvwire.TypeAuthReject) {
			t.Fatalf("answer header version %d type %d, want a version %d AUTH_REJECT", hdr[4], hdr[5], kvwire.Version-1)
		}

		l := n.listen("old:1")
		go func() { // a listener that hangs up after AUTH_HELLO, as version 1 does on a version 2 header
			c, err := l.Accept()
			if err != nil {
				return
			}
			var hdr [kvwire.HeaderBytes]byte
			io.ReadFull(c, hdr[:])
			io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[24:])))
			c.Close()
		}()
		d := start(t, n.config("d:1"))
		defer d.stop()
		err = d.Send(context.Background(), "old:1", kvwire.TypeHello, roomID(1), nil)
		if err == nil || !strings.Contains(err.Error(), "older protocol version") {
			t.Errorf("Send to a listener that hangs up after AUTH_HELLO = %v, want a hint at the protocol version", err)
		}
		l.Close()
	})
}
