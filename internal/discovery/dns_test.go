package discovery

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeResolver answers from maps the test changes; block makes lookups
// wait for their context.
type fakeResolver struct {
	mu    sync.Mutex
	ips   map[string][]string
	srv   map[string][]*net.SRV
	err   error
	block bool
	calls int
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls++
	block, err, ips := r.block, r.err, r.ips[host]
	r.mu.Unlock()
	if network != "ip" {
		return nil, errors.New("unexpected network " + network)
	}
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if ips == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func (r *fakeResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if service != "" || proto != "" {
		return "", nil, errors.New("unexpected service or proto")
	}
	if r.err != nil {
		return "", nil, r.err
	}
	srvs, ok := r.srv[name]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return name, srvs, nil
}

func (r *fakeResolver) set(f func(r *fakeResolver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// fakeProbe answers role probes from a map and counts them.
type fakeProbe struct {
	mu    sync.Mutex
	roles map[string]Role  // base URL -> role
	errs  map[string]error // base URL -> failure
	calls map[string]int
}

func newFakeProbe(roles map[string]Role) *fakeProbe {
	return &fakeProbe{roles: roles, errs: map[string]error{}, calls: map[string]int{}}
}

func (p *fakeProbe) probe(ctx context.Context, base string) (Role, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[base]++
	if err := p.errs[base]; err != nil {
		return "", err
	}
	if r, ok := p.roles[base]; ok {
		return r, nil
	}
	return "", errors.New("connection refused")
}

func (p *fakeProbe) set(f func(p *fakeProbe)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *fakeProbe) callsOf(base string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[base]
}

const svc = "tandem-workers.ns.svc.cluster.local"

func newDNSTest(t *testing.T, res *fakeResolver, pr *fakeProbe, port int) (*dnsSource, *recorder, func() error, *logRecorder) {
	t.Helper()
	c, _, lr := testCommon()
	name := svc
	if port == 0 {
		name = "_http._tcp." + svc
	}
	s, err := NewDNS(DNSOptions{Common: c, Name: name, Port: port, Interval: 2 * time.Second, Timeout: time.Second,
		Probe: pr.probe, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	rec, stop := run(t, s)
	synctest.Wait() // the first round runs at once
	return s.(*dnsSource), rec, stop, lr
}

// rounds lets n more rounds run.
func rounds(n int) {
	time.Sleep(time.Duration(n) * 2 * time.Second)
	synctest.Wait()
}

// TestDNSMembership: addresses are probed once, when new; a failed probe
// keeps the address out (a member with no role, not Ready) and is retried
// each round; an address that goes leaves, and is probed again if it
// comes back; a new order of the same answer delivers nothing.
func TestDNSMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res := &fakeResolver{ips: map[string][]string{svc: {"10.0.0.1", "10.0.0.2"}}}
		pr := newFakeProbe(map[string]Role{"http://10.0.0.1:8200": RoleDecode, "http://10.0.0.2:8200": RolePrefill,
			"http://10.0.0.3:8200": RoleDecode})
		src, rec, stop, _ := newDNSTest(t, res, pr, 8200)
		wantMembers(t, "start", rec.last(t).Members,
			"10.0.0.1:8200 http://10.0.0.1:8200 decode ready", "10.0.0.2:8200 http://10.0.0.2:8200 prefill ready")

		rounds(5)
		if rec.count() != 1 || pr.callsOf("http://10.0.0.1:8200") != 1 || pr.callsOf("http://10.0.0.2:8200") != 1 {
			t.Fatalf("after 5 unchanged rounds: %d snapshots, probes %v", rec.count(), pr.calls)
		}

		pr.set(func(p *fakeProbe) { p.errs["http://10.0.0.3:8200"] = errors.New("503 starting") })
		res.set(func(r *fakeResolver) { r.ips[svc] = []string{"10.0.0.3", "10.0.0.2", "10.0.0.1"} })
		rounds(1)
		ms := rec.last(t).Members
		if len(ms) != 3 || ms[2].Role != RoleUnknown || ms[2].Ready || !strings.Contains(ms[2].Reason, "503 starting") {
			t.Fatalf("failed probe: %q", brief(ms))
		}
		if got := counter(t, src, "errors", "probe"); got != 1 {
			t.Errorf("errors{probe} = %v", got)
		}
		rounds(2)
		if n := pr.callsOf("http://10.0.0.3:8200"); n != 3 {
			t.Errorf("the failed address was probed %d times in 3 rounds, want 3", n)
		}
		if rec.count() != 2 {
			t.Errorf("%d snapshots; a probe that fails the same way again changed the membership", rec.count())
		}
		if st := src.Status(); !st.Failing || st.Errors != 3 {
			t.Errorf("Status while a probe fails: %+v", st)
		}

		pr.set(func(p *fakeProbe) { delete(p.errs, "http://10.0.0.3:8200") })
		rounds(1)
		wantMembers(t, "probe works", rec.last(t).Members,
			"10.0.0.1:8200 http://10.0.0.1:8200 decode ready", "10.0.0.2:8200 http://10.0.0.2:8200 prefill ready",
			"10.0.0.3:8200 http://10.0.0.3:8200 decode ready")
		if st := src.Status(); st.Failing {
			t.Errorf("still failing: %+v", st)
		}

		res.set(func(r *fakeResolver) { r.ips[svc] = []string{"10.0.0.2", "10.0.0.3"} })
		rounds(1)
		wantMembers(t, "10.0.0.1 gone", rec.last(t).Members,
			"10.0.0.2:8200 http://10.0.0.2:8200 prefill ready", "10.0.0.3:8200 http://10.0.0.3:8200 decode ready")
		res.set(func(r *fakeResolver) { r.ips[svc] = []string{"10.0.0.3", "10.0.0.1", "10.0.0.2"} })
		rounds(1)
		if n := pr.callsOf("http://10.0.0.1:8200"); n != 2 {
			t.Errorf("an address that came back was probed %d times in all, want 2", n)
		}
		if got := counter(t, src, "changes", "decode", "remove"); got != 1 {
			t.Errorf("changes{decode,remove} = %v", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestDNSFailures: a failed or timed-out lookup keeps the membership (the
// error logged once however often it repeats); a name that does not
// exist empties it.
func TestDNSFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res := &fakeResolver{ips: map[string][]string{svc: {"10.0.0.1"}}}
		pr := newFakeProbe(map[string]Role{"http://10.0.0.1:8200": RoleDecode})
		src, rec, _, lr := newDNSTest(t, res, pr, 8200)
		want := "10.0.0.1:8200 http://10.0.0.1:8200 decode ready"

		res.set(func(r *fakeResolver) { r.err = &net.DNSError{Err: "server misbehaving", Name: svc, IsTemporary: true} })
		rounds(3)
		wantMembers(t, "lookup fails", rec.last(t).Members, want)
		if got := counter(t, src, "errors", "resolve"); got != 3 {
			t.Errorf("errors{resolve} = %v after 3 failed rounds", got)
		}
		if n := len(lr.matching("discovery error", "server misbehaving")); n != 1 {
			t.Errorf("%d log lines for 3 failed lookups, want 1", n)
		}

		res.set(func(r *fakeResolver) { r.err, r.block = nil, true })
		start := time.Now()
		rounds(1)
		time.Sleep(time.Second) // the lookup's Timeout
		synctest.Wait()
		wantMembers(t, "lookup times out", rec.last(t).Members, want)
		if got := counter(t, src, "errors", "resolve"); got < 4 {
			t.Errorf("errors{resolve} = %v: the timeout was not counted", got)
		}
		if st := src.Status(); !st.Failing || !strings.Contains(st.LastError, "deadline exceeded") || st.LastErrorAt.Sub(start) != 3*time.Second {
			t.Errorf("Status after a timeout: %+v", st)
		}

		res.set(func(r *fakeResolver) { r.block = false })
		rounds(1)
		if st := src.Status(); st.Failing || rec.count() != 1 {
			t.Errorf("after recovery: failing %v, %d snapshots", st.Failing, rec.count())
		}
		if n := len(lr.matching("discovery works again")); n != 1 {
			t.Errorf("%d recovery lines", n)
		}

		res.set(func(r *fakeResolver) { delete(r.ips, svc) })
		rounds(1)
		wantMembers(t, "NXDOMAIN", rec.last(t).Members)
		if st := src.Status(); st.Failing {
			t.Errorf("NXDOMAIN counted as a failure: %+v", st)
		}
	})
}

// TestDNSFirstLookupFails: the first snapshot comes even when the first
// lookup fails, empty; later rounds fill it.
func TestDNSFirstLookupFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res := &fakeResolver{ips: map[string][]string{svc: {"10.0.0.1"}}, err: errors.New("no route")}
		pr := newFakeProbe(map[string]Role{"http://10.0.0.1:8200": RolePrefill})
		_, rec, _, _ := newDNSTest(t, res, pr, 8200)
		if rec.count() != 1 || len(rec.last(t).Members) != 0 {
			t.Fatalf("first snapshot: %d, %q", rec.count(), brief(rec.last(t).Members))
		}
		res.set(func(r *fakeResolver) { r.err = nil })
		rounds(1)
		wantMembers(t, "then", rec.last(t).Members, "10.0.0.1:8200 http://10.0.0.1:8200 prefill ready")
	})
}

// TestDNSSRV: without a port the name's SRV records give the targets and
// their ports; a target that no longer resolves is skipped.
func TestDNSSRV(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		name := "_http._tcp." + svc
		res := &fakeResolver{
			ips: map[string][]string{"a." + svc: {"10.0.0.1"}, "b." + svc: {"fd00::2"}},
			srv: map[string][]*net.SRV{name: {{Target: "a." + svc + ".", Port: 8200}, {Target: "b." + svc + ".", Port: 8300},
				{Target: "gone." + svc + ".", Port: 8200}}},
		}
		pr := newFakeProbe(map[string]Role{"http://10.0.0.1:8200": RolePrefill, "http://[fd00::2]:8300": RoleDecode})
		src, rec, _, _ := newDNSTest(t, res, pr, 0)
		wantMembers(t, "SRV", rec.last(t).Members,
			"10.0.0.1:8200 http://10.0.0.1:8200 prefill ready", "[fd00::2]:8300 http://[fd00::2]:8300 decode ready")
		if spec := src.Status().Spec; !strings.Contains(spec, "(SRV)") {
			t.Errorf("spec %q", spec)
		}
	})
}

