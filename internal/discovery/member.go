package discovery

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Role is the part a worker plays: RolePrefill, RoleDecode, or RoleUnknown
// while a DNS member's role probe has not answered.
type Role string

// The roles. RoleLabel carries the first two on pods and file endpoints.
const (
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
	RoleUnknown Role = "unknown"
)

// RoleLabel is the label that gives a pod's or a file endpoint's role,
// llm-d's: "prefill" or "decode". Anything else is not a worker.
const RoleLabel = "llm-d.ai/role"

// roleOf maps a label value to a worker role; ok is false for anything but
// "prefill" and "decode".
func roleOf(v string) (Role, bool) {
	switch Role(v) {
	case RolePrefill, RoleDecode:
		return Role(v), true
	}
	return RoleUnknown, false
}

// Member is one worker as a source sees it. Members are values: a
// snapshot's Labels maps are never changed after it is delivered, and a
// receiver must not change them either.
type Member struct {
	// Name identifies the member within its source and stays the same
	// while it lives: "namespace/pod" (k8s), the endpoint's name or
	// "address:port" (file), "ip:port" (dns), the URL (static).
	Name string `json:"name"`
	// URL is the base URL of the worker's HTTP API, scheme://host:port
	// (a static list may add a path), with no trailing slash.
	URL string `json:"url"`
	// Role is prefill or decode; RoleUnknown only for a DNS member whose
	// role probe has not succeeded (then Ready is false).
	Role Role `json:"role"`
	// Ready says the worker may be given new work. A member that is not
	// Ready (a pod not Ready yet or terminating, a DNS member whose role
	// is unknown) is shown so that operators see it, and gets no new work.
	Ready bool `json:"ready"`
	// Reason says why a member is not Ready; empty when it is.
	Reason string `json:"reason,omitempty"`
	// Labels are the pod's or the file endpoint's labels; nil for dns and
	// static members.
	Labels map[string]string `json:"labels,omitempty"`
}

// equal reports whether a and b are the same in every field.
func (a Member) equal(b Member) bool {
	return a.Name == b.Name && a.URL == b.URL && a.Role == b.Role && a.Ready == b.Ready &&
		a.Reason == b.Reason && maps.Equal(a.Labels, b.Labels)
}

// Snapshot is a source's whole membership at one moment.
type Snapshot struct {
	// Source is the kind of the source that made it: "static", "k8s",
	// "dns" or "file".
	Source string `json:"source"`
	// Members, sorted by Name, no Name twice, no URL twice.
	Members []Member `json:"members"`
}

// Ready returns the members of role that are Ready, in Name order.
func (s Snapshot) Ready(role Role) []Member {
	var out []Member
	for _, m := range s.Members {
		if m.Ready && m.Role == role {
			out = append(out, m)
		}
	}
	return out
}

// Ignored is something a source saw that is not a worker (a pod or file
// endpoint without a usable role label or port), and why.
type Ignored struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Status is what a source sees now, for /debug/cluster and `tandem
// inspect`.
type Status struct {
	// Source is the source's kind; Spec describes it ("k8s namespace=x
	// selector=y", "dns tandem-decode:8080", "file /etc/tandem/workers.yaml").
	Source string `json:"source"`
	Spec   string `json:"spec"`
	// Synced is true once the first snapshot was delivered.
	Synced  bool      `json:"synced"`
	Members []Member  `json:"members"`
	Ignored []Ignored `json:"ignored,omitempty"`
	// Changes counts membership changes since the source started (the
	// first snapshot's members included).
	Changes    int       `json:"changes"`
	LastChange time.Time `json:"last_change,omitzero"`
	// Errors counts errors since the source started; LastError is the most
	// recent one and Failing whether it still stands (the source could
	// not refresh since: it keeps its last good membership meanwhile).
	Errors      int       `json:"errors"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Failing     bool      `json:"failing"`
}

// ChangeKind is the kind of one membership change; it is the "kind" label
// of tandem_discovery_changes_total.
type ChangeKind string

// The change kinds.
const (
	// Added: a Name that was not there (Ready or not).
	Added ChangeKind = "add"
	// Removed: a Name that is gone.
	Removed ChangeKind = "remove"
	// BecameReady and BecameUnready: the same member (Name, URL, Role)
	// whose Ready flipped.
	BecameReady   ChangeKind = "ready"
	BecameUnready ChangeKind = "unready"
	// Updated: anything else about a Name changed (its URL, its Role, its
	// labels, why it is not Ready). A new URL or Role under the same Name
	// is, for a router, another worker: it should retire the old one.
	Updated ChangeKind = "update"
)

// Change is one difference between two memberships. Member is the new
// state (the old one for Removed); Prev the old state (zero for Added).
type Change struct {
	Kind   ChangeKind
	Member Member
	Prev   Member
}

// Diff lists what changed from prev to next, in Name order. Both must be
// sorted by Name with no Name twice, as Snapshot.Members are.
func Diff(prev, next []Member) []Change {
	var out []Change
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || i < len(prev) && prev[i].Name < next[j].Name:
			out = append(out, Change{Kind: Removed, Member: prev[i], Prev: prev[i]})
			i++
		case i == len(prev) || next[j].Name < prev[i].Name:
			out = append(out, Change{Kind: Added, Member: next[j]})
			j++
		default:
			p, n := prev[i], next[j]
			i, j = i+1, j+1
			switch {
			case p.equal(n):
				continue
			case p.URL == n.URL && p.Role == n.Role && p.Ready != n.Ready:
				k := BecameUnready
				if n.Ready {
					k = BecameReady
				}
				out = append(out, Change{Kind: k, Member: n, Prev: p})
			default:
				out = append(out, Change{Kind: Updated, Member: n, Prev: p})
			}
		}
	}
	return out
}

// sortMembers sorts ms by Name.
func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
}
