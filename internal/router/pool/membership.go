package pool

import (
	"context"
	"time"
)

// pastMax bounds how many workers that left the pool are remembered (for
// a re-add that keeps its breaker and restart count).
const pastMax = 1024

// Member is one worker as a membership source lists it (package
// discovery's Member, without its labels).
type Member struct {
	// Name is the source's name for it ("namespace/pod", an endpoint's
	// name, "ip:port").
	Name string
	// URL is its base URL, scheme://host:port, no trailing slash.
	URL string
	// Role is Prefill or Decode; members of any other role are skipped.
	Role Role
	// Ready says the source lets it take new work; Reason why not.
	Ready  bool
	Reason string
}

// key identifies a worker across membership changes: the same URL in
// another role is another worker.
func key(role Role, url string) string { return string(role) + " " + url }

// Reconcile makes the pool's members those of ms, as source (a kind:
// "k8s", "dns", "file") lists them, and returns the workers that joined
// (new in the pool, or listed again after they left) and have not been
// health-checked since; the caller probes them at once (CheckNew) so that
// they take legs within a probe of being listed.
//
//   - A member not in the pool joins, out of service until a health probe
//     finds it healthy. One that was in the pool before (the same URL and
//     role), still finishing its legs or remembered after it left, comes
//     back as it was: its breaker, health and restart count are kept (a
//     new process on that address is seen by its instance id, and resets
//     them).
//   - A member listed but not Ready (a pod not Ready yet, or terminating)
//     gets no new legs; its legs finish.
//   - A worker no longer listed gets no new legs; it stays in the pool,
//     probed and shown, until its last leg ends, then it is dropped (its
//     metric series with it).
//
// Members with another role, an empty URL or a URL twice are skipped.
func (p *Pool) Reconcile(source string, ms []Member) (joined []*Worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	want := make(map[string]Member, len(ms))
	for _, m := range ms {
		if (m.Role != Prefill && m.Role != Decode) || m.URL == "" {
			continue
		}
		if _, dup := want[key(m.Role, m.URL)]; dup {
			continue
		}
		want[key(m.Role, m.URL)] = m
	}
	// Workers that left, or changed their Ready.
	for _, w := range p.workersLocked() {
		m, ok := want[key(w.role, w.url)]
		switch {
		case !ok && !w.gone:
			w.gone = true
			p.met.membership.WithLabelValues(string(w.role), "leave").Inc()
			p.log.Info("worker left the membership: no new legs; its legs in flight finish", "worker", w.url, "role", w.role,
				"name", w.name, "source", w.source, "inflight", w.inflight)
			if w.inflight == 0 {
				p.dropLocked(w)
			}
		case ok && w.gone:
			w.gone = false // listed again while its legs finish: the same worker
			p.rejoinLocked(w, m, source, now)
			joined = append(joined, w)
		case ok:
			if w.listedReady != m.Ready {
				ch := "unready"
				if m.Ready {
					ch = "ready"
				}
				p.met.membership.WithLabelValues(string(w.role), ch).Inc()
				p.log.Info("worker's readiness in its source changed", "worker", w.url, "role", w.role, "name", m.Name,
					"ready", m.Ready, "reason", m.Reason)
				if m.Ready {
					w.since = now
					if !w.healthy { // probe it now: it may have just started
						w.checked = false
						joined = append(joined, w)
					}
				}
			}
			w.name, w.source, w.listedReady, w.listReason = m.Name, source, m.Ready, m.Reason
		}
		delete(want, key(w.role, w.url))
	}
	// Members that are new to the pool, in the sources' order.
	for _, m := range ms {
		if _, ok := want[key(m.Role, m.URL)]; !ok {
			continue
		}
		delete(want, key(m.Role, m.URL))
		w := p.past[key(m.Role, m.URL)]
		if w != nil {
			delete(p.past, key(m.Role, m.URL))
			w.dropped = false
			w.gone = false
		} else {
			w = &Worker{url: m.URL, role: m.Role, problem: "not checked yet"}
		}
		p.byRo[m.Role] = append(p.byRo[m.Role], w)
		p.rejoinLocked(w, m, source, now)
		p.exportLocked(w)
		joined = append(joined, w)
	}
	return joined
}

// rejoinLocked records a worker's (re)joining from m. Callers hold mu.
func (p *Pool) rejoinLocked(w *Worker, m Member, source string, now time.Time) {
	w.name, w.source, w.since, w.listedReady, w.listReason = m.Name, source, now, m.Ready, m.Reason
	w.checked = false
	p.met.membership.WithLabelValues(string(w.role), "join").Inc()
	p.log.Info("worker joined", "worker", w.url, "role", w.role, "name", m.Name, "source", source, "ready", m.Ready,
		"breaker", w.br.state, "restarts", w.restarts)
}

// dropLocked removes a worker that left and holds no leg, remembering it
// in past, and deletes its metric series. Callers hold mu.
func (p *Pool) dropLocked(w *Worker) {
	if w.dropped {
		return
	}
	ws := p.byRo[w.role]
	for i, x := range ws {
		if x == w {
			p.byRo[w.role] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	w.dropped = true
	p.dropSeq++
	w.droppedSeq = p.dropSeq
	p.past[key(w.role, w.url)] = w
	if len(p.past) > pastMax { // forget the one dropped longest ago
		var oldest *Worker
		for _, x := range p.past {
			if oldest == nil || x.droppedSeq < oldest.droppedSeq {
				oldest = x
			}
		}
		delete(p.past, key(oldest.role, oldest.url))
	}
	u, r := w.url, string(w.role)
	p.met.workerHealthy.DeleteLabelValues(u, r)
	p.met.workerDraining.DeleteLabelValues(u, r)
	p.met.workerInflight.DeleteLabelValues(u, r)
	p.met.breakerState.DeleteLabelValues(u, r)
	for _, s := range []breakerState{breakerClosed, breakerHalfOpen, breakerOpen} {
		p.met.breakerTransitions.DeleteLabelValues(u, r, s.String())
	}
	p.met.membership.WithLabelValues(r, "drop").Inc()
	if p.onDrop != nil {
		p.onDrop(u, w.role)
	}
	p.log.Info("worker dropped: it left and its legs ended", "worker", u, "role", w.role, "name", w.name)
}

// seeInstanceLocked records the instance id a worker reported. Another
// one than before on the same address is a restart: counted, logged, and
// its breaker closed (the process whose legs failed is gone). Callers
// hold mu.
func (p *Pool) seeInstanceLocked(w *Worker, instance string) {
	if instance == "" || instance == w.instance {
		return
	}
	if w.instance != "" {
		w.restarts++
		p.log.Info("worker restarted: a new process on its address", "worker", w.url, "role", w.role,
			"old_instance", w.instance, "instance", instance, "restarts", w.restarts)
		if w.br.state != breakerClosed {
			p.moveLocked(w, breakerClosed)
		} else {
			w.br.reset()
		}
	}
	w.instance = instance
}

// CheckNew probes, concurrently, the workers that joined and have not
// been probed since (as Check does), and waits for them.
func (p *Pool) CheckNew(ctx context.Context) {
	p.mu.Lock()
	var ws []*Worker
	for _, w := range p.workersLocked() {
		if !w.checked && !w.gone {
			ws = append(ws, w)
		}
	}
	p.mu.Unlock()
	if len(ws) > 0 {
		p.check(ctx, ws)
	}
}
