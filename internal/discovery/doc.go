// Package discovery finds the workers a router may use while it runs: the
// live-membership sources of `tandem route --discovery`. A Source watches
// one place and delivers whole membership snapshots; the router reconciles
// its worker pool with each.
//
// # Sources
//
// New builds one from Config (its flags come from Config.AddFlags);
// NewStatic, NewK8s, NewK8sFromConfig, NewK8sFromKubeconfig, NewDNS and
// NewFile build them directly.
//
//   - static: the --prefill and --decode URLs, delivered once, every
//     member Ready.
//   - k8s: a client-go informer on the pods of one namespace that match a
//     label selector (full syntax, sent to the API server and checked
//     again on each pod). It needs list and watch on pods, nothing else.
//     A pod is a worker when its label llm-d.ai/role (RoleLabel) is
//     prefill or decode and it has an HTTP port: the annotation
//     tandem.dev/http-port (PortAnnotation, a number) when present, else
//     the container port named by K8sOptions.PortName ("http"). A matching
//     pod that is not a worker is listed in Status.Ignored, logged and
//     counted once (again only if its reason changes). A worker pod with
//     an IP whose phase is not Succeeded or Failed is a member; it is
//     Ready only while its PodReady condition is True and it has no
//     deletionTimestamp, so a terminating pod stops being Ready on the
//     first event of its deletion, at the start of its grace period, and
//     leaves when it is deleted. Its Name is "namespace/pod", its Labels
//     the pod's. Of two pods with one IP and port, the Ready one (else the
//     first by name) is the member and the other is ignored.
//   - dns:NAME[:PORT]: NAME (a headless Service) looked up every Interval
//     (2 s), each lookup within Timeout (2 s): with PORT its A and AAAA
//     records, without one its SRV records (each target's addresses with
//     the record's port; for Kubernetes name a port:
//     _http._tcp.svc.ns.svc.cluster.local). DNS carries no role, so each
//     new address is probed once with the ProbeFunc the caller gives (the
//     router's GETs /pd/info with the cluster credential, HTTPProbe);
//     until a probe succeeds the address is a member with RoleUnknown that
//     is not Ready, and the probe is retried each round. An address that
//     is no longer returned leaves; a name that does not exist (NXDOMAIN)
//     empties the membership; any other lookup failure keeps the last
//     one. Names are "ip:port".
//   - file:PATH: an endpoint list in llm-d's file-discovery shape (below),
//     checked every Interval (500 ms): a stat, and a read when the file's
//     size, modification time or identity changed (or every tenth check
//     regardless), so writes in place, saves by rename and Kubernetes
//     ConfigMap updates are all seen. Every listed worker is Ready.
//     Endpoints without a prefill or decode role are ignored as for pods.
//     A file that is gone, unreadable, over 1 MiB (MaxFileBytes), empty,
//     without an endpoints list, or otherwise invalid (no address or port,
//     a name or address twice) keeps the last good membership: the error
//     is logged once and counted, never an empty fleet. "endpoints: []"
//     empties it. At start such a file is an error from Run.
//
// # The endpoint file
//
// YAML or JSON:
//
//	endpoints:
//	- name: decode-0          # optional; default address:port
//	  namespace: tandem       # optional; the member is then namespace/name
//	  address: 10.0.0.7       # an IP address or a host name
//	  port: "8200"            # a number or a string of digits
//	  labels: {llm-d.ai/role: decode}
//
// Other fields are ignored.
//
// # Contract
//
//   - Run calls update from one goroutine, one call at a time: first with
//     the initial membership (empty included), then after each change,
//     never with an unchanged one, so a k8s resync or relist, a DNS answer
//     in another order or a file rewritten with the same content delivers
//     nothing. Changes that arrive while update runs are coalesced.
//   - A Snapshot holds every member the source sees, sorted by Name, with
//     no Name or URL twice. A member that is not Ready gets no new work;
//     one that leaves the snapshot is gone. A router keys its workers by
//     URL: a Name whose URL or Role changed (Updated) is another worker.
//   - Member.URL is the base URL of the worker's HTTP API: http://ip:port
//     (IPv6 in brackets) for k8s and dns, http://address:port for file, the
//     given URL (normalized) for static.
//   - After Run has started, no error empties the membership (a DNS name
//     that does not exist is an answer, not an error): the source keeps
//     its last good one, counts the error, logs it once while it stands,
//     and shows it in Status. Run returns an error only when the
//     source cannot start (a file that cannot be loaded; pods not listed
//     within K8sOptions.SyncTimeout, 30 s). When ctx ends Run returns nil
//     once every goroutine it started has ended.
//   - Diff lists the changes between two memberships; they are what the
//     metrics count and the log shows.
//
// # Metrics and debugging
//
// Each source registers on Common.Registerer (one source per registry):
// tandem_discovery_changes_total{source,role,kind} (kind add, remove,
// ready, unready, update), tandem_discovery_errors_total{source,kind}
// (watch, sync, resolve, probe, read, too_large, parse),
// tandem_discovery_ignored_total{source,reason} (role, port, address) and
// the gauge tandem_discovery_members{source,role,ready}. Status gives the
// members, the ignored, the counts and the standing error for
// /debug/cluster. client-go logs through klog; the caller may route it to
// slog.
//
// # Why snapshots, not events
//
// Each delivery is the whole membership, computed from the source's own state
// (the informer's store, the last DNS answer, the file). A relist, a resync,
// an answer in another order or a rewrite with the same content recomputes the
// same set and delivers nothing; a missed or repeated event cannot leave a
// ghost worker; a slow consumer sees the latest state, not a queue. Diff gives
// the changes between two snapshots for whoever wants events.
//
// # Why the file is polled
//
// An editor saving by rename, a tool that deletes and recreates, and a
// Kubernetes ConfigMap volume (a symlink swapped atomically) all replace the
// inode an inotify watch holds; overlay and network file systems may send no
// events. A stat every 500 ms (and a full read every tenth check, for rewrites
// that keep size and modification time) sees all of them, needs no dependency,
// and runs on the clock tests control.
//
// # Limits and footprint
//
// Endpoint file 1 MiB; role probes 8 at a time, each within --discovery-
// timeout (2 s); DNS lookups within the same timeout every --discovery-
// interval (2 s; the file's default is 500 ms); the first pod list within 30
// s.
//
// client-go's informer factory and typed clients register every API group at
// init. The source builds the pod informer on a REST client whose scheme knows
// core/v1 alone (k8sclient.go): linked into tandem (19.8 MB without it) the
// binary is 30.9 MB, against 47.1 MB with the typed core/v1 client and 49.4 MB
// with the factory.
package discovery
