package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"tandem/internal/inspect"
	"tandem/internal/pd/debugdoc"
)

// The chaos soak's view of the cluster: the router's /debug/cluster (its
// own request records and every worker's /debug/rooms) polled during the
// load, and each worker's /metrics read at the end.

// overdueSighting is a room seen live past its deadline.
type overdueSighting struct {
	at      time.Time
	process string
	room    debugdoc.Room
}

// observer polls /debug/cluster and remembers what must never be seen.
type observer struct {
	base   string
	names  map[string]string // worker URL → process name
	client *http.Client

	mu         sync.Mutex
	polls      int
	pollErrors int            // whole fetches that failed
	procErrors map[string]int // per process: its table could not be read (a killed worker)
	overdue    []overdueSighting
	overdueN   int
	maxLive    map[string]int     // most live rooms seen per process
	workers    map[string]string  // process name → URL, for /metrics
	maxWaiting map[string]float64 // most sequences seen waiting for admission, per worker
	maxPages   map[string]float64 // most KV pages seen in use, per worker
}

// overdueKept bounds the sightings kept for the report.
const overdueKept = 20

func newObserver(base string, names map[string]string, workers map[string]string) *observer {
	return &observer{base: base, names: names, workers: workers, client: &http.Client{Timeout: 15 * time.Second},
		procErrors: map[string]int{}, maxLive: map[string]int{}, maxWaiting: map[string]float64{}, maxPages: map[string]float64{}}
}

// pollMetrics reads every worker's /metrics once and records the most
// waiting sequences and used pages seen; an unreadable worker is skipped.
func (ob *observer) pollMetrics(ctx context.Context) {
	for name, url := range ob.workers {
		ps, err := fetchMetrics(ctx, ob.client, url)
		if err != nil {
			continue
		}
		w, _ := ps.value("tandem_num_requests_waiting")
		p, _ := ps.value("tandem_kv_pages_used")
		ob.mu.Lock()
		ob.maxWaiting[name] = max(ob.maxWaiting[name], w)
		ob.maxPages[name] = max(ob.maxPages[name], p)
		ob.mu.Unlock()
	}
}

// name returns the process name of a /debug/cluster entry.
func (ob *observer) name(p debugdoc.Rooms) string {
	if n, ok := ob.names[p.Worker]; ok {
		return n
	}
	return p.Worker
}

// poll fetches /debug/cluster once and records overdue rooms, unreadable
// tables and live-room counts.
func (ob *observer) poll(ctx context.Context) (*debugdoc.Cluster, error) {
	raw, err := inspect.FetchCluster(ctx, ob.client, ob.base)
	var cl *debugdoc.Cluster
	if err == nil {
		cl, err = inspect.ParseCluster(raw)
	}
	now := time.Now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.polls++
	if err != nil {
		ob.pollErrors++
		return nil, err
	}
	for _, p := range cl.Processes {
		name := ob.name(p)
		if p.Error != "" {
			ob.procErrors[name]++
			continue
		}
		live := 0
		for _, r := range p.Rooms {
			if !r.Terminal() {
				live++
			}
			if r.Overdue() {
				ob.overdueN++
				if len(ob.overdue) < overdueKept {
					ob.overdue = append(ob.overdue, overdueSighting{at: now, process: name, room: r})
				}
			}
		}
		ob.maxLive[name] = max(ob.maxLive[name], live)
	}
	return cl, nil
}

// run polls every interval until ctx is done.
func (ob *observer) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ob.poll(ctx)
		ob.pollMetrics(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// roomJSON renders a room with its history for failure messages.
func roomJSON(r debugdoc.Room) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("%+v", r)
	}
	return string(b)
}

// promSample is one sample of a Prometheus text exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// promSamples is a parsed /metrics document.
type promSamples []promSample

// value returns the sample of name whose labels include want (pairs of
// name, value), and whether there is one.
func (ps promSamples) value(name string, want ...string) (float64, bool) {
	for _, s := range ps {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && s.labels[want[i]] == want[i+1]
		}
		if ok {
			return s.value, true
		}
	}
	return 0, false
}

