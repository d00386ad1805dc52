package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"tandem/internal/cluster"
	"tandem/internal/pd/debugdoc"
)

// The chaos soak's size and mix. CI runs the defaults; scripts/chaos.sh
// passes -chaos.requests 3000.
var (
	chaosRequests    = flag.Int("chaos.requests", 300, "requests the chaos soak sends (scripts/chaos.sh: 3000)")
	chaosConcurrency = flag.Int("chaos.concurrency", 16, "concurrent clients of the chaos soak")
	chaosSeed        = flag.Int64("chaos.seed", 0, "seed of the chaos soak's requests, disconnects and victim (0: from the clock, logged)")
	chaosDisconnect  = flag.Float64("chaos.disconnect", 0.10, "fraction of the chaos soak's requests whose client disconnects")
	chaosKill        = flag.Bool("chaos.kill", true, "SIGKILL one worker after a third of the requests and restart it")
	chaosPause       = flag.Duration("chaos.pause", 300*time.Millisecond, "how long the killed worker stays down before its restart (default: a supervisor's quick restart)")
	chaosTimeout     = flag.Duration("chaos.timeout", 60*time.Second, "hard client timeout of each request: one that hits it is pinned and fails the soak")
	chaosKVPages     = flag.Int("chaos.kv-pages", 128, "KV pages per worker (small, so decode workers make rooms wait for admission)")
	chaosLog         = flag.String("chaos.log", "", "file to write the cluster's whole output to (default: only on failure, to the temporary folder)")
)

// Limits of the soak.
const (
	chaosStartTimeout   = 3 * time.Minute        // cluster start, and a restart
	chaosPollInterval   = time.Second            // /debug/cluster during the load
	chaosRecoveryGrace  = 5 * time.Second        // after the restart is healthy: health rounds put it back in
	chaosSettleMin      = 10 * time.Second       // the least the settle phase may wait
	chaosSettleSlack    = 10 * time.Second       // past the latest live room deadline
	chaosSettleMax      = 3 * time.Minute        // the most it waits, whatever the deadlines say
	chaosInspectTimeout = 30 * time.Second       // `tandem inspect`
	chaosLogTailBytes   = 1 << 20                // cluster output logged on failure (the whole goes to a file)
	chaosRecoveryMin    = 20                     // requests after recovery needed to judge the restarted worker
	chaosDetailsMax     = 20                     // failures listed per kind
	chaosWorkerBatch    = 128                    // --max-batch-tokens of every worker
	chaosSettlePoll     = 250 * time.Millisecond // between settle polls
)

// chaosKillRecord is what happened to the victim.
type chaosKillRecord struct {
	victim      string
	startedReqs int // requests started when it was killed
	killed      time.Time
	restarted   time.Time // healthy again; zero if the restart failed
	err         error
}

