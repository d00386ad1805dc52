package discovery

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"tandem/internal/invariant"
)

// errRunTwice is the error of a second Run of one source.
var errRunTwice = errors.New("discovery: Run called twice on one source; build a new source")

// core is what every source shares: it turns the membership a source
// computed into snapshots, counts and logs the changes, remembers errors,
// and answers Status. A source's Run goroutine is its only writer.
type core struct {
	kind string // "static", "k8s", "dns", "file"
	spec string
	log  *slog.Logger
	met  *metrics
	now  func() time.Time

	mu      sync.Mutex
	started bool
	synced  bool
	members []Member          // sorted by Name
	ignored map[string]ignore // name -> why it is not a worker
	changes int
	lastChg time.Time
	errs    int
	lastErr string
	lastAt  time.Time
	failing bool
	errKind string // the kind of the standing error, so one that repeats logs once
}

func newCore(kind, spec string, log *slog.Logger, met *metrics) *core {
	if log == nil {
		log = slog.Default()
	}
	c := &core{kind: kind, spec: spec, log: log.With("discovery", kind), met: met, now: time.Now, ignored: map[string]ignore{}}
	for _, r := range []Role{RolePrefill, RoleDecode, RoleUnknown} {
		for _, ready := range []string{"true", "false"} {
			met.members.WithLabelValues(kind, string(r), ready).Set(0)
		}
	}
	return c
}

// start marks the source as running; a second call is an error.
func (c *core) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errRunTwice
	}
	c.started = true
	return nil
}

// publish makes ms (any order) the membership and ignored the set of
// things seen that are not workers. It counts and logs every change and
// each newly ignored thing once, and calls update with the whole
// membership when it changed, or when it is the first. It reports whether
// it called update.
func (c *core) publish(ms []Member, ignored map[string]ignore, update func(Snapshot)) bool {
	ms = slices.Clone(ms)
	sortMembers(ms)
	for i := 1; i < len(ms); i++ {
		invariant.Check(ms[i-1].Name != ms[i].Name, "discovery", "%s source produced member %q twice", c.kind, ms[i].Name)
	}
	c.mu.Lock()
	first := !c.synced
	chs := Diff(c.members, ms)
	var newly []string // newly ignored, or for another reason
	for name, ig := range ignored {
		if c.ignored[name] != ig {
			newly = append(newly, name)
		}
	}
	slices.Sort(newly)
	c.ignored = maps.Clone(ignored)
	if c.ignored == nil {
		c.ignored = map[string]ignore{}
	}
	c.members, c.synced = ms, true
	if len(chs) > 0 {
		c.changes += len(chs)
		c.lastChg = c.now()
	}
	c.mu.Unlock()

	for _, name := range newly {
		ig := ignored[name]
		c.met.ignored.WithLabelValues(c.kind, ig.code).Inc()
		c.log.Warn("not a worker; ignored until it changes", "name", name, "reason", ig.why)
	}
	for _, ch := range chs {
		c.met.changes.WithLabelValues(c.kind, string(ch.Member.Role), string(ch.Kind)).Inc()
		m := ch.Member
		switch ch.Kind {
		case Removed:
			c.log.Info("worker left", "name", m.Name, "url", m.URL, "role", m.Role)
		case Updated:
			c.log.Info("worker changed", "name", m.Name, "url", m.URL, "role", m.Role, "ready", m.Ready, "reason", m.Reason,
				"old_url", ch.Prev.URL, "old_role", ch.Prev.Role)
		default:
			c.log.Info("worker "+changeVerb[ch.Kind], "name", m.Name, "url", m.URL, "role", m.Role, "ready", m.Ready, "reason", m.Reason)
		}
	}
	if len(chs) > 0 || first {
		counts := map[[2]string]int{}
		for _, m := range ms {
			counts[[2]string{string(m.Role), boolLabel(m.Ready)}]++
		}
		for _, r := range []Role{RolePrefill, RoleDecode, RoleUnknown} {
			for _, ready := range []string{"true", "false"} {
				c.met.members.WithLabelValues(c.kind, string(r), ready).Set(float64(counts[[2]string{string(r), ready}]))
			}
		}
		update(Snapshot{Source: c.kind, Members: slices.Clone(ms)})
		return true
	}
	return false
}

var changeVerb = map[ChangeKind]string{Added: "joined", BecameReady: "ready", BecameUnready: "not ready"}

// ignore is why something a source saw is not a worker: code is the
// metric's reason (ignoredRole, ignoredPort), why the text for people.
type ignore struct{ code, why string }

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// fail records an error of kind: counted every time, logged only when it
// is new (another kind or another text than the standing one), so a
// source that fails each round logs once. The membership stays.
func (c *core) fail(kind string, err error) {
	c.mu.Lock()
	repeat := c.failing && c.errKind == kind && c.lastErr == err.Error()
	c.mu.Unlock()
	c.note(kind, err, !repeat)
}

// note records an error of kind as the standing one, counts it, and logs
// it when log is set.
func (c *core) note(kind string, err error, log bool) {
	c.met.errors.WithLabelValues(c.kind, kind).Inc()
	c.mu.Lock()
	c.errs++
	c.lastErr, c.lastAt, c.failing, c.errKind = err.Error(), c.now(), true, kind
	c.mu.Unlock()
	if log {
		c.log.Warn("discovery error", "kind", kind, "err", err)
	}
}

// isSynced reports whether the first snapshot went out.
func (c *core) isSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// recovered clears a standing error of kind (any kind when kind is ""),
// logging that the source works again.
func (c *core) recovered(kind string) {
	c.mu.Lock()
	was := c.failing && (kind == "" || c.errKind == kind)
	if was {
		c.failing = false
	}
	c.mu.Unlock()
	if was {
		c.log.Info("discovery works again")
	}
}

// status returns what the source sees now.
func (c *core) status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{Source: c.kind, Spec: c.spec, Synced: c.synced, Members: slices.Clone(c.members),
		Changes: c.changes, LastChange: c.lastChg,
		Errors: c.errs, LastError: c.lastErr, LastErrorAt: c.lastAt, Failing: c.failing}
	if st.Members == nil {
		st.Members = []Member{}
	}
	for _, name := range slices.Sorted(maps.Keys(c.ignored)) {
		st.Ignored = append(st.Ignored, Ignored{Name: name, Reason: c.ignored[name].why})
	}
	return st
}
