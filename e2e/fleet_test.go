package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"tandem/internal/cluster"
	"tandem/internal/loadgen"
	"tandem/internal/pd/debugdoc"
)

// The fleet tests' sizes: a 2 prefill + 2 decode cluster behind 2 routers
// sharing one port, under an open-loop load at fleetLoadShare of the
// capacity measured on the same cluster with the same request mix.
const (
	fleetSettle         = time.Second            // every process's --drain-settle: shorter than a router's notice, so refusals happen too
	fleetDrainTimeout   = 30 * time.Second       // every process's --drain-timeout
	fleetLoadShare      = 0.6                    // of the measured capacity
	fleetCapacityConc   = 8                      // closed-loop clients of the capacity run
	fleetCapacityReqs   = 48                     // its requests
	fleetWarmup         = 2 * time.Second        // load before the first change
	fleetCooldown       = 3 * time.Second        // load after the last
	fleetRequestTimeout = time.Minute            // a request past it is pinned
	fleetLoadMax        = 5 * time.Minute        // the open loop's schedule, far longer than any run
	fleetSettleMax      = 2 * time.Minute        // waiting for every room to end once the load stopped
	fleetKillGrace      = 200 * time.Millisecond // a connection cut without an answer must have been sent by then
	fleetKillWait       = 10 * time.Second       // the longest the kill waits for the victim to carry streams
	fleetStartTimeout   = 3 * time.Minute
	fleetSeed           = 23
	fleetGenMin         = 256 // tokens each answer generates, at least
	fleetGenMax         = 1024
)

// startFleet starts the fleet; its output goes to out and, when the test
// failed, to the log.
func startFleet(t *testing.T, out *lockedBuffer) *cluster.Cluster {
	t.Helper()
	return startCluster(t, out, cluster.Options{Model: modelPath, Prefill: 2, Decode: 2, Routers: 2,
		DrainSettle: fleetSettle, DrainTimeout: fleetDrainTimeout,
		// No prefix cache: a cached page counts as used, and every page
		// must be seen back once the fleet is idle (as in the chaos soak).
		WorkerArgs: []string{"--threads", "1", "--prefix-cache=false"},
		RouterArgs: []string{"--pd-threshold", "0"}, // every request through a prefill and a decode worker
	})
}

// loadedFleet is a started fleet under the open-loop load, observed.
type loadedFleet struct {
	cl            *cluster.Cluster
	out           lockedBuffer
	base          string
	capacity      float64 // measured, requests per second
	rate          float64 // the load's
	ob            *observer
	stopObserving func()
	load          *openLoop
	loadStart     time.Time
}

// startLoadedFleet starts the fleet, measures its capacity, and starts an
// open-loop load at fleetLoadShare of it with the observer; it returns
// after fleetWarmup of load.
func startLoadedFleet(t *testing.T) *loadedFleet {
	t.Helper()
	f := &loadedFleet{}
	f.cl = startFleet(t, &f.out)
	f.base = f.cl.RouterURL()
	f.capacity = measureCapacity(t, f.base)
	f.rate = fleetLoadShare * f.capacity
	f.ob, f.stopObserving = fleetObserver(t, f.cl)
	load, err := startOpenLoop(f.base, f.rate)
	if err != nil {
		t.Fatal(err)
	}
	f.load, f.loadStart = load, time.Now()
	time.Sleep(fleetWarmup)
	return f
}

// fleetRequest is request i of the fleet's mix: the chaos soak's (chat or
// completions, streamed or not, n 1 or 2, 1 to 600 prompt tokens), with
// no client walking away and longer answers (fleetGenMin to fleetGenMax
// tokens, end of sequence ignored), so that drains find streams to finish.
func fleetRequest(i int) *chaosRequest {
	r := drawRequest(fleetSeed, i, 0)
	r.maxTokens, r.ignoreEOS = fleetGenMin+(i*7919)%(fleetGenMax-fleetGenMin+1), true
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		panic(err) // drawRequest marshalled it
	}
	body["max_tokens"], body["ignore_eos"] = r.maxTokens, true
	r.body, _ = json.Marshal(body)
	return r
}

