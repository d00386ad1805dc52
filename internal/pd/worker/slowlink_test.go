package worker

import (
	"context"
	"net"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// slowConn reads at about 100 KiB/s: a slow link, with data always flowing.
type slowConn struct{ net.Conn }

func (c slowConn) Read(p []byte) (int, error) {
	if len(p) > 4096 {
		p = p[:4096]
	}
	n, err := c.Conn.Read(p)
	time.Sleep(time.Duration(n) * 40 * time.Millisecond / 4096)
	return n, err
}

// slowHeartbeat is the heartbeat of both workers in the slow-link test: the
// link delivers 4 KiB every 40 ms, so the usual 50 ms test heartbeat
// (peer lost after 100 ms of silence) would call a loaded, -race run of a
// healthy slow link a lost peer.
const slowHeartbeat = 500 * time.Millisecond

func newSlowDecode(t *testing.T, m *model.Model) (*Worker, *engine.Engine) {
	pool := kernels.NewPool(1)
	e, err := engine.New(model.NewRunner(m, pool), engine.Config{KVType: tensor.F16, Pages: 96, MaxBatchTokens: 512}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{}
	w, err := New(e, Config{Role: room.RoleDecode, Room: testRoomConfig(), Transfer: transfer.Config{ListenAddr: "127.0.0.1:0",
		ClusterToken: []byte("0123456789abcdef-test-token"), HeartbeatInterval: slowHeartbeat,
		KVTransport: transfer.KVTCP, // the slow link is TCP's: no shared memory around it
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return slowConn{c}, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); e.Close(); pool.Close() })
	return w, e
}

// TestSlowLinkOutlastsProgressTimeout: over a link that reads at about
// 100 KiB/s a 622 KB transfer takes longer than ProgressTimeout (3 s) but
// never stalls. Progress is counted when KV frames are on the wire, not
// when they are queued, so no progress timeout fires: both sides succeed
// and both legs end without an error. (When progress was counted at
// enqueue, prefill failed with progress_timeout while decode succeeded.)
// The transfer must indeed outlast ProgressTimeout, or the test proves
// nothing.
func TestSlowLinkOutlastsProgressTimeout(t *testing.T) {
	m := tinyModel(t)
	p := newPrefillHB(t, m, slowHeartbeat)
	d, _ := newSlowDecode(t, m)
	pp := &pair{p: p, d: d}
	id := newRoomID()
	pleg, dleg := pp.legs(id)
	req := engine.Request{Prompt: prompt(600), MaxTokens: 4, IgnoreEOS: true}
	ds, err := d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := p.SubmitLeg(context.Background(), pleg, req)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, dl := drain(t, ds)
	_, pl := drain(t, ps)
	took := time.Since(start)
	pi, _ := p.roomInfo(id)
	di, _ := d.roomInfo(id)
	t.Logf("after %v: prefill %v/%v reason %v bytes %d; decode %v reason %v bytes %d; decode err %v prefill err %v",
		took.Round(time.Millisecond), pi.State, pi.Phase, pi.Reason, pi.Bytes, di.State, di.Reason, di.Bytes, dl.Err, pl.Err)
	for _, h := range pi.History {
		t.Logf("prefill %v", h)
	}
	if pi.State != room.StateSucceeded || di.State != room.StateSucceeded {
		t.Errorf("prefill %v (%v), decode %v (%v): want both succeeded", pi.State, pi.Reason, di.State, di.Reason)
	}
	if pi.Bytes != di.Bytes || pi.Bytes == 0 {
		t.Errorf("prefill sent %d bytes, decode received %d: want the same, non-zero", pi.Bytes, di.Bytes)
	}
	if dl.Err != nil || pl.Err != nil {
		t.Errorf("leg errors: decode %v, prefill %v; want none", dl.Err, pl.Err)
	}
	if pt := time.Duration(testRoomConfig().ProgressTimeout); took < pt {
		t.Errorf("the transfer took %v, less than ProgressTimeout %v: the link is not slow enough to test anything", took, pt)
	}
}

func newPrefillHB(t *testing.T, m *model.Model, hb time.Duration) *Worker {
	pool := kernels.NewPool(1)
	e, err := engine.New(model.NewRunner(m, pool), engine.Config{KVType: tensor.F16, Pages: 96, MaxBatchTokens: 512}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(e, Config{Role: room.RolePrefill, Room: testRoomConfig(), Transfer: transfer.Config{ListenAddr: "127.0.0.1:0",
		ClusterToken: []byte("0123456789abcdef-test-token"), HeartbeatInterval: hb}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); e.Close(); pool.Close() })
	return w
}
