package router_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
	"tandem/internal/router"
)

// metricValue returns the value of one series in a /metrics body (0 when
// it is absent).
func metricValue(t *testing.T, metrics, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("series %s has value %q", series, v)
			}
			return f
		}
	}
	return 0
}

// TestKilledDecodeWorkerGetsAHandfulOfLegs: a decode worker that dies
// between health rounds gets at most the breaker's threshold of legs (its
// failed legs open its breaker), not half the traffic because its legs
// fail at once and it looks idle.
func TestKilledDecodeWorkerGetsAHandfulOfLegs(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d1 := newFake(t, "decode", answer(200, decodeAnswer))
	d2 := newFake(t, "decode", answer(200, decodeAnswer))
	// A cool-down longer than the test: no probe leg goes to d1 however slow the machine.
	c := newCluster(t, []*fake{p}, []*fake{d1, d2}, func(o *router.Options) { o.BreakerCooldown = time.Hour })
	d1.srv.Close() // killed after the health round: the router still thinks it is in
	const requests = 20
	ok := 0
	for range requests {
		if status, _ := c.post(t, "/v1/completions", `{"prompt":"x"}`); status == 200 {
			ok++
		}
	}
	_, m := c.get(t, "/metrics")
	legs := metricValue(t, m, `tandem_router_worker_requests_total{role="decode",worker="`+d1.url()+`"}`)
	if legs > 3 {
		t.Errorf("the dead decode worker got %v of %d legs, want at most 3 (the breaker's threshold)", legs, requests)
	}
	if st := metricValue(t, m, `tandem_router_worker_breaker_state{role="decode",worker="`+d1.url()+`"}`); st != 2 {
		t.Errorf("dead worker's breaker state gauge = %v, want 2 (open)", st)
	}
	if n := metricValue(t, m, `tandem_router_worker_breaker_transitions_total{role="decode",to="open",worker="`+d1.url()+`"}`); n != 1 {
		t.Errorf("dead worker's transitions to open = %v, want 1", n)
	}
	_, body := c.get(t, "/debug/rooms")
	var doc debugdoc.Rooms
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range doc.Workers {
		states[w.URL] = w.Breaker
	}
	if states[d1.url()] != "open" || states[d2.url()] != "closed" || states[p.url()] != "closed" {
		t.Errorf("/debug/rooms workers' breakers = %v, want the dead one open, the others closed", states)
	}
	if ok != requests {
		t.Errorf("%d of %d requests succeeded, want all: a sample whose decode leg was refused is retried on the other pair", ok, requests)
	}
	if n := metricValue(t, m, "tandem_router_retries_total"); n != legs {
		t.Errorf("retries = %v, want one per leg the dead worker got (%v)", n, legs)
	}
}