// TestChaosSoak runs `tandem up`'s deployment (2 prefill + 2 decode workers
// and the router, started through internal/cluster) under random load:
// prompt lengths, max_tokens, streaming, temperature, n, chat or
// completions, keep-alive or not, and a fraction of clients that walk away
// before, at or after the first bytes. When the first third has started
// it SIGKILLs one worker (prefill or decode, by seed) and restarts it after
// -chaos.pause; the last third starts only once the victim is healthy again
// and the router has had chaosRecoveryGrace to notice. It then waits for
// the cluster to go quiet and checks that nothing is pinned or leaked:
// every room on every process terminal and none ever seen live past its
// deadline, every worker's pages and sequences back to zero, no watchdog
// firing, and every request ended with exactly one outcome (a complete,
// consistent answer or one clear OpenAI error, errors only for requests in
// flight between the kill and the recovery), and the restarted worker
// serves again. It prints a summary table.
func TestChaosSoak(t *testing.T) {
	setup(t)
	n, conc, frac := *chaosRequests, *chaosConcurrency, *chaosDisconnect
	if n < 1 || conc < 1 || frac < 0 || frac > 1 || *chaosTimeout <= 0 || *chaosPause < 0 || *chaosKVPages < 1 {
		t.Fatalf("chaos flags: want requests >= 1 (%d), concurrency >= 1 (%d), disconnect in [0,1] (%g), timeout > 0 (%s), pause >= 0 (%s), kv-pages >= 1 (%d)",
			n, conc, frac, *chaosTimeout, *chaosPause, *chaosKVPages)
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = time.Now().UnixNano()%1_000_000_000 + 1
	}
	t.Logf("chaos soak: seed %d (rerun with: go test ./e2e -run TestChaosSoak -args -chaos.seed=%d -chaos.requests=%d)", seed, seed, n)
	t0 := time.Now()

	var out lockedBuffer
	startCtx, cancelStart := context.WithTimeout(context.Background(), chaosStartTimeout)
	defer cancelStart()
	cl, err := cluster.Start(startCtx, cluster.Options{Binary: binPath, Model: modelPath, Prefill: 2, Decode: 2, Token: e2eClusterToken,
		WorkerArgs: []string{"--threads", "1", "--prefix-cache=false", "--kv-pages", strconv.Itoa(*chaosKVPages),
			"--max-batch-tokens", strconv.Itoa(chaosWorkerBatch)},
		// Every request disaggregated: the chaos is the PD path's.
		RouterArgs: []string{"--debug-records", strconv.Itoa(6*n + 64), "--pd-threshold", "0"}, // n <= 2 samples, <= 3 attempts each
		Output:     &out})
	if err != nil {
		t.Fatalf("start the cluster: %v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		cl.Stop()
		if *chaosLog != "" {
			if err := os.WriteFile(*chaosLog, []byte(out.String()), 0o644); err != nil {
				t.Errorf("write -chaos.log: %v", err)
			}
		}
		if t.Failed() {
			logClusterOutput(t, &out, seed)
		}
	})
	base := cl.RouterURL()
	names, workerURLs := map[string]string{}, map[string]string{}
	var workers []*cluster.Proc
	for _, p := range cl.Procs() {
		names[p.URL] = p.Name
		if p.Role != "router" {
			workers = append(workers, p)
			workerURLs[p.Name] = p.URL
		}
	}
	startDur := time.Since(t0)

	victim := fmt.Sprintf("prefill-%d", (seed/2)%2)
	if seed%2 == 1 {
		victim = fmt.Sprintf("decode-%d", (seed/2)%2)
	}
	reqs := make([]*chaosRequest, n)
	for i := range reqs {
		reqs[i] = drawRequest(seed, i, frac)
	}

	// Watch the cluster during the load.
	ob := newObserver(base, names, workerURLs)
	ob.client.Transport = e2eKeys(t).Transport(nil) // /debug/cluster needs the cluster credential
	pollCtx, stopPolling := context.WithCancel(context.Background())
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		ob.run(pollCtx, chaosPollInterval)
	}()

	// The load, and the kill a third of the way in.
	cs := newChaosClients(conc)
	defer cs.closeIdle()
	outcomes := make([]outcome, n)
	killAt, afterAt := n/3, 2*n/3
	killNow := make(chan int, 1)
	recovered := make(chan struct{}) // closed once the victim is back (or the kill is off or failed)
	var next atomic.Int64
	var wg sync.WaitGroup
	loadStart := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if i == killAt {
					killNow <- i
				}
				if i >= afterAt {
					<-recovered // the last third starts once the victim is back in service
				}
				outcomes[i] = reqs[i].run(cs, base, *chaosTimeout)
			}
		})
	}
	loadDone := make(chan struct{})
	kr := chaosKillRecord{victim: victim}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		defer close(recovered)
		if !*chaosKill {
			return
		}
		select {
		case kr.startedReqs = <-killNow:
		case <-loadDone:
			return
		}
		kr.killed = time.Now()
		if err := cl.Kill(victim); err != nil {
			kr.err = err
			return
		}
		time.Sleep(*chaosPause)
		ctx, cancel := context.WithTimeout(context.Background(), chaosStartTimeout)
		defer cancel()
		if err := cl.Restart(ctx, victim); err != nil {
			kr.err = err
			return
		}
		kr.restarted = time.Now()
		time.Sleep(chaosRecoveryGrace)
	}()
	wg.Wait()
	loadEnd := time.Now()
	close(loadDone)
	<-chaosDone
	stopPolling()
	<-pollDone

	// Settle: poll until every room has ended and every worker is quiet,
	// at most until the latest live deadline plus slack.
	settleStart := time.Now()
	bound := settleStart.Add(chaosSettleMin)
	var (
		final     *debugdoc.Cluster
		finalErr  error
		gauges    map[string]workerGauges
		gaugesErr error
		legsOpen  float64
		legsErr   error
	)
	mc := &http.Client{Timeout: 10 * time.Second}
	for {
		final, finalErr = ob.poll(context.Background())
		if finalErr == nil {
			latest := 0.0
			for _, p := range final.Processes {
				if p.Role == "router" {
					continue // its deadlines are the request timeout; it ends when its legs do
				}
				for _, r := range p.Rooms {
					if !r.Terminal() && r.DeadlineInMS != nil {
						latest = max(latest, *r.DeadlineInMS)
					}
				}
			}
			b := time.Now().Add(time.Duration(latest*float64(time.Millisecond)) + chaosSettleSlack)
			bound = minTime(maxTime(bound, b), settleStart.Add(chaosSettleMax))
		}
		gauges, gaugesErr = readGauges(mc, workers)
		legsOpen, legsErr = routerLegsOpen(mc, base)
		if finalErr == nil && gaugesErr == nil && legsErr == nil && legsOpen == 0 && allTerminal(final) && allQuiet(gauges) {
			break
		}
		if time.Now().After(bound) {
			break
		}
		time.Sleep(chaosSettlePoll)
	}
	settleDur := time.Since(settleStart)

	// (a) Rooms: all ended, none ever seen past its deadline, inspect agrees.
	if finalErr != nil {
		t.Errorf("GET %s/debug/cluster after the load: %v", base, finalErr)
	} else {
		live := 0
		for _, p := range final.Processes {
			if p.Error != "" {
				t.Errorf("%s: its room table could not be read after the load: %s", ob.name(p), p.Error)
			}
			for _, r := range p.Rooms {
				if !r.Terminal() {
					live++
					if live <= chaosDetailsMax {
						t.Errorf("%s: room still %s/%s %s after settling (pinned): %s", ob.name(p), r.State, r.Phase, settleDur.Round(time.Millisecond), roomJSON(r))
					}
				}
			}
		}
		if live > chaosDetailsMax {
			t.Errorf("... %d rooms in all still live after settling", live)
		}
	}
	ob.mu.Lock()
	overdueN, sightings, polls, procErrors := ob.overdueN, slices.Clone(ob.overdue), ob.polls, copyCounts(ob.procErrors)
	maxWaiting, maxPages := copyCounts(ob.maxWaiting), copyCounts(ob.maxPages)
	ob.mu.Unlock()
	for _, s := range sightings {
		t.Errorf("%s: room seen live %s past its deadline at load+%s: %s", s.process,
			time.Duration(-*s.room.DeadlineInMS*float64(time.Millisecond)).Round(time.Millisecond), s.at.Sub(loadStart).Round(time.Millisecond), roomJSON(s.room))
	}
	if overdueN > len(sightings) {
		t.Errorf("... %d overdue sightings in all", overdueN)
	}
	inspectOut, inspectErr := runInspect(base)
	if inspectErr != nil {
		t.Errorf("tandem inspect %s after the load: %v\n%s", base, inspectErr, inspectOut)
	}

	// (b) and (c): every worker quiet, the watchdog never fired.
	if legsErr != nil {
		t.Errorf("read the router's metrics after the load: %v", legsErr)
	} else if legsOpen != 0 {
		t.Errorf("the router still has %g legs open on its workers after settling (tandem_router_worker_inflight)", legsOpen)
	}
	pagesLeaked, watchdog := 0.0, 0.0
	if gaugesErr != nil {
		t.Errorf("read the workers' metrics after the load: %v", gaugesErr)
	}
	for _, w := range workers {
		g, ok := gauges[w.Name]
		if !ok {
			continue
		}
		pagesLeaked += g.pagesUsed
		watchdog += g.failures["deadline"]
		if !g.quiet() {
			t.Errorf("%s is not quiet after settling %s: %s (leaked pages or stuck sequences)", w.Name, settleDur.Round(time.Millisecond), g)
		}
		if d := g.failures["deadline"]; d != 0 {
			t.Errorf("%s: tandem_pd_room_failures_total{reason=\"deadline\"} = %g, want 0 (the watchdog found rooms whose timer did not fire)", w.Name, d)
		}
	}

	// (d) Every request got one outcome; errors only around the kill.
	res := tally(outcomes, kr, loadStart)
	for _, o := range res.pinned {
		t.Errorf("request %s: PINNED: %s", o.req, o.detail)
	}
	for _, o := range res.bad {
		t.Errorf("request %s: no clear outcome: %s", o.req, o.detail)
	}
	for _, o := range res.stray {
		t.Errorf("request %s (load+%s..+%s): error outside the kill window: %s: %s", o.req,
			o.start.Sub(loadStart).Round(time.Millisecond), o.end.Sub(loadStart).Round(time.Millisecond), o.detail, o.message)
	}
	if res.missing > 0 {
		t.Errorf("%d requests have no outcome", res.missing)
	}
	if *chaosKill {
		switch {
		case kr.err != nil:
			t.Errorf("kill and restart %s: %v", victim, kr.err)
		case kr.killed.IsZero():
			t.Errorf("%s was never killed: the load ended before request %d started", victim, killAt)
		case res.afterRecovery < chaosRecoveryMin:
			t.Logf("only %d requests started after %s recovered: not judging whether it took traffic again", res.afterRecovery, victim)
		case gauges[victim].successes == 0:
			t.Errorf("%s took no successful room after its restart (%d requests started after it recovered): %s", victim, res.afterRecovery, gauges[victim])
		}
	}
	routerDone := 0
	if finalErr == nil {
		for _, p := range final.Processes {
			if p.Role == "router" {
				for _, r := range p.Rooms {
					if r.State == debugdoc.StateSucceeded {
						routerDone++
					}
				}
			}
		}
		if routerDone < res.completedSamples {
			t.Errorf("the router recorded %d samples done, but clients got %d complete samples: it records some answered samples as failed", routerDone, res.completedSamples)
		}
	}

	if t.Failed() && final != nil {
		t.Log("evidence: one room per process and final state/reason, with its history:\n" + exampleRooms(final, ob))
	}

	summary := chaosSummary{seed: seed, n: n, conc: conc, frac: frac, kill: *chaosKill, kr: kr, res: res,
		startDur: startDur, loadStart: loadStart, loadDur: loadEnd.Sub(loadStart), settleDur: settleDur, total: time.Since(t0),
		pagesLeaked: pagesLeaked, watchdog: watchdog, legsOpen: legsOpen, legsKnown: legsErr == nil, overdue: overdueN, polls: polls, procErrors: procErrors,
		final: final, names: names, workers: workers, gauges: gauges, inspectOK: inspectErr == nil, routerDone: routerDone,
		maxWaiting: maxWaiting, maxPages: maxPages}
	t.Log("\n" + summary.String())
}

