package router

import (
	"context"
	"fmt"
	"time"

	"tandem/internal/discovery"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router/pool"
)

// initMembership builds the membership source from Options.Discovery when
// no Source was given. Without either, the pool holds the static lists and
// is synced at once.
func (rt *Router) initMembership() error {
	rt.synced, rt.joinKick = make(chan struct{}), make(chan struct{}, 1)
	rt.src = rt.o.Source
	if rt.src == nil && rt.o.Discovery != nil {
		if kind, _, _ := discovery.ParseSpec(rt.o.Discovery.Spec); kind != discovery.KindStatic {
			c := *rt.o.Discovery
			if c.Logger == nil {
				c.Logger = rt.log.With("discovery", kind)
			}
			if c.Registerer == nil {
				c.Registerer = rt.reg
			}
			if c.Probe == nil {
				c.Probe = discovery.HTTPProbe(rt.probeClient)
			}
			if c.Timeout == 0 {
				c.Timeout = discovery.DefaultDNSTimeout
			}
			src, err := discovery.New(c)
			if err != nil {
				return err
			}
			rt.src = src
		}
	}
	if rt.src == nil {
		rt.srcKind = discovery.KindStatic
		rt.syncOnce.Do(func() { close(rt.synced) })
		return nil
	}
	rt.srcKind = rt.src.Status().Source
	return nil
}

// Synced is closed once the pool holds the source's first membership; at
// once for a static fleet.
func (rt *Router) Synced() <-chan struct{} { return rt.synced }

// RunDiscovery runs the membership source (if any) until ctx ends: each
// snapshot is reconciled into the worker pool (pool.Reconcile), and the
// workers that joined are probed at once instead of at the next health
// round, so that one listed Ready takes legs within a probe. It returns
// nil when ctx ends, and an error when the source cannot start (a file
// that cannot be read, pods that cannot be listed): the caller should
// stop, since the router would never have workers. Without a source it
// waits for ctx and returns nil.
func (rt *Router) RunDiscovery(ctx context.Context) error {
	if rt.src == nil {
		<-ctx.Done()
		return nil
	}
	probeDone := make(chan struct{})
	go func() { // ends with ctx
		defer close(probeDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-rt.joinKick:
				rt.workers.CheckNew(ctx)
			}
		}
	}()
	err := rt.src.Run(ctx, rt.reconcile)
	<-probeDone // Run returned: ctx ended, or it could not start
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("discovery (%s): %w", rt.srcKind, err)
	}
	return nil
}

// reconcile applies one snapshot of the source to the pool.
func (rt *Router) reconcile(s discovery.Snapshot) {
	ms := make([]pool.Member, 0, len(s.Members))
	for _, m := range s.Members {
		ms = append(ms, pool.Member{Name: m.Name, URL: m.URL, Role: pool.Role(m.Role), Ready: m.Ready, Reason: m.Reason})
	}
	joined := rt.workers.Reconcile(s.Source, ms)
	rt.syncOnce.Do(func() { close(rt.synced) })
	if len(joined) > 0 {
		select {
		case rt.joinKick <- struct{}{}:
		default: // a probe round is already due: it takes these too
		}
	}
}

// forgetWorker deletes the router's per-worker metric series of a worker
// the pool dropped (it left and its last leg ended). Called with the
// pool's lock held.
func (rt *Router) forgetWorker(url string, role pool.Role) {
	l := map[string]string{"worker": url, "role": string(role)}
	rt.met.workerRequests.DeletePartialMatch(l)
	rt.met.workerErrors.DeletePartialMatch(l)
	rt.met.legSeconds.DeletePartialMatch(l)
	rt.met.drainRefusals.DeletePartialMatch(l)
}

// membershipDoc is the source's status for /debug/rooms.
func (rt *Router) membershipDoc() *debugdoc.Membership {
	if rt.src == nil {
		return &debugdoc.Membership{Source: discovery.KindStatic, Synced: true}
	}
	st := rt.src.Status()
	d := &debugdoc.Membership{Source: st.Source, Spec: st.Spec, Synced: st.Synced, Changes: st.Changes, Errors: st.Errors,
		LastError: st.LastError, Failing: st.Failing}
	if !st.LastChange.IsZero() {
		d.LastChange = st.LastChange.UTC().Format(time.RFC3339Nano)
	}
	for _, ig := range st.Ignored {
		d.Ignored = append(d.Ignored, ig.Name+": "+ig.Reason)
	}
	return d
}
