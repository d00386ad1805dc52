package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/pd/debugdoc"
)

// clusterBytesMax bounds the /debug/cluster document Inspect reads.
const clusterBytesMax = 128 << 20

// ErrOverdue is what Inspect's error wraps when some room that has not
// ended is past its deadline.
var ErrOverdue = errors.New("rooms are past their deadline")

// Options says what Inspect prints.
type Options struct {
	// Format is "text" (a table per process) or "json" (the document,
	// indented).
	Format string
	// All includes finished rooms in the tables.
	All bool
}

// Inspect fetches GET {base}/debug/cluster with c, prints it to w as
// o.Format says, and returns an error wrapping ErrOverdue when any room
// that has not ended is past its deadline.
func Inspect(ctx context.Context, c *http.Client, base string, o Options, w io.Writer) error {
	if o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("inspect: format %q is not supported: use text or json", o.Format)
	}
	raw, err := FetchCluster(ctx, c, base)
	if err != nil {
		return err
	}
	cl, err := ParseCluster(raw)
	if err != nil {
		return err
	}
	overdue := 0
	for _, p := range cl.Processes {
		for _, r := range p.Rooms {
			if r.Overdue() {
				overdue++
			}
		}
	}
	if o.Format == "json" {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("inspect: indent the cluster document: %w", err)
		}
		b.WriteByte('\n')
		if _, err := w.Write(b.Bytes()); err != nil {
			return fmt.Errorf("inspect: write: %w", err)
		}
	} else if err := WriteTables(w, cl, o.All); err != nil {
		return err
	}
	if overdue > 0 {
		return fmt.Errorf("inspect: %d %w", overdue, ErrOverdue)
	}
	return nil
}