// TestDNSProbeWrongRole: a probe that answers a role other than prefill or
// decode is a failed probe.
func TestDNSProbeWrongRole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res := &fakeResolver{ips: map[string][]string{svc: {"10.0.0.1"}}}
		pr := newFakeProbe(map[string]Role{"http://10.0.0.1:8200": "router"})
		_, rec, _, _ := newDNSTest(t, res, pr, 8200)
		ms := rec.last(t).Members
		if len(ms) != 1 || ms[0].Ready || !strings.Contains(ms[0].Reason, `"router"`) {
			t.Errorf("members %q", brief(ms))
		}
	})
}

// TestDNSManyProbesBounded: many new addresses are probed at most
// probesMax at a time, and all of them are.
func TestDNSManyProbesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ips []string
		roles := map[string]Role{}
		for i := range 40 {
			ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})
			ips = append(ips, ip.String())
			roles["http://"+ip.String()+":8200"] = RoleDecode
		}
		res := &fakeResolver{ips: map[string][]string{svc: ips}}
		var mu sync.Mutex
		running, peak := 0, 0
		probe := func(ctx context.Context, base string) (Role, error) {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return roles[base], nil
		}
		c, _, _ := testCommon()
		s, err := NewDNS(DNSOptions{Common: c, Name: svc, Port: 8200, Probe: probe, Resolver: res})
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := run(t, s)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(rec.last(t).Ready(RoleDecode)); n != 40 || peak > probesMax {
			t.Errorf("%d ready members, peak %d probes at once (max %d)", n, peak, probesMax)
		}
	})
}

// TestDNSOptionsRefused: a bad name or port, or no probe, is refused.
func TestDNSOptionsRefused(t *testing.T) {
	pr := newFakeProbe(nil).probe
	for _, o := range []DNSOptions{
		{Name: "", Port: 80, Probe: pr},
		{Name: "a..b", Port: 80, Probe: pr},
		{Name: "x", Port: 70000, Probe: pr},
		{Name: "x", Port: 80},
		{Name: "x", Port: 80, Probe: pr, Interval: -1},
	} {
		if _, err := NewDNS(o); err == nil {
			t.Errorf("NewDNS(%+v) succeeded", o)
		}
	}
}