// byLabel returns name's samples keyed by the value of label.
func (ps promSamples) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ps {
		if s.name == name {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// parseProm parses the Prometheus text format: "name{l="v",...} value
// [timestamp]" lines; comments and blank lines are skipped.
func parseProm(r io.Reader) (promSamples, error) {
	var out promSamples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := promSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("metrics line %d %q: no value", n, line)
		}
		s.name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, err := parseLabels(line[1:], s.labels)
			if err != nil {
				return nil, fmt.Errorf("metrics line %d: %w", n, err)
			}
			line = rest
		}
		f := strings.Fields(line)
		if len(f) < 1 {
			return nil, fmt.Errorf("metrics line %d: no value", n)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: value %q: %w", n, f[0], err)
		}
		s.value = v
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads `l="v",...}` into into and returns what follows '}'.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq < 0 {
			return "", fmt.Errorf("labels %q: want name=\"value\"", clip(s, 80))
		}
		name := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		for {
			if s == "" {
				return "", fmt.Errorf("label %s: unterminated value", name)
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				switch s[0] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[0])
				}
				s = s[1:]
				continue
			}
			v.WriteByte(c)
		}
		into[name] = v.String()
	}
}

// fetchMetrics reads and parses url/metrics.
func fetchMetrics(ctx context.Context, c *http.Client, url string) (promSamples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("get %s/metrics: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s/metrics: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s/metrics: %s", url, resp.Status)
	}
	ps, err := parseProm(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("get %s/metrics: %w", url, err)
	}
	return ps, nil
}

// workerGauges are the figures that must all be zero on a quiet worker.
type workerGauges struct {
	pagesUsed, running, waiting float64
	queues                      map[string]float64 // tandem_pd_queue_rooms by queue
	failures                    map[string]float64 // tandem_pd_room_failures_total by reason
	successes                   float64
	preemptions                 float64
	completions                 float64 // tandem_http_requests_total{endpoint="completions"|"chat"} answered
}

// gaugesOf extracts workerGauges; a gauge missing from the document is an
// error, since a leak could hide behind it.
func gaugesOf(ps promSamples) (workerGauges, error) {
	var g workerGauges
	for _, m := range []struct {
		name string
		v    *float64
	}{{"tandem_kv_pages_used", &g.pagesUsed}, {"tandem_num_requests_running", &g.running},
		{"tandem_num_requests_waiting", &g.waiting}} {
		v, ok := ps.value(m.name)
		if !ok {
			return g, fmt.Errorf("metric %s is missing", m.name)
		}
		*m.v = v
	}
	g.queues = ps.byLabel("tandem_pd_queue_rooms", "queue")
	if len(g.queues) == 0 {
		return g, fmt.Errorf("metric tandem_pd_queue_rooms is missing")
	}
	g.failures = ps.byLabel("tandem_pd_room_failures_total", "reason")
	g.successes, _ = ps.value("tandem_pd_room_successes_total")
	g.preemptions, _ = ps.value("tandem_preemptions_total")
	for ep, v := range ps.byLabel("tandem_http_requests_total", "endpoint") {
		if ep == "completions" || ep == "chat" {
			g.completions += v
		}
	}
	return g, nil
}

// quiet reports whether nothing is held: no page, no sequence, no live room.
func (g workerGauges) quiet() bool {
	q := g.pagesUsed == 0 && g.running == 0 && g.waiting == 0
	for _, v := range g.queues {
		q = q && v == 0
	}
	return q
}

func (g workerGauges) String() string {
	return fmt.Sprintf("pages_used=%g running=%g waiting=%g queues=%s", g.pagesUsed, g.running, g.waiting, formatCounts(g.queues))
}

// formatCounts writes a map as "k=v k=v" in key order; "-" when empty.
func formatCounts[V int | float64](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

var (
	reURL  = regexp.MustCompile(`https?://[0-9A-Za-z.\-\[\]:]+`)
	reAddr = regexp.MustCompile(`\b[0-9]{1,3}(\.[0-9]{1,3}){3}:[0-9]+\b`)
	reHex  = regexp.MustCompile(`\b[0-9a-f]{16,}\b`)
)

// reasonKey shortens a room's failure reason for counting: worker URLs
// become process names, addresses and ids placeholders.
func reasonKey(reason string, names map[string]string) string {
	s := reURL.ReplaceAllStringFunc(reason, func(u string) string {
		u, colon := strings.CutSuffix(u, ":")
		n, ok := names[u]
		if !ok {
			n = "<url>"
		}
		if colon {
			n += ":"
		}
		return n
	})
	s = reAddr.ReplaceAllString(s, "<addr>")
	s = reHex.ReplaceAllString(s, "<id>")
	return clip(s, 110)
}

// roomCounts counts a process's rooms by "state" or "state: reason".
func roomCounts(p debugdoc.Rooms, names map[string]string) map[string]int {
	out := map[string]int{}
	for _, r := range p.Rooms {
		k := r.State
		if r.Reason != "" {
			k += ": " + reasonKey(r.Reason, names)
		}
		out[k]++
	}
	return out
}