// measureCapacity runs the request mix in a closed loop of
// fleetCapacityConc clients and returns the completed requests per second.
func measureCapacity(t *testing.T, base string) float64 {
	t.Helper()
	cs := newChaosClients(fleetCapacityConc)
	defer cs.closeIdle()
	var next atomic.Int64
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range fleetCapacityConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= fleetCapacityReqs {
					return
				}
				if o := fleetRequest(1_000_000+i).run(cs, base, fleetRequestTimeout); o.kind == outcomeCompleted {
					done.Add(1)
				} else {
					failed.Add(1)
					t.Logf("capacity run: request %s: %s %s", o.req, o.kind, o.detail)
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(t0)
	if failed.Load() > 0 {
		t.Fatalf("capacity run: %d of %d requests failed", failed.Load(), fleetCapacityReqs)
	}
	c := float64(done.Load()) / d.Seconds()
	t.Logf("capacity: %d requests of the mix in %s with %d clients: %.2f requests/s", done.Load(), d.Round(time.Millisecond), fleetCapacityConc, c)
	return c
}

// openLoop sends the request mix at a rate until stopped, whatever is in
// flight (loadgen's Poisson arrivals), and keeps every outcome.
type openLoop struct {
	stop     chan struct{}
	done     chan struct{}
	inflight atomic.Int64
	mu       sync.Mutex
	outcomes []outcome
}

func startOpenLoop(base string, rate float64) (*openLoop, error) {
	sched, err := loadgen.Arrivals(int(rate*fleetLoadMax.Seconds()), rate, 1, fleetSeed)
	if err != nil {
		return nil, err
	}
	l := &openLoop{stop: make(chan struct{}), done: make(chan struct{})}
	cs := newChaosClients(64)
	go func() {
		defer close(l.done)
		defer cs.closeIdle()
		var wg sync.WaitGroup
		defer wg.Wait()
		t0 := time.Now()
		for i, at := range sched {
			select {
			case <-l.stop:
				return
			case <-time.After(time.Until(t0.Add(at))):
			}
			l.inflight.Add(1)
			wg.Go(func() {
				defer l.inflight.Add(-1)
				o := fleetRequest(i).run(cs, base, fleetRequestTimeout)
				l.mu.Lock()
				l.outcomes = append(l.outcomes, o)
				l.mu.Unlock()
			})
		}
	}()
	return l, nil
}

// finish stops sending, waits for every request sent and returns their
// outcomes in order of start.
func (l *openLoop) finish() []outcome {
	close(l.stop)
	<-l.done
	slices.SortFunc(l.outcomes, func(a, b outcome) int { return a.start.Compare(b.start) })
	return l.outcomes
}

// drainRecord is what one process's drain cost, from its own log lines.
type drainRecord struct {
	name               string
	exit               time.Duration // SIGTERM to exit, seen by the cluster
	err                error
	heldAtTerm         string // requests (and live rooms) the process held at SIGTERM
	heldAtRefuse       string // ... when the settle window ended
	settled, drained   string
	endedAtDeadline    string
	clientsAtTerm      int64 // client requests in flight at SIGTERM, fleet-wide
	restarted, visible time.Duration
}

var (
	drainStartLine = regexp.MustCompile(`msg="draining: not ready[^"]*" settle=\S+ timeout=\S+ requests=(\d+) busy=(\d+)`)
	drainRefuse    = regexp.MustCompile(`msg="draining: refusing new work[^"]*" requests=(\d+) busy=(\d+)`)
	drainStopped   = regexp.MustCompile(`msg=stopped settled=(\S+) drained=(\S+) ended_at_deadline=(\d+)`)
)

// parseDrain fills r from the process's log lines in out (what it wrote
// during its drain).
func (r *drainRecord) parseDrain(out string) {
	prefix := "[" + r.name + "] "
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		if m := drainStartLine.FindStringSubmatch(rest); m != nil {
			r.heldAtTerm = m[1] + " requests, " + m[2] + " rooms"
		}
		if m := drainRefuse.FindStringSubmatch(rest); m != nil {
			r.heldAtRefuse = m[1] + " requests, " + m[2] + " rooms"
		}
		if m := drainStopped.FindStringSubmatch(rest); m != nil {
			r.settled, r.drained, r.endedAtDeadline = m[1], m[2], m[3]
		}
	}
}

