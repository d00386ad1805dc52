package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The dns defaults.
const (
	DefaultDNSInterval = 2 * time.Second
	DefaultDNSTimeout  = 2 * time.Second
	// probesMax is how many role probes run at once.
	probesMax = 8
)

// ProbeFunc learns the role of the worker whose HTTP API is at base
// (scheme://host:port). The router's (HTTPProbe) asks GET /pd/info.
type ProbeFunc func(ctx context.Context, base string) (Role, error)

// Resolver is the part of *net.Resolver a dns source uses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// DNSOptions configures a dns source.
type DNSOptions struct {
	Common
	// Name is looked up every Interval (default DefaultDNSInterval). With
	// a Port its A and AAAA records are the workers; without one (0) its
	// SRV records, each target's addresses with the record's port.
	Name string
	Port int
	// Interval is the time between lookups; Timeout (default
	// DefaultDNSTimeout) bounds each lookup and each role probe.
	Interval, Timeout time.Duration
	// Probe learns a new address's role; required.
	Probe ProbeFunc
	// Resolver answers the lookups; nil: net.DefaultResolver.
	Resolver Resolver
}

// dnsSource re-resolves a name on an interval.
type dnsSource struct {
	*core
	o   DNSOptions
	res Resolver
	// known holds every address of the last good lookup and what its
	// probe found; only Run's goroutine touches it.
	known map[netip.AddrPort]*probed
}

// probed is what an address's role probe found: role when err is nil.
type probed struct {
	role Role
	err  error
}

// NewDNS returns a source of the addresses o.Name resolves to. DNS says
// nothing of roles: each new address is probed once (a failed probe is
// retried every Interval; the address is a member that is not Ready
// meanwhile). An address that goes leaves; if it comes back it is probed
// again.
func NewDNS(o DNSOptions) (Source, error) {
	if !validDNSName(o.Name) {
		return nil, fmt.Errorf("discovery dns: %q is not a DNS name", o.Name)
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("discovery dns: port %d is not 1-65535", o.Port)
	}
	if o.Probe == nil {
		return nil, errors.New("discovery dns: no role probe given")
	}
	if o.Interval == 0 {
		o.Interval = DefaultDNSInterval
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultDNSTimeout
	}
	if o.Interval < 0 || o.Timeout < 0 {
		return nil, errors.New("discovery dns: negative --discovery-interval or --discovery-timeout")
	}
	res := o.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	spec := "dns " + o.Name
	if o.Port != 0 {
		spec += ":" + strconv.Itoa(o.Port)
	} else {
		spec += " (SRV)"
	}
	return &dnsSource{core: newCore(KindDNS, spec, o.Logger, met), o: o, res: res, known: map[netip.AddrPort]*probed{}}, nil
}

// Status returns what the source sees now.
func (d *dnsSource) Status() Status { return d.status() }

// Run looks the name up at once, then every Interval, until ctx ends.
func (d *dnsSource) Run(ctx context.Context, update func(Snapshot)) error {
	if err := d.start(); err != nil {
		return err
	}
	t := time.NewTicker(d.o.Interval)
	defer t.Stop()
	for {
		d.round(ctx, update)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// round looks the name up, probes the addresses whose role is not known,
// and publishes. A lookup that fails keeps the last membership; one that
// finds no such name empties it.
func (d *dnsSource) round(ctx context.Context, update func(Snapshot)) {
	addrs, err := d.lookup(ctx)
	if ctx.Err() != nil {
		return
	}
	var de *net.DNSError
	switch {
	case errors.As(err, &de) && de.IsNotFound:
		addrs = nil // the name has no addresses: every worker left
		d.recovered(errResolve)
	case err != nil:
		d.fail(errResolve, fmt.Errorf("look up %s: %w", d.o.Name, err))
		if d.isSynced() {
			return
		}
		addrs = nil // the first round: publish the empty membership all the same
	default:
		d.recovered(errResolve)
	}
	now := map[netip.AddrPort]bool{}
	for _, a := range addrs {
		now[a] = true
	}
	for a := range d.known {
		if !now[a] {
			delete(d.known, a)
		}
	}
	d.probe(ctx, addrs)
	if ctx.Err() != nil {
		return
	}
	ms := make([]Member, 0, len(d.known))
	failed := false
	for a, p := range d.known {
		failed = failed || p.err != nil
		m := Member{Name: a.String(), URL: "http://" + a.String(), Role: p.role, Ready: p.err == nil}
		if p.err != nil {
			m.Role, m.Reason = RoleUnknown, "role unknown: "+p.err.Error()
		}
		ms = append(ms, m)
	}
	if !failed {
		d.recovered(errProbe)
	}
	d.publish(ms, nil, update)
}

// probe asks the role of every address in addrs whose role is not known
// yet, probesMax at a time, each within Timeout, and records the answers
// in d.known. A failure is logged once per address and text.
func (d *dnsSource) probe(ctx context.Context, addrs []netip.AddrPort) {
	var todo []netip.AddrPort
	for _, a := range addrs {
		if p := d.known[a]; p == nil || p.err != nil {
			todo = append(todo, a)
		}
	}
	got := make([]probed, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, probesMax)
	for i, a := range todo {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				got[i].err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
			defer cancel()
			got[i].role, got[i].err = d.o.Probe(pctx, "http://"+a.String())
		})
	}
	wg.Wait()
	for i, a := range todo {
		p := got[i]
		if p.err == nil {
			if _, ok := roleOf(string(p.role)); !ok {
				p.err = fmt.Errorf("it says its role is %q, not prefill or decode", p.role)
			}
		}
		if p.err != nil {
			p.err = fmt.Errorf("role probe of %s: %w", a, p.err)
			old := d.known[a]
			again := old != nil && old.err != nil && old.err.Error() == p.err.Error()
			d.note(errProbe, p.err, !again)
		}
		d.known[a] = &p
	}
}

// lookup resolves the name to the workers' addresses, sorted, within
// Timeout.
func (d *dnsSource) lookup(ctx context.Context) ([]netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	seen := map[netip.AddrPort]bool{}
	var out []netip.AddrPort
	add := func(host string, port int) error {
		ips, err := d.res.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			a := netip.AddrPortFrom(ip.Unmap(), uint16(port))
			if ip.IsValid() && !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
		return nil
	}
	if d.o.Port != 0 {
		return out, add(d.o.Name, d.o.Port)
	}
	_, srvs, err := d.res.LookupSRV(ctx, "", "", d.o.Name)
	if err != nil {
		return nil, err
	}
	for _, s := range srvs {
		if s == nil || s.Port == 0 || s.Target == "" || s.Target == "." {
			continue
		}
		if err := add(strings.TrimSuffix(s.Target, "."), int(s.Port)); err != nil {
			var de *net.DNSError
			if errors.As(err, &de) && de.IsNotFound {
				continue // a target that went between the two lookups
			}
			return nil, fmt.Errorf("target %s: %w", s.Target, err)
		}
	}
	return out, nil
}
