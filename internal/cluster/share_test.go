//go:build unix

package cluster

import (
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

// whoami asks the routers' shared port which router answers, on a new
// connection each time.
func whoami(t *testing.T, c *Cluster) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(c.RouterURL() + "/whoami")
	if err != nil {
		t.Fatalf("GET %s/whoami: %v", c.RouterURL(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// answerers returns which routers answered n connections to the shared
// port.
func answerers(t *testing.T, c *Cluster, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		got[whoami(t, c)]++
	}
	return got
}

// TestRoutersShareOnePort: Routers 2 start router-0 and router-1, each on
// a port of its own (Proc.URL) and both accepting on the one RouterURL; a
// router killed leaves every connection to the other, and restarted it
// accepts on the same socket again; Drain stops one with a single SIGTERM
// and reports its clean exit, and supervision does not restart it.
func TestRoutersShareOnePort(t *testing.T) {
	c := startFake(t, Options{Routers: 2, Supervise: true})
	rs := c.Routers()
	if len(rs) != 2 || rs[0].Name != "router-0" || rs[1].Name != "router-1" || rs[0].URL == rs[1].URL || rs[0].URL == c.RouterURL() {
		t.Fatalf("routers %+v at %s: want router-0 and router-1 on ports of their own beside the shared one", rs, c.RouterURL())
	}
	want2 := func(step string) {
		t.Helper()
		// The kernel hands each connection to whichever router accepts
		// first; over 200 connections both answer unless one is gone.
		if got := answerers(t, c, 200); got["router-0"] == 0 || got["router-1"] == 0 || len(got) != 2 {
			t.Errorf("%s: the shared port was answered by %v, want router-0 and router-1", step, got)
		}
	}
	want2("both up")

	if err := c.Kill("router-0"); err != nil {
		t.Fatal(err)
	}
	if got := answerers(t, c, 50); got["router-1"] != 50 {
		t.Errorf("router-0 killed: the shared port was answered by %v, want router-1 alone, no failure", got)
	}
	ctx := t.Context()
	if err := c.Restart(ctx, "router-0"); err != nil {
		t.Fatal(err)
	}
	want2("router-0 restarted")

	d, err := c.Drain("router-1")
	if err != nil || d > 5*time.Second {
		t.Errorf("Drain(router-1) = %s, %v; want a clean exit at once (the fake exits on SIGTERM)", d, err)
	}
	time.Sleep(time.Second) // longer than the supervisor's first backoff
	if got := answerers(t, c, 50); got["router-0"] != 50 {
		t.Errorf("router-1 drained: the shared port was answered by %v, want router-0 alone (a drained router is not restarted)", got)
	}
	if n := rs[1].Restarts(); n != 0 {
		t.Errorf("router-1 was restarted %d times by supervision after Drain, want 0", n)
	}
	if err := c.Restart(ctx, "router-1"); err != nil {
		t.Fatal(err)
	}
	want2("router-1 restarted")
}

// TestStopHurriesTheSettle: Stop repeats SIGTERM, so children that wait
// out a settle window after the first one (a real child waits 5 s) stop
// at the second, well within StopTimeout; Drain of one sends one signal
// and waits the whole window.
func TestStopHurriesTheSettle(t *testing.T) {
	t.Setenv(fakeSettleEnv, "1")
	var mu sync.Mutex
	var exits []Exit
	c := startFake(t, Options{Routers: 2, StopTimeout: 20 * time.Second, OnExit: func(e Exit) {
		mu.Lock()
		defer mu.Unlock()
		exits = append(exits, e)
	}})
	t0 := time.Now()
	c.Stop()
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Stop took %s, want well under the children's 30 s settle: the repeated SIGTERM ends it", d)
	}
	for _, e := range exits {
		if e.Err != nil {
			t.Errorf("%s exited with %v, want 0 (a drain, not a kill)", e.Name, e.Err)
		}
	}
	if len(exits) != 4 {
		t.Errorf("%d exits seen, want 4", len(exits))
	}
}

// TestSharedSocketStaysBlocking: the routers' socket as passed to children
// is in blocking mode in this process's descriptor, so os/exec has
// nothing to change on the socket the running routers share.
func TestSharedSocketStaysBlocking(t *testing.T) {
	f, _, err := listenShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.SetDeadline(time.Now()); err != os.ErrNoDeadline {
		t.Errorf("the shared socket's file takes deadlines (%v): it is non-blocking and os/exec would switch the shared socket to blocking mode", err)
	}
}