// routersSee waits until every router's pool has the worker at url
// healthy and not draining (it takes new legs again).
func routersSee(ctx context.Context, cl *cluster.Cluster, url string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	for {
		all := true
		for _, r := range cl.Routers() {
			doc, err := roomTable(ctx, c, r.URL)
			if err != nil {
				all = false
				break
			}
			i := slices.IndexFunc(doc.Workers, func(w debugdoc.Worker) bool { return w.URL == url })
			if i < 0 || !doc.Workers[i].Healthy || doc.Workers[i].Draining {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the routers do not take %s back: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fleetQuiet waits, once the load stopped, until every room on every
// process has ended, every worker's pages and sequences are back and no
// router holds a leg, then checks what the observer saw during the run:
// no room ever live past its deadline, `tandem inspect` exits 0. It
// returns the pages still used in all (0 when nothing leaked).
func fleetQuiet(t *testing.T, cl *cluster.Cluster, ob *observer) float64 {
	t.Helper()
	var workers []*cluster.Proc
	for _, p := range cl.Procs() {
		if p.Role != "router" {
			workers = append(workers, p)
		}
	}
	mc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	var (
		final  *debugdoc.Cluster
		gauges map[string]workerGauges
		legs   float64
		errs   error
	)
	for {
		var err1, err2, err3 error
		final, err1 = ob.poll(context.Background())
		gauges, err2 = readGauges(mc, workers)
		legs = 0
		for _, r := range cl.Routers() {
			n, err := routerLegsOpen(mc, r.URL)
			legs += n
			err3 = errors.Join(err3, err)
		}
		errs = errors.Join(err1, err2, err3)
		if errs == nil && legs == 0 && allTerminal(final) && allQuiet(gauges) {
			break
		}
		if time.Since(start) > fleetSettleMax {
			break
		}
		time.Sleep(chaosSettlePoll)
	}
	if errs != nil {
		t.Errorf("reading the fleet after the load: %v", errs)
	}
	if final != nil {
		for _, p := range final.Processes {
			for _, r := range p.Rooms {
				if !r.Terminal() {
					t.Errorf("%s: room still %s/%s %s after the load (pinned): %s", ob.name(p), r.State, r.Phase,
						time.Since(start).Round(time.Millisecond), roomJSON(r))
				}
			}
		}
	}
	if legs != 0 {
		t.Errorf("the routers still hold %g legs after the load", legs)
	}
	pages := 0.0
	for _, w := range workers {
		g, ok := gauges[w.Name]
		if !ok {
			continue
		}
		pages += g.pagesUsed
		if !g.quiet() {
			t.Errorf("%s is not quiet after the load: %s (leaked pages or stuck sequences)", w.Name, g)
		}
		if d := g.failures["deadline"]; d != 0 {
			t.Errorf("%s: the watchdog failed %g rooms whose timer did not fire", w.Name, d)
		}
	}
	ob.mu.Lock()
	for _, s := range ob.overdue {
		t.Errorf("%s: room seen live %s past its deadline: %s", s.process,
			time.Duration(-*s.room.DeadlineInMS*float64(time.Millisecond)).Round(time.Millisecond), roomJSON(s.room))
	}
	ob.mu.Unlock()
	if out, err := runInspect(cl.RouterURL()); err != nil {
		t.Errorf("tandem inspect after the load: %v\n%s", err, out)
	}
	t.Logf("fleet quiet %s after the load: %g pages in use, %g router legs open", time.Since(start).Round(time.Millisecond), pages, legs)
	return pages
}

// fleetObserver polls /debug/cluster (through the shared port) and every
// worker's /metrics during the run.
func fleetObserver(t *testing.T, cl *cluster.Cluster) (*observer, func()) {
	names, workerURLs := map[string]string{}, map[string]string{}
	for _, p := range cl.Procs() {
		names[p.URL] = p.Name
		if p.Role != "router" {
			workerURLs[p.Name] = p.URL
		}
	}
	ob := newObserver(cl.RouterURL(), names, workerURLs)
	ob.client.Transport = e2eKeys(t).Transport(&http.Transport{DisableKeepAlives: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ob.run(ctx, chaosPollInterval)
	}()
	return ob, func() { cancel(); <-done }
}

// routerMetric sums a counter over every router.
func routerMetric(cl *cluster.Cluster, name string) float64 {
	mc := &http.Client{Timeout: 10 * time.Second}
	sum := 0.0
	for _, r := range cl.Routers() {
		ps, err := fetchMetrics(context.Background(), mc, r.URL)
		if err != nil {
			continue
		}
		for _, s := range ps {
			if s.name == name {
				sum += s.value
			}
		}
	}
	return sum
}

// TestRollingRestart restarts every process of a 2 prefill + 2 decode
// fleet behind 2 routers, one at a time (SIGTERM, exit 0, start again,
// ready and taken back by both routers), under an open-loop load at 60% of
// the capacity measured first: every request must complete whole (no
// error at all), every room end, no room be seen past its deadline, and
// every worker's pages come back. It logs what each drain cost.
func TestRollingRestart(t *testing.T) {
	setup(t)
	f := startLoadedFleet(t)
	cl, out, load, loadStart := f.cl, &f.out, f.load, f.loadStart

	var recs []drainRecord
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, p := range cl.Procs() { // workers first, then the routers
		r := drainRecord{name: p.Name, clientsAtTerm: load.inflight.Load()}
		mark := len(out.String())
		r.exit, r.err = cl.Drain(p.Name)
		if r.err != nil {
			t.Errorf("%s: SIGTERM to exit took %s and ended with %v, want exit 0", p.Name, r.exit, r.err)
		}
		r.parseDrain(out.String()[mark:])
		t0 := time.Now()
		if err := cl.Restart(ctx, p.Name); err != nil {
			t.Fatalf("restart %s: %v", p.Name, err)
		}
		r.restarted = time.Since(t0)
		if p.Role != "router" {
			if err := routersSee(ctx, cl, p.URL); err != nil {
				t.Fatal(err)
			}
		}
		r.visible = time.Since(t0)
		recs = append(recs, r)
	}
	time.Sleep(fleetCooldown)
	outcomes := load.finish()
	loadDur := time.Since(loadStart)
	f.stopObserving()

	completed, failures := failedRequests(t, outcomes, loadStart)
	pages := fleetQuiet(t, cl, f.ob)

	var b strings.Builder
	fmt.Fprintf(&b, "=== ROLLING RESTART: %d requests at %.2f/s (%.0f%% of %.2f/s measured) over %s: %d completed, %d failed; %g pages in use after; "+
		"draining refusals retried elsewhere %g, retries in all %g\n",
		len(outcomes), f.rate, 100*fleetLoadShare, f.capacity, loadDur.Round(time.Millisecond), completed, len(failures), pages,
		routerMetric(cl, "tandem_router_worker_draining_refusals_total"), routerMetric(cl, "tandem_router_retries_total"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tSIGTERM->EXIT\tSETTLED\tDRAINED AFTER\tHELD AT SIGTERM\tHELD AT REFUSAL\tENDED AT DEADLINE\tCLIENTS IN FLIGHT\tRESTART->READY\t->IN ROUTERS")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.name, r.exit.Round(time.Millisecond), r.settled, r.drained,
			r.heldAtTerm, r.heldAtRefuse, r.endedAtDeadline, r.clientsAtTerm, r.restarted.Round(time.Millisecond), r.visible.Round(time.Millisecond))
	}
	tw.Flush()
	t.Log("\n" + b.String())
}

// sharedPortAnswerers asks the routers' shared port n times, on a new
// connection each, which router answers (X-Tandem-Router of GET /health).
func sharedPortAnswerers(t *testing.T, base string, n int) map[string]int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]int{}
	for range n {
		resp, err := c.Get(base + "/health")
		if err != nil {
			t.Errorf("GET %s/health: %v", base, err)
			return seen
		}
		resp.Body.Close()
		seen[resp.Header.Get("X-Tandem-Router")]++
	}
	return seen
}

// orphanedRooms finds, on every worker, the rooms of the requests cut by
// the router's death, and says how each ended and when, from the kill.
func orphanedRooms(t *testing.T, cl *cluster.Cluster, cut []outcome, killed time.Time) string {
	t.Helper()
	ids := map[string]bool{}
	for _, o := range cut {
		if o.requestID != "" {
			ids[o.requestID] = true
		}
	}
	var b strings.Builder
	c := &http.Client{Timeout: 10 * time.Second}
	var latest time.Duration // the last end, from the kill (negative: before it)
	n := 0
	for _, p := range cl.Procs() {
		if p.Role == "router" {
			continue
		}
		at := time.Now()
		doc, err := roomTable(context.Background(), c, p.URL)
		if err != nil {
			t.Errorf("read %s's rooms: %v", p.Name, err)
			continue
		}
		for _, r := range doc.Rooms {
			if !ids[r.RequestID] {
				continue
			}
			n++
			created := at.Add(-time.Duration(r.AgeMS * float64(time.Millisecond)))
			end := created
			if len(r.History) > 0 {
				end = created.Add(time.Duration(r.History[len(r.History)-1].AtMS * float64(time.Millisecond)))
			}
			if !r.Terminal() {
				t.Errorf("%s: room %s of a request the killed router carried is still %s", p.Name, r.ID, r.State)
			}
			if n == 1 || end.Sub(killed) > latest {
				latest = end.Sub(killed)
			}
			fmt.Fprintf(&b, "  orphan on %s: room %s %s %s, ended at kill%+dms\n", p.Name, r.ID[:8], r.State, r.Reason,
				end.Sub(killed).Milliseconds())
		}
	}
	fmt.Fprintf(&b, "  %d rooms of cut requests found on the workers, the last ended at kill%+dms\n", n, latest.Milliseconds())
	return b.String()
}

// TestRouterKill SIGKILLs one of two routers under an open-loop load at
// 60% of the measured capacity: only requests that router carried may
// fail (their client sees an error), every request the other router
// served completes, requests after the kill go to the survivor, every
// room the dead router left on the workers ends within its deadline, and
// every page comes back. The killed router is then started again and
// answers on the shared port beside the other.
func TestRouterKill(t *testing.T) {
	setup(t)
	f := startLoadedFleet(t)
	cl, base, load, loadStart := f.cl, f.base, f.load, f.loadStart
	victim, survivor := cl.Routers()[1].Name, cl.Routers()[0].Name
	// Kill it while it carries streams: at least two legs open on the
	// workers (up to fleetKillWait), so that the kill has something to cut.
	mc := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(fleetKillWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err := routerLegsOpen(mc, cl.Routers()[1].URL); err == nil && n >= 2 {
			break
		}
	}
	inflight := load.inflight.Load()
	killed := time.Now()
	if err := cl.Kill(victim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fleetWarmup)
	ctx, cancel := context.WithTimeout(context.Background(), fleetStartTimeout)
	defer cancel()
	if err := cl.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fleetCooldown)
	outcomes := load.finish()
	f.stopObserving()

	byRouter := map[string]map[outcomeKind]int{}
	var cut []outcome
	for _, o := range outcomes {
		if byRouter[o.router] == nil {
			byRouter[o.router] = map[outcomeKind]int{}
		}
		byRouter[o.router][o.kind]++
		if o.kind == outcomeCompleted {
			continue
		}
		carried := o.router == victim || (o.router == "" && o.start.Before(killed.Add(fleetKillGrace)) && o.end.After(killed))
		if !carried || o.kind == outcomePinned {
			t.Errorf("request %s (load+%s..+%s, router %q, killed at load+%s): %s: %s %s — not a stream the killed router carried",
				o.req, o.start.Sub(loadStart).Round(time.Millisecond), o.end.Sub(loadStart).Round(time.Millisecond), o.router,
				killed.Sub(loadStart).Round(time.Millisecond), o.kind, o.detail, o.message)
			continue
		}
		cut = append(cut, o)
	}
	if byRouter[survivor][outcomeCompleted] == 0 || len(byRouter[survivor]) != 1 {
		t.Errorf("requests %s served: %v, want all completed", survivor, byRouter[survivor])
	}
	if seen := sharedPortAnswerers(t, base, 200); seen[victim] == 0 || seen[survivor] == 0 {
		t.Errorf("after %s's restart the shared port was answered by %v, want both routers", victim, seen)
	}
	if len(cut) == 0 {
		t.Errorf("the kill of %s cut no request: nothing was judged (it carried none when killed)", victim)
	}
	pages := fleetQuiet(t, cl, f.ob)
	orphans := orphanedRooms(t, cl, cut, killed)

	var b strings.Builder
	b.WriteString(orphans)
	fmt.Fprintf(&b, "=== ROUTER KILL: %d requests at %.2f/s; %s SIGKILLed at load+%s with %d client requests in flight fleet-wide; "+
		"%d requests cut (all carried by it), %g pages in use after\n", len(outcomes), f.rate, victim, killed.Sub(loadStart).Round(time.Millisecond),
		inflight, len(cut), pages)
	for _, r := range []string{survivor, victim, ""} {
		label := r
		if r == "" {
			label = "(no answer: connection cut)"
		}
		fmt.Fprintf(&b, "  %s: %v\n", label, byRouter[r])
	}
	for _, o := range cut {
		fmt.Fprintf(&b, "  cut: %s router %q load+%s..+%s: %s %s\n", o.req, o.router, o.start.Sub(loadStart).Round(time.Millisecond),
			o.end.Sub(loadStart).Round(time.Millisecond), o.kind, clip(o.detail, 120))
	}
	t.Log("\n" + b.String())
}

// failedRequests counts the completed requests of a load and fails the test
// with each other one (up to chaosDetailsMax of them), timed from loadStart.
func failedRequests(t *testing.T, outcomes []outcome, loadStart time.Time) (completed int, failures []outcome) {
	t.Helper()
	for _, o := range outcomes {
		if o.kind == outcomeCompleted {
			completed++
		} else {
			failures = append(failures, o)
		}
	}
	for i, o := range failures {
		if i == chaosDetailsMax {
			t.Errorf("... %d failed requests in all", len(failures))
			break
		}
		t.Errorf("request %s (load+%s..+%s, router %q) %s: %s %s", o.req, o.start.Sub(loadStart).Round(time.Millisecond),
			o.end.Sub(loadStart).Round(time.Millisecond), o.router, o.kind, o.detail, o.message)
	}
	return completed, failures
}
