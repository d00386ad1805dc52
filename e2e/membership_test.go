package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"tandem/internal/cluster"
	"tandem/internal/pd/debugdoc"
)

// The scaling test's bounds.
const (
	scaleJoinMax  = time.Second            // listed (and Ready) to its first room
	scaleHold     = 4 * time.Second        // load on the scaled-out fleet
	scaleLeftMax  = 10 * time.Second       // removed from the file to gone from the router
	scalePoll     = 20 * time.Millisecond  // how often the test looks
	scaleSeenMax  = 5 * time.Second        // a removed worker seen left by the router
	scaleFileMax  = 500 * time.Millisecond // the file source's default poll, for the report
	scaleLegsWait = 10 * time.Second       // the longest the scale-in waits for decode-1 to carry streams
)

// writeEndpoints writes the llm-d endpoint list of ps to path (by rename,
// as an editor or a ConfigMap update does).
func writeEndpoints(path string, ps ...*cluster.Proc) error {
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, p := range ps {
		hostPort := strings.TrimPrefix(p.URL, "http://")
		i := strings.LastIndexByte(hostPort, ':')
		fmt.Fprintf(&b, "- name: %s\n  address: %s\n  port: %q\n  labels: {llm-d.ai/role: %s}\n", p.Name, hostPort[:i], hostPort[i+1:], p.Role)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// scaleRecord is what one worker's join or leave took.
type scaleRecord struct {
	name, change string
	took         time.Duration // join: listed to its first room; leave: removed to dropped by the router
	seen         time.Duration // leave: removed to shown left by the router
	legsAtLeave  int           // the router's legs on it when it was first seen left
	rooms        int           // leave: the rooms its table held when the router dropped it
}

// TestScaleByFileDiscovery scales a fleet 1P1D -> 2P2D -> 1P1D by
// rewriting the router's endpoint file (--discovery file:PATH) under a
// steady open-loop load at 60% of the 1P1D capacity measured first: each
// new worker takes a room within a second of being listed (it is Ready
// already), each removed one gets no new room, finishes its rooms and is
// dropped by the router, every request completes whole, no room is seen
// past its deadline, and every worker's pages come back.
func TestScaleByFileDiscovery(t *testing.T) {
	setup(t)
	path := filepath.Join(t.TempDir(), "workers.yaml")
	var out lockedBuffer
	var prefill0, decode0, prefill1, decode1 *cluster.Proc
	cl := startCluster(t, &out, cluster.Options{Model: modelPath, Prefill: 2, Decode: 2, Routers: 1,
		DrainSettle: fleetSettle, DrainTimeout: fleetDrainTimeout,
		WorkerArgs:      []string{"--threads", "1", "--prefix-cache=false"},
		RouterArgs:      []string{"--pd-threshold", "0"},
		RouterDiscovery: "file:" + path,
		BeforeRouters: func(ws []*cluster.Proc) error {
			for _, p := range ws {
				switch p.Name {
				case "prefill-0":
					prefill0 = p
				case "prefill-1":
					prefill1 = p
				case "decode-0":
					decode0 = p
				case "decode-1":
					decode1 = p
				}
			}
			return writeEndpoints(path, prefill0, decode0) // 1P1D
		},
	})
	base := cl.RouterURL()
	router := cl.Routers()[0].URL
	capacity := measureCapacity(t, base)
	rate := fleetLoadShare * capacity
	ob, stopObserving := fleetObserver(t, cl)
	load, err := startOpenLoop(base, rate)
	if err != nil {
		t.Fatal(err)
	}
	loadStart := time.Now()
	time.Sleep(fleetWarmup)
	c := &http.Client{Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Scale out: both new workers listed at once; each must take a room
	// within scaleJoinMax.
	var recs []scaleRecord
	if err := writeEndpoints(path, prefill0, prefill1, decode0, decode1); err != nil {
		t.Fatal(err)
	}
	listed := time.Now()
	for _, p := range []*cluster.Proc{prefill1, decode1} {
		for {
			doc, err := roomTable(ctx, c, p.URL)
			if err == nil && len(doc.Rooms) > 0 {
				break
			}
			if time.Since(listed) > 30*time.Second {
				t.Fatalf("%s took no room within 30s of being listed", p.Name)
			}
			time.Sleep(scalePoll)
		}
		r := scaleRecord{name: p.Name, change: "join", took: time.Since(listed)}
		if r.took > scaleJoinMax {
			t.Errorf("%s took its first room %s after it was listed (and Ready), want within %s", p.Name, r.took.Round(time.Millisecond), scaleJoinMax)
		}
		recs = append(recs, r)
	}
	time.Sleep(scaleHold)

	// Scale in: the new workers leave; they must get no new room, finish
	// theirs and be dropped. The file is rewritten while decode-1 carries
	// streams (up to scaleLegsWait), so that its drain has work to finish.
	legsAtWrite := 0
	for deadline := time.Now().Add(scaleLegsWait); time.Now().Before(deadline); time.Sleep(scalePoll) {
		doc, err := roomTable(ctx, c, router)
		if err != nil {
			continue
		}
		if i := slices.IndexFunc(doc.Workers, func(w debugdoc.Worker) bool { return w.URL == decode1.URL }); i >= 0 && doc.Workers[i].Inflight >= 2 {
			legsAtWrite = doc.Workers[i].Inflight
			break
		}
	}
	if err := writeEndpoints(path, prefill0, decode0); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	leaving := map[string]*scaleRecord{}
	for _, p := range []*cluster.Proc{prefill1, decode1} {
		leaving[p.URL] = &scaleRecord{name: p.Name, change: "leave", legsAtLeave: -1}
	}
	for gone := 0; gone < len(leaving); {
		if time.Since(removed) > scaleLeftMax {
			var still []string
			for _, r := range leaving {
				if r.took == 0 {
					still = append(still, fmt.Sprintf("%s (legs when seen left: %d)", r.name, r.legsAtLeave))
				}
			}
			t.Fatalf("the router did not drop the removed workers within %s: %s", scaleLeftMax, strings.Join(still, ", "))
		}
		doc, err := roomTable(ctx, c, router)
		if err != nil {
			time.Sleep(scalePoll)
			continue
		}
		gone = 0
		for u, r := range leaving {
			i := slices.IndexFunc(doc.Workers, func(w debugdoc.Worker) bool { return w.URL == u })
			switch {
			case i >= 0 && doc.Workers[i].Left && r.legsAtLeave < 0:
				r.seen, r.legsAtLeave = time.Since(removed), doc.Workers[i].Inflight
			case i < 0:
				if r.took == 0 {
					r.took = time.Since(removed)
					if r.legsAtLeave < 0 {
						r.seen, r.legsAtLeave = r.took, 0
					}
					wd, err := roomTable(ctx, c, u)
					if err != nil {
						t.Fatalf("read %s's rooms: %v", r.name, err)
					}
					r.rooms = len(wd.Rooms)
				}
				gone++
			}
		}
		time.Sleep(scalePoll)
	}
	time.Sleep(fleetCooldown)
	outcomes := load.finish()
	loadDur := time.Since(loadStart)
	stopObserving()

	for _, p := range []*cluster.Proc{prefill1, decode1} {
		r := leaving[p.URL]
		if r.seen > scaleSeenMax {
			t.Errorf("%s was seen left by the router %s after its removal, want within %s", p.Name, r.seen, scaleSeenMax)
		}
		doc, err := roomTable(context.Background(), c, p.URL)
		if err != nil {
			t.Fatalf("read %s's rooms: %v", p.Name, err)
		}
		if doc.Live != 0 {
			t.Errorf("%s still has %d live rooms after it was removed and the load ended", p.Name, doc.Live)
		}
		if len(doc.Rooms) != r.rooms {
			t.Errorf("%s got %d rooms after the router dropped it (%d then, %d now): a removed worker must get none",
				p.Name, len(doc.Rooms)-r.rooms, r.rooms, len(doc.Rooms))
		}
		recs = append(recs, *r)
	}

	completed, failures := failedRequests(t, outcomes, loadStart)
	pages := fleetQuiet(t, cl, ob)

	var b strings.Builder
	fmt.Fprintf(&b, "=== SCALE BY FILE DISCOVERY 1P1D -> 2P2D -> 1P1D: %d requests at %.2f/s (%.0f%% of %.2f/s measured on 1P1D) over %s: "+
		"%d completed, %d failed; %g pages in use after; membership changes %g\n",
		len(outcomes), rate, 100*fleetLoadShare, capacity, loadDur.Round(time.Millisecond), completed, len(failures), pages,
		routerMetric(cl, "tandem_router_membership_changes_total"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tCHANGE\tLISTED->FIRST ROOM / REMOVED->DROPPED\tREMOVED->SEEN LEFT\tLEGS WHEN SEEN LEFT\tROOMS IT SERVED")
	for _, r := range recs {
		seen, legs, rooms := "-", "-", "-"
		if r.change == "leave" {
			seen, legs, rooms = r.seen.Round(time.Millisecond).String(), fmt.Sprint(r.legsAtLeave), fmt.Sprint(r.rooms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.change, r.took.Round(time.Millisecond), seen, legs, rooms)
	}
	tw.Flush()
	fmt.Fprintf(&b, "(the file source checks the file every %s; a joining worker is probed at once; decode-1 carried %d streams when the file dropped it)\n",
		scaleFileMax, legsAtWrite)
	t.Log("\n" + b.String())
}