// exampleRooms lists, for each process, the newest room of each final
// state/reason with its history.
func exampleRooms(c *debugdoc.Cluster, ob *observer) string {
	var b strings.Builder
	for _, p := range c.Processes {
		seen := map[string]bool{}
		for i := len(p.Rooms) - 1; i >= 0; i-- {
			r := p.Rooms[i]
			k := r.State
			if r.Reason != "" {
				k += ": " + reasonKey(r.Reason, ob.names)
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			fmt.Fprintf(&b, "  %s [%s] %s\n", ob.name(p), k, roomJSON(r))
		}
	}
	return b.String()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func copyCounts[V int | float64](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func allTerminal(c *debugdoc.Cluster) bool {
	for _, p := range c.Processes {
		if p.Error != "" {
			return false
		}
		for _, r := range p.Rooms {
			if !r.Terminal() {
				return false
			}
		}
	}
	return true
}

func allQuiet(g map[string]workerGauges) bool {
	for _, w := range g {
		if !w.quiet() {
			return false
		}
	}
	return true
}

// readGauges reads every worker's /metrics.
func readGauges(c *http.Client, workers []*cluster.Proc) (map[string]workerGauges, error) {
	out := map[string]workerGauges{}
	var errs []error
	for _, w := range workers {
		ps, err := fetchMetrics(context.Background(), c, w.URL)
		if err == nil {
			var g workerGauges
			if g, err = gaugesOf(ps); err == nil {
				out[w.Name] = g
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", w.Name, err))
	}
	return out, errors.Join(errs...)
}

// routerLegsOpen returns the sum of the router's
// tandem_router_worker_inflight gauges: legs it still has open.
func routerLegsOpen(c *http.Client, base string) (float64, error) {
	ps, err := fetchMetrics(context.Background(), c, base)
	if err != nil {
		return 0, err
	}
	legs := ps.byLabel("tandem_router_worker_inflight", "worker")
	if len(legs) == 0 {
		return 0, fmt.Errorf("the router's /metrics has no tandem_router_worker_inflight")
	}
	sum := 0.0
	for _, v := range legs {
		sum += v
	}
	return sum, nil
}

// runInspect runs `tandem inspect URL` and returns its output; an exit
// status other than 0 is an error.
func runInspect(base string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosInspectTimeout)
	defer cancel()
	var b bytes.Buffer
	cmd := exec.CommandContext(ctx, binPath, "inspect", base)
	cmd.Env = append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+e2eClusterToken)
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// logClusterOutput logs the tail of the cluster's output and writes all of
// it to a file in the temporary folder.
func logClusterOutput(t *testing.T, out *lockedBuffer, seed int64) {
	s := out.String()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("tandem-chaos-%d.log", seed))
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Logf("write the cluster output to %s: %v", path, err)
	} else {
		t.Logf("cluster output (%d bytes) written to %s", len(s), path)
	}
	if len(s) > chaosLogTailBytes {
		s = "...\n" + s[len(s)-chaosLogTailBytes:]
	}
	t.Logf("cluster output:\n%s", s)
}

// chaosTally is the outcomes counted.
type chaosTally struct {
	completed, clearErrors, disconnected int
	completedSamples                     int            // choices of completed requests
	errorKinds                           map[string]int // clear errors by kind
	leaveKinds                           map[string]int // disconnects by moment
	inWindow                             int            // requests in flight during the kill window
	afterRecovery                        int            // requests started after the victim recovered
	pinned, bad, stray                   []outcome      // first chaosDetailsMax of each
	pinnedN, badN, strayN                int
	missing                              int
	latencies                            []time.Duration // completed requests
}

// tally counts outcomes. A clear error is expected only for a request in
// flight between the kill and the victim's recovery (restart healthy plus
// chaosRecoveryGrace); any other is a stray error.
func tally(outcomes []outcome, kr chaosKillRecord, loadStart time.Time) chaosTally {
	res := chaosTally{errorKinds: map[string]int{}, leaveKinds: map[string]int{}}
	var winStart, winEnd time.Time
	if !kr.killed.IsZero() {
		winStart, winEnd = kr.killed, time.Now().Add(time.Hour) // a failed restart: the window never closes
		if !kr.restarted.IsZero() {
			winEnd = kr.restarted.Add(chaosRecoveryGrace)
		}
	}
	keep := func(list *[]outcome, count *int, o outcome) {
		*count++
		if len(*list) < chaosDetailsMax {
			*list = append(*list, o)
		}
	}
	for _, o := range outcomes {
		if o.req == nil {
			res.missing++
			continue
		}
		inWindow := !winStart.IsZero() && o.start.Before(winEnd) && o.end.After(winStart)
		if inWindow {
			res.inWindow++
		}
		if !kr.restarted.IsZero() && o.start.After(winEnd) {
			res.afterRecovery++
		}
		switch o.kind {
		case outcomeCompleted:
			res.completed++
			res.completedSamples += o.req.n
			res.latencies = append(res.latencies, o.end.Sub(o.start))
		case outcomeClearError:
			res.clearErrors++
			res.errorKinds[o.detail]++
			if !inWindow {
				keep(&res.stray, &res.strayN, o)
			}
		case outcomeDisconnected:
			res.disconnected++
			res.leaveKinds[o.req.leave.String()]++
		case outcomePinned:
			keep(&res.pinned, &res.pinnedN, o)
		case outcomeBad:
			keep(&res.bad, &res.badN, o)
		}
	}
	slices.Sort(res.latencies)
	return res
}

// chaosSummary is what the soak prints at the end.
type chaosSummary struct {
	seed                         int64
	n, conc                      int
	frac                         float64
	kill                         bool
	kr                           chaosKillRecord
	res                          chaosTally
	startDur, loadDur, settleDur time.Duration
	total                        time.Duration
	loadStart                    time.Time
	pagesLeaked, watchdog        float64
	legsOpen                     float64
	legsKnown                    bool
	overdue, polls               int
	procErrors                   map[string]int
	final                        *debugdoc.Cluster
	names                        map[string]string
	workers                      []*cluster.Proc
	gauges                       map[string]workerGauges
	inspectOK                    bool
	routerDone                   int
	maxWaiting, maxPages         map[string]float64
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func (s chaosSummary) String() string {
	var b strings.Builder
	r := s.res
	fmt.Fprintf(&b, "=== CHAOS SUMMARY (seed %d, %d requests, %d clients, disconnect %.2f, kill %v)\n", s.seed, s.n, s.conc, s.frac, s.kill)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("requests sent", strconv.Itoa(s.n))
	lat := "-"
	if len(r.latencies) > 0 {
		lat = fmt.Sprintf("latency p50 %s, p99 %s, max %s", percentile(r.latencies, 0.5).Round(time.Millisecond),
			percentile(r.latencies, 0.99).Round(time.Millisecond), r.latencies[len(r.latencies)-1].Round(time.Millisecond))
	}
	row("completed", fmt.Sprintf("%d (%d samples; %s)", r.completed, r.completedSamples, lat))
	row("failed with a clear error", fmt.Sprintf("%d (%d in flight during the kill window in all)", r.clearErrors, r.inWindow))
	for _, k := range sortedKeys(r.errorKinds) {
		row("  "+k, strconv.Itoa(r.errorKinds[k]))
	}
	row("client-disconnected", fmt.Sprintf("%d (%s)", r.disconnected, formatCounts(r.leaveKinds)))
	row("pinned (must be 0)", strconv.Itoa(r.pinnedN))
	row("no clear outcome (must be 0)", strconv.Itoa(r.badN))
	row("errors outside the kill window (must be 0)", strconv.Itoa(r.strayN))
	row("pages leaked (must be 0)", fmt.Sprintf("%g", s.pagesLeaked))
	if s.legsKnown {
		row("router legs still open (must be 0)", fmt.Sprintf("%g", s.legsOpen))
	} else {
		row("router legs still open (must be 0)", "? (router metrics unreadable)")
	}
	row("watchdog firings (must be 0)", fmt.Sprintf("%g", s.watchdog))
	row("rooms seen live past deadline (must be 0)", fmt.Sprintf("%d (in %d polls)", s.overdue, s.polls))
	row("tandem inspect exit 0", strconv.FormatBool(s.inspectOK))
	if len(s.procErrors) > 0 {
		row("unreadable room tables while polling", formatCounts(s.procErrors))
	}
	if s.kill {
		k := s.kr
		switch {
		case k.err != nil:
			row("kill", fmt.Sprintf("%s: %v", k.victim, k.err))
		case k.killed.IsZero():
			row("kill", k.victim+": never (the load ended first)")
		default:
			row("kill", fmt.Sprintf("%s SIGKILLed at load+%s (request %d starting), healthy again %s later; %d requests started after it recovered",
				k.victim, k.killed.Sub(s.loadStart).Round(time.Millisecond), k.startedReqs,
				k.restarted.Sub(k.killed).Round(time.Millisecond), r.afterRecovery))
		}
	}
	row("router records done", fmt.Sprintf("%d (clients got %d complete samples)", s.routerDone, r.completedSamples))
	row("duration", fmt.Sprintf("total %s: cluster start %s, load %s, settle %s", s.total.Round(time.Millisecond),
		s.startDur.Round(time.Millisecond), s.loadDur.Round(time.Millisecond), s.settleDur.Round(time.Millisecond)))
	tw.Flush()

	b.WriteString("worker figures after settling (a restarted worker's counters start at its restart):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKER\tPAGES USED\tRUNNING\tWAITING\tPEAK PAGES/WAITING\tPREEMPTIONS\tROOMS OK\tROOM FAILURES BY REASON")
	for _, w := range s.workers {
		peak := fmt.Sprintf("%g/%g", s.maxPages[w.Name], s.maxWaiting[w.Name])
		g, ok := s.gauges[w.Name]
		if !ok {
			fmt.Fprintf(tw, "  %s\t?\t?\t?\t%s\t?\t?\t(metrics unreadable)\n", w.Name, peak)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%g\t%g\t%g\t%s\t%g\t%g\t%s\n", w.Name, g.pagesUsed, g.running, g.waiting, peak, g.preemptions,
			g.successes, formatCounts(g.failures))
	}
	tw.Flush()

	b.WriteString("rooms by final state/reason:\n")
	if s.final == nil {
		b.WriteString("  (the cluster document could not be read)\n")
	} else {
		for _, p := range s.final.Processes {
			name := p.Worker
			if n, ok := s.names[p.Worker]; ok {
				name = n
			}
			if p.Error != "" {
				fmt.Fprintf(&b, "  %s: error: %s\n", name, p.Error)
				continue
			}
			counts := roomCounts(p, s.names)
			fmt.Fprintf(&b, "  %s (%d rooms):\n", name, len(p.Rooms))
			for _, k := range sortedKeys(counts) {
				fmt.Fprintf(&b, "    %6d  %s\n", counts[k], k)
			}
		}
	}
	b.WriteString("=== END CHAOS SUMMARY\n")
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
