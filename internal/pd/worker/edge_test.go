package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/pd/room"
	"tandem/internal/pd/transfer"
)

// newAdvertisedPrefill starts a prefill worker that listens on 127.0.0.1
// and advertises the same port as "localhost:PORT": a different string
// for the same socket, as with --transfer-host 0.0.0.0 and
// --transfer-advertise.
func newAdvertisedPrefill(t *testing.T, m *model.Model) (*Worker, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adv := fmt.Sprintf("localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	pool := kernels.NewPool(1)
	e, err := engine.New(model.NewRunner(m, pool), engine.Config{KVType: tensor.F16, Pages: 96, MaxBatchTokens: 512}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(e, Config{Role: room.RolePrefill, Room: testRoomConfig(), Transfer: transfer.Config{Listener: ln, AdvertiseAddr: adv,
		ClusterToken: []byte("0123456789abcdef-test-token"), HeartbeatInterval: heartbeat}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); e.Close(); pool.Close() })
	return w, adv
}

func getJSON(t *testing.T, h http.Handler, path string, into any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestInfoPublishesAdvertiseAddr: /pd/info and /pd/status publish the
// advertised transfer address (the prefill's identity in the handshake),
// not the listen address, and a decode leg naming the published address
// succeeds. With the listen address published, decode's dial failed the
// identity check and every room through that prefill failed.
func TestInfoPublishesAdvertiseAddr(t *testing.T) {
	m := tinyModel(t)
	p, adv := newAdvertisedPrefill(t, m)
	d, _ := newWorker(t, m, room.RoleDecode, 512)
	var info, status struct {
		TransferAddr string `json:"transfer_addr"`
		Instance     string `json:"instance"`
	}
	getJSON(t, p.Handler(), "/pd/info", &info)
	getJSON(t, p.Handler(), "/pd/status", &status)
	if info.TransferAddr != adv || status.TransferAddr != adv {
		t.Fatalf("/pd/info transfer_addr %q, /pd/status %q; want the advertised %q (listening on %s)",
			info.TransferAddr, status.TransferAddr, adv, p.tr.Addr())
	}
	// The instance id tells a router that a process on the same address restarted.
	if len(info.Instance) != 16 || status.Instance != info.Instance || d.Instance() == p.Instance() {
		t.Fatalf("instance ids: /pd/info %q, /pd/status %q, decode worker %q; want one 16-digit id per process, the same in both",
			info.Instance, status.Instance, d.Instance())
	}
	pp := &pair{p: p, d: d}
	id := newRoomID()
	pleg, dleg := pp.legs(id) // decode's leg names p.TransferAddr(): what /pd/info said
	req := engine.Request{Prompt: prompt(20), MaxTokens: 3, IgnoreEOS: true}
	ds, err := d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := p.SubmitLeg(context.Background(), pleg, req)
	if err != nil {
		t.Fatal(err)
	}
	ids, dl := drain(t, ds)
	_, pl := drain(t, ps)
	if dl.Err != nil || pl.Err != nil || len(ids) != 3 {
		t.Errorf("through the advertised address: decode %v (%d tokens), prefill %v", dl.Err, len(ids), pl.Err)
	}
}

// TestStatusShowsPeerLoad: the heartbeats a peer sends are recorded and
// shown in /pd/status (peer, load, age).
func TestStatusShowsPeerLoad(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	req := engine.Request{Prompt: prompt(20), MaxTokens: 2, IgnoreEOS: true}
	ds, ps := pp.submit(t, id, req)
	drain(t, ds)
	drain(t, ps)
	var st struct {
		PeerLoads []PeerLoadJSON `json:"peer_loads"`
	}
	waitFor(t, "prefill's /pd/status to show decode's heartbeat", func() bool {
		getJSON(t, pp.p.Handler(), "/pd/status", &st)
		return len(st.PeerLoads) == 1 && st.PeerLoads[0].PagesTotal > 0
	})
	if got := st.PeerLoads[0]; got.Peer != pp.d.TransferAddr() || got.PagesTotal != uint32(pp.de.Stats().PagesTot) {
		t.Errorf("peer load %+v, want decode %s with %d pages", got, pp.d.TransferAddr(), pp.de.Stats().PagesTot)
	}
}

// TestDecodeListensNowhere: a decode worker, though given a listen address
// as every worker is, opens no transfer listener (nothing dials decode, so
// a listener would be pre-auth surface with no use), yet its rooms work.
func TestDecodeListensNowhere(t *testing.T) {
	pp := newPair(t, 512)
	if a := pp.d.tr.Addr(); a != "" {
		t.Fatalf("decode's transport listens on %s, want no listener", a)
	}
	if a := pp.p.tr.Addr(); a == "" {
		t.Fatal("prefill's transport has no listener")
	}
	id := newRoomID()
	req := engine.Request{Prompt: prompt(20), MaxTokens: 3, IgnoreEOS: true}
	ds, ps := pp.submit(t, id, req)
	ids, dl := drain(t, ds)
	_, pl := drain(t, ps)
	if dl.Err != nil || pl.Err != nil || len(ids) != 3 {
		t.Errorf("decode %v (%d tokens), prefill %v; want 3 tokens and no error", dl.Err, len(ids), pl.Err)
	}
}