// FetchCluster returns the body of GET {base}/debug/cluster. base is the
// router's URL ("http://host:port"; a bare host:port means http).
func FetchCluster(ctx context.Context, c *http.Client, base string) ([]byte, error) {
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := base
	if !strings.HasSuffix(u, "/debug/cluster") {
		u += "/debug/cluster"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("inspect: get %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := httpx.ReadAllMax(resp.Body, clusterBytesMax)
	if err != nil {
		return nil, fmt.Errorf("inspect: get %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("inspect: get %s: status %d: %s", u, resp.StatusCode, httpx.Clip(string(body), 300))
	}
	return body, nil
}

// ParseCluster decodes a /debug/cluster document. Each process is decoded
// on its own: one that does not decode is kept with Error saying why, so
// one odd worker does not hide the others.
func ParseCluster(b []byte) (*debugdoc.Cluster, error) {
	var doc struct {
		Processes []json.RawMessage `json:"processes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("inspect: decode the cluster document: %w", err)
	}
	cl := &debugdoc.Cluster{Processes: make([]debugdoc.Rooms, 0, len(doc.Processes))}
	for i, raw := range doc.Processes {
		var p debugdoc.Rooms
		if err := json.Unmarshal(raw, &p); err != nil {
			var id struct {
				Worker string `json:"worker"`
				Role   string `json:"role"`
			}
			json.Unmarshal(raw, &id)
			if id.Worker == "" {
				id.Worker = fmt.Sprintf("process %d", i)
			}
			p = debugdoc.Rooms{Worker: id.Worker, Role: id.Role, Error: fmt.Sprintf("its room table does not decode: %v", err)}
		}
		cl.Processes = append(cl.Processes, p)
	}
	return cl, nil
}

// WriteTables writes one table per process: room, request, state/phase,
// age, peer, bytes, and a FLAG column marking rooms past their deadline
// ("OVERDUE 3.2s"). Only rooms that have not ended are listed unless all.
func WriteTables(w io.Writer, c *debugdoc.Cluster, all bool) error {
	var b bytes.Buffer
	for i, p := range c.Processes {
		if i > 0 {
			b.WriteByte('\n')
		}
		live := 0
		for _, r := range p.Rooms {
			if !r.Terminal() {
				live++
			}
		}
		fmt.Fprintf(&b, "== %s (%s)", p.Worker, p.Role)
		if p.Error != "" {
			fmt.Fprintf(&b, ": error: %s\n", p.Error)
			continue
		}
		fmt.Fprintf(&b, ": %d live, %d finished\n", live, len(p.Rooms)-live)
		writeMembership(&b, p.Membership, p.Workers)
		writeWorkers(&b, p.Workers)
		shown := 0
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ROOM\tREQUEST\tSTATE/PHASE\tAGE\tPEER\tBYTES\tFLAG")
		for _, r := range p.Rooms {
			if !all && r.Terminal() {
				continue
			}
			shown++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(r.ID), orDash(r.RequestID), stateText(r),
				formatMS(r.AgeMS), orDash(peerText(r)), formatBytes(r.Bytes), flagText(r))
		}
		if shown == 0 {
			if all {
				b.WriteString("(no rooms)\n")
			} else {
				b.WriteString("(no live rooms)\n")
			}
			continue
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("inspect: format table: %w", err)
		}
	}
	out := trailingSpace.ReplaceAll(b.Bytes(), []byte("\n")) // empty FLAG cells leave padding
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return nil
}

// writeWorkers lists the workers (of a router's entry) that are out of
// service, draining or whose circuit breaker is not closed, one line each.
func writeWorkers(b *bytes.Buffer, ws []debugdoc.Worker) {
	for _, w := range ws {
		if w.Healthy && !w.Draining && w.Breaker == "closed" {
			continue
		}
		fmt.Fprintf(b, "worker %s (%s):", w.URL, w.Role)
		if !w.Healthy {
			b.WriteString(" out")
			if w.Problem != "" {
				fmt.Fprintf(b, " (%s)", httpx.Clip(w.Problem, 80))
			}
			b.WriteByte(',')
		}
		if w.Draining {
			b.WriteString(" draining (no new rooms; its rooms finish),")
		}
		fmt.Fprintf(b, " breaker %s\n", w.Breaker)
	}
}

// writeMembership writes a router's membership source and one line per
// worker: role, address, name, source, since, whether its source lists it
// Ready, and what the router makes of it.
func writeMembership(b *bytes.Buffer, m *debugdoc.Membership, ws []debugdoc.Worker) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "membership: %s", m.Source)
	if m.Spec != "" {
		fmt.Fprintf(b, " (%s)", m.Spec)
	}
	fmt.Fprintf(b, ", %d changes", m.Changes)
	if !m.Synced {
		b.WriteString(", NOT SYNCED")
	}
	if m.Errors > 0 {
		fmt.Fprintf(b, ", %d errors", m.Errors)
	}
	if m.Failing {
		fmt.Fprintf(b, ", FAILING (keeps its last membership): %s", httpx.Clip(m.LastError, 120))
	}
	b.WriteByte('\n')
	for _, ig := range m.Ignored {
		fmt.Fprintf(b, "  ignored %s\n", httpx.Clip(ig, 120))
	}
	if len(ws) == 0 {
		b.WriteString("  (no workers)\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ROLE\tADDRESS\tNAME\tSOURCE\tSINCE\tREADY\tSTATE\tLEGS\tRESTARTS")
	for _, w := range ws {
		ready := "yes"
		if !w.Listed {
			ready = "no"
			if w.ListReason != "" {
				ready += " (" + httpx.Clip(w.ListReason, 40) + ")"
			}
		}
		state := "in"
		switch {
		case w.Left:
			state = "left (finishing its legs)"
		case !w.Healthy:
			state = "out"
		case w.Draining:
			state = "draining"
		case w.Breaker != "closed":
			state = "breaker " + w.Breaker
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", w.Role, w.URL, orDash(w.Name), orDash(w.Source), orDash(sinceText(w.Since)),
			ready, state, w.Inflight, w.Restarts)
	}
	tw.Flush()
}

// sinceText shortens an RFC 3339 time to the time of day (UTC) and how
// long ago it was.
func sinceText(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("15:04:05") + " (" + formatMS(float64(time.Since(t))/float64(time.Millisecond)) + " ago)"
}

// trailingSpace matches the padding tabwriter leaves at the end of a line.
var trailingSpace = regexp.MustCompile(` +\n`)

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stateText(r debugdoc.Room) string {
	s := orDash(r.State)
	if r.Phase != "" {
		s += "/" + r.Phase
	}
	if r.Terminal() && r.Reason != "" {
		s += " (" + httpx.Clip(r.Reason, 60) + ")"
	}
	return s
}

func peerText(r debugdoc.Room) string {
	if r.Peer != "" {
		return r.Peer
	}
	if r.Prefill != "" || r.Decode != "" {
		return orDash(r.Prefill) + " -> " + orDash(r.Decode)
	}
	return ""
}

func flagText(r debugdoc.Room) string {
	if r.Overdue() {
		return "OVERDUE " + formatMS(r.PastDeadlineMS())
	}
	return ""
}

// formatMS writes a millisecond count briefly: 350ms, 3.2s, 4m05s, 2h03m.
func formatMS(ms float64) string {
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%s%dms", sign, d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%s%.1fs", sign, d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%s%dm%02ds", sign, int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%s%dh%02dm", sign, int(d.Hours()), int(d.Minutes())%60)
}

// formatBytes writes a byte count briefly: 512B, 1.5KiB, 12.0MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	f := float64(n) / unit
	for _, s := range []string{"KiB", "MiB", "GiB"} {
		if f < unit {
			return fmt.Sprintf("%.1f%s", f, s)
		}
		f /= unit
	}
	return fmt.Sprintf("%.1fTiB", f)
}
