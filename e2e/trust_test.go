package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tandem/internal/api/leg"
)

// e2eClusterToken is the cluster token of the clusters these tests start
// (a fixed test value, so that the test can act as the router).
const e2eClusterToken = "e2e-cluster-token-5f0c8d2a91b7e4d3"

func e2eKeys(t *testing.T) *leg.Keys {
	t.Helper()
	k, err := leg.NewKeys([]byte(e2eClusterToken))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// trustCluster is a prefill worker, a decode worker and a router, each
// started as its own process with the cluster token in the environment.
type trustCluster struct {
	prefill, decode, router string
}

func startTrustCluster(t *testing.T) trustCluster {
	t.Helper()
	setup(t)
	t.Setenv("TANDEM_CLUSTER_TOKEN", e2eClusterToken) // the children inherit it
	worker := func(role string) string {
		port := freePort(t)
		return startProcess(t, port, role, "--model", modelPath, "--port", strconv.Itoa(port), "--threads", "1", "--prefix-cache=false")
	}
	var c trustCluster
	c.prefill, c.decode = worker("prefill"), worker("decode")
	port := freePort(t)
	c.router = startProcess(t, port, "route", "--port", strconv.Itoa(port), "--prefill", c.prefill, "--decode", c.decode)
	return c
}

// send does one request and returns status and body.
func send(t *testing.T, method, url string, hdr http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func randomRoom(t *testing.T) string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// want401 fails unless status and body are a 401 in OpenAI's shape.
func want401(t *testing.T, what string, status int, body string) {
	t.Helper()
	var doc struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	if status != http.StatusUnauthorized || json.Unmarshal([]byte(body), &doc) != nil || doc.Error.Code != "invalid_api_key" {
		t.Errorf("%s: %d %s; want 401 with an OpenAI error (code invalid_api_key)", what, status, body)
	}
}

// TestRouterTrust runs a cluster of separately started processes and
// checks what a process without the cluster token can and cannot do: a
// completion through the router works; a forged decode leg pointing at a
// listener of the test's gets 401 and decode never dials it; unsigned
// completions straight to a worker get 401; /pd/* and /debug/* need the
// cluster credential on the workers and /debug/* on the router; /health
// and /metrics stay open; a signed leg replayed within its lifetime gets
// 409 (room ids are single-use); `tandem inspect` works with the token
// and names both ways to give it without.
func TestRouterTrust(t *testing.T) {
	c := startTrustCluster(t)
	keys := e2eKeys(t)
	cred := http.Header{"Authorization": {keys.Credential()}}

	// Through the router.
	if got := complete(t, c.router, "Once upon a time", true); got.Text == "" {
		t.Errorf("completion through the router returned no text: %+v", got)
	}

	// A forged decode leg straight to the decode worker.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	room := randomRoom(t)
	forged := http.Header{}
	leg.Info{Room: room, RequestID: "req-forged", Leg: leg.KindDecode, Prefill: ln.Addr().String()}.Set(forged)
	const body = `{"prompt":"Once upon a time","max_tokens":4}`
	st, b := send(t, "POST", c.decode+"/v1/completions", forged, body)
	want401(t, "unsigned decode leg", st, b)
	forged.Set(leg.HeaderExpires, strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
	forged.Set(leg.HeaderSignature, strings.Repeat("ab", 32))
	st, b = send(t, "POST", c.decode+"/v1/completions", forged, body)
	want401(t, "decode leg with a forged signature", st, b)
	other, _ := leg.NewKeys([]byte("not-the-cluster-token-0123456789"))
	other.Sign(forged, "POST", "/v1/completions", []byte(body))
	st, b = send(t, "POST", c.decode+"/v1/completions", forged, body)
	want401(t, "decode leg signed with another token", st, b)
	// The handler answered before creating a room, so nothing can dial
	// later; the listener has seen no connection.
	ln.(*net.TCPListener).SetDeadline(time.Now())
	if conn, err := ln.Accept(); err == nil {
		conn.Close()
		t.Errorf("decode dialed the address a forged leg named")
	}
	if st, b := send(t, "GET", c.decode+"/debug/rooms?all=1", cred, ""); st != 200 || strings.Contains(b, room) {
		t.Errorf("decode /debug/rooms after the forged legs: %d, lists the room %v; want 200 without it", st, strings.Contains(b, room))
	}

	// Unsigned (colocated) completions straight to the workers.
	for _, w := range []string{c.prefill, c.decode} {
		st, b := send(t, "POST", w+"/v1/completions", nil, body)
		want401(t, "completion straight to worker "+w, st, b)
		st, b = send(t, "POST", w+"/v1/chat/completions", nil, `{"messages":[{"role":"user","content":"hi"}]}`)
		want401(t, "chat completion straight to worker "+w, st, b)
	}

	// Guarded and open endpoints.
	for _, u := range []string{c.prefill + "/debug/rooms", c.decode + "/debug/rooms", c.prefill + "/pd/status", c.decode + "/pd/info",
		c.router + "/debug/rooms", c.router + "/debug/cluster"} {
		st, b := send(t, "GET", u, nil, "")
		want401(t, "GET "+u+" without the credential", st, b)
		if st, b := send(t, "GET", u, cred, ""); st != 200 {
			t.Errorf("GET %s with the credential: %d %s, want 200", u, st, b)
		}
	}
	for _, u := range []string{c.prefill + "/health", c.decode + "/metrics", c.router + "/health", c.router + "/metrics"} {
		if st, _ := send(t, "GET", u, nil, ""); st != 200 {
			t.Errorf("GET %s without any credential: %d, want 200", u, st)
		}
	}

	// A signed leg pair, as the router sends it, then the same requests
	// replayed within their lifetime.
	st, b = send(t, "GET", c.prefill+"/pd/info", cred, "")
	var info struct {
		TransferAddr string `json:"transfer_addr"`
	}
	if st != 200 || json.Unmarshal([]byte(b), &info) != nil || info.TransferAddr == "" {
		t.Fatalf("prefill /pd/info: %d %s", st, b)
	}
	room = randomRoom(t)
	pbody, dbody := `{"prompt":"Once upon a time","max_tokens":1}`, `{"prompt":"Once upon a time","max_tokens":4}`
	ph, dh := http.Header{}, http.Header{}
	leg.Info{Room: room, RequestID: "req-e2e", Leg: leg.KindPrefill}.Set(ph)
	leg.Info{Room: room, RequestID: "req-e2e", Leg: leg.KindDecode, Prefill: info.TransferAddr}.Set(dh)
	keys.Sign(ph, "POST", "/v1/completions", []byte(pbody))
	keys.Sign(dh, "POST", "/v1/completions", []byte(dbody))
	pair := func() (ps, ds int, pb, db string) {
		var wg sync.WaitGroup
		wg.Go(func() { ps, pb = send(t, "POST", c.prefill+"/v1/completions", ph, pbody) })
		ds, db = send(t, "POST", c.decode+"/v1/completions", dh, dbody)
		wg.Wait()
		return
	}
	if ps, ds, pb, db := pair(); ps != 200 || ds != 200 {
		t.Fatalf("signed leg pair: prefill %d %s, decode %d %s; want 200 both", ps, pb, ds, db)
	}
	if ps, ds, pb, db := pair(); ps != http.StatusConflict || ds != http.StatusConflict {
		t.Errorf("the same signed legs replayed: prefill %d %s, decode %d %s; want 409 both (room ids are single-use)", ps, pb, ds, db)
	}

	// tandem inspect: 0 with the token; without it, an error naming both
	// ways to give it.
	runTandem(t, time.Minute, "inspect", c.router)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "inspect", c.router)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TANDEM_CLUSTER_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(out.String(), "401") || !strings.Contains(out.String(), "TANDEM_CLUSTER_TOKEN") ||
		!strings.Contains(out.String(), "--cluster-token-file") {
		t.Errorf("tandem inspect without the token: %v\n%s\nwant a non-zero exit naming the 401, $TANDEM_CLUSTER_TOKEN and --cluster-token-file", err, out.String())
	}
}

// TestOpenAIServeAPIKey: `tandem serve --api-key` requires the key on
// /v1/*, and $TANDEM_API_KEY gives it too; /health stays open.
func TestOpenAIServeAPIKey(t *testing.T) {
	setup(t)
	port := freePort(t)
	base := startProcess(t, port, "serve", "--model", modelPath, "--port", strconv.Itoa(port), "--threads", "1", "--api-key", "sk-e2e")
	const body = `{"prompt":"Once upon a time","max_tokens":2}`
	st, b := send(t, "POST", base+"/v1/completions", nil, body)
	want401(t, "completion without the key", st, b)
	st, b = send(t, "GET", base+"/v1/models", http.Header{"Authorization": {"Bearer sk-wrong"}}, "")
	want401(t, "models with a wrong key", st, b)
	if st, b := send(t, "POST", base+"/v1/completions", http.Header{"Authorization": {"Bearer sk-e2e"}}, body); st != 200 {
		t.Errorf("completion with the key: %d %s, want 200", st, b)
	}
	if st, _ := send(t, "GET", base+"/health", nil, ""); st != 200 {
		t.Errorf("/health without the key: %d, want 200", st)
	}

	t.Setenv("TANDEM_API_KEY", "sk-from-env")
	port = freePort(t)
	base = startProcess(t, port, "serve", "--model", modelPath, "--port", strconv.Itoa(port), "--threads", "1")
	if st, b := send(t, "GET", base+"/v1/models", nil, ""); st != http.StatusUnauthorized {
		t.Errorf("models without the key from $TANDEM_API_KEY: %d %s, want 401", st, b)
	}
	if st, b := send(t, "GET", base+"/v1/models", http.Header{"Authorization": {"Bearer sk-from-env"}}, ""); st != 200 {
		t.Errorf("models with the key from $TANDEM_API_KEY: %d %s, want 200", st, b)
	}
}
