package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
)

// Source delivers the workers a router may use, as they change.
type Source interface {
	// Run watches until ctx ends and returns nil then, once every
	// goroutine it started has ended. It calls update from its own
	// goroutine, one call at a time, with the whole membership: first
	// once the initial membership is known (even when it is empty), then
	// after each change, never with an unchanged one. update should
	// return soon; while it runs, changes wait (and coalesce). Run returns
	// an error only when the source cannot start (a file that cannot be
	// loaded, pods that cannot be listed); later errors are counted and
	// logged and leave the last good membership in place. Run may be
	// called once.
	Run(ctx context.Context, update func(Snapshot)) error
	// Status returns what the source sees now; safe at any time, from any
	// goroutine.
	Status() Status
}

// Common is what every source takes.
type Common struct {
	// Logger gets membership changes (Info) and errors (Warn, each
	// standing error once); default slog.Default().
	Logger *slog.Logger
	// Registerer gets the source's metrics (tandem_discovery_*); nil: none
	// are registered. One source per registry.
	Registerer prometheus.Registerer
}

// Config is what `tandem route` knows of discovery, from its flags
// (AddFlags) and its own code (Probe, Logger, Registerer). New builds the
// source it names.
type Config struct {
	Common
	// Spec is --discovery: "static" (or ""), "k8s", "dns:NAME[:PORT]" or
	// "file:PATH".
	Spec string
	// Prefill and Decode are the static source's worker URLs (--prefill,
	// --decode); they are refused with any other source.
	Prefill, Decode []string
	// Namespace, Selector, PortName and Kubeconfig configure k8s (see
	// K8sOptions and NewK8sFromKubeconfig).
	Namespace, Selector, PortName, Kubeconfig string
	// Interval is dns's re-resolve interval and file's poll interval; 0:
	// DefaultDNSInterval or DefaultFileInterval. Timeout bounds each DNS
	// lookup and role probe; 0: DefaultDNSTimeout.
	Interval, Timeout time.Duration
	// Probe learns a DNS member's role (see HTTPProbe); required by dns.
	Probe ProbeFunc
	// Resolver answers dns's lookups; nil: net.DefaultResolver.
	Resolver Resolver
}

// AddFlags adds the discovery flags to fs, bound to c. --prefill and
// --decode stay the caller's.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Spec, "discovery", "static",
		"where workers come from: static (--prefill/--decode), k8s (pods, see --discovery-namespace and --discovery-selector), "+
			"dns:NAME[:PORT] (a headless Service's addresses, role from /pd/info; no PORT: SRV records), "+
			"or file:PATH (llm-d's endpoint list, YAML or JSON, reloaded when it changes)")
	fs.StringVar(&c.Namespace, "discovery-namespace", "",
		"k8s: namespace whose pods are watched (default: the kubeconfig context's, or the router pod's own)")
	fs.StringVar(&c.Selector, "discovery-selector", DefaultSelector,
		"k8s: label selector of the worker pods, full syntax (app=tandem,tier in (a,b),!canary); role from label "+RoleLabel)
	fs.StringVar(&c.PortName, "discovery-port-name", DefaultPortName,
		"k8s: name of the container port of the workers' HTTP API (annotation "+PortAnnotation+" wins)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "",
		"k8s: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else the in-cluster service account)")
	fs.DurationVar(&c.Interval, "discovery-interval", 0,
		fmt.Sprintf("dns: time between lookups (0: %v); file: time between checks of the file (0: %v)", DefaultDNSInterval, DefaultFileInterval))
	fs.DurationVar(&c.Timeout, "discovery-timeout", DefaultDNSTimeout, "dns: limit for each lookup and each new worker's role probe")
}

// Source kinds, as ParseSpec returns them.
const (
	KindStatic = "static"
	KindK8s    = "k8s"
	KindDNS    = "dns"
	KindFile   = "file"
)

// ParseSpec splits a --discovery value into its kind and argument (the
// DNS name and port, or the file path).
func ParseSpec(spec string) (kind, arg string, err error) {
	switch {
	case spec == "" || spec == KindStatic:
		return KindStatic, "", nil
	case spec == KindK8s:
		return KindK8s, "", nil
	case strings.HasPrefix(spec, KindDNS+":"):
		arg = strings.TrimPrefix(spec, KindDNS+":")
		if _, _, err := parseDNSTarget(arg); err != nil {
			return "", "", err
		}
		return KindDNS, arg, nil
	case strings.HasPrefix(spec, KindFile+":"):
		arg = strings.TrimPrefix(spec, KindFile+":")
		if arg == "" {
			return "", "", errors.New("discovery: file: needs a path (file:/etc/tandem/workers.yaml)")
		}
		return KindFile, arg, nil
	}
	return "", "", fmt.Errorf("discovery: --discovery %q is not one of static, k8s, dns:NAME[:PORT], file:PATH", spec)
}

// parseDNSTarget splits "NAME[:PORT]"; port is 0 without one.
func parseDNSTarget(arg string) (name string, port int, err error) {
	name = arg
	if i := strings.LastIndexByte(arg, ':'); i >= 0 {
		name = arg[:i]
		port, err = strconv.Atoi(arg[i+1:])
		if err != nil || port < 1 || port > 65535 {
			return "", 0, fmt.Errorf("discovery: dns:%s: %q is not a port (1-65535)", arg, arg[i+1:])
		}
	}
	if !validDNSName(name) {
		return "", 0, fmt.Errorf("discovery: dns:%s: %q is not a DNS name (dns:tandem-decode.ns.svc.cluster.local:8080)", arg, name)
	}
	return name, port, nil
}

// validDNSName accepts dot-separated labels of letters, digits, '-' and
// '_' (SRV names start with _service._proto), each 1-63 bytes, 253 in
// all, with an optional final dot.
func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// New builds the source c.Spec names.
func New(c Config) (Source, error) {
	kind, arg, err := ParseSpec(c.Spec)
	if err != nil {
		return nil, err
	}
	if kind != KindStatic && len(c.Prefill)+len(c.Decode) > 0 {
		return nil, fmt.Errorf("discovery: --prefill and --decode are for --discovery static; --discovery %s finds the workers itself", c.Spec)
	}
	switch kind {
	case KindK8s:
		return NewK8sFromKubeconfig(c.Kubeconfig, K8sOptions{Common: c.Common, Namespace: c.Namespace, Selector: c.Selector, PortName: c.PortName})
	case KindDNS:
		name, port, _ := parseDNSTarget(arg)
		return NewDNS(DNSOptions{Common: c.Common, Name: name, Port: port, Interval: c.Interval, Timeout: c.Timeout,
			Probe: c.Probe, Resolver: c.Resolver})
	case KindFile:
		return NewFile(FileOptions{Common: c.Common, Path: arg, Interval: c.Interval})
	}
	return NewStatic(StaticOptions{Common: c.Common, Prefill: c.Prefill, Decode: c.Decode})
}
