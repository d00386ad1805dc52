package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"tandem/internal/pd/debugdoc"
)

// ErrNotFound is what InspectRequest's error wraps when no process has a
// room of the request.
var ErrNotFound = errors.New("no process has a room of that request")

// RequestView is one request across the cluster: its trace id, the
// router's records of it (one per attempt of each sample) and every
// worker's rooms of it.
type RequestView struct {
	RequestID string `json:"request_id"`
	// TraceID is the request's trace id, as the first room that has one
	// gives it ("" when none does).
	TraceID string `json:"trace_id,omitempty"`
	// Live reports whether any of its rooms has not ended.
	Live bool `json:"live"`
	// Processes are the processes that hold a room of it, each with only
	// those rooms.
	Processes []debugdoc.Rooms `json:"processes"`
}

// FindRequest picks request id's rooms (by request id, or by room id or
// trace id) out of c.
func FindRequest(c *debugdoc.Cluster, id string) RequestView {
	v := RequestView{RequestID: id}
	match := func(r debugdoc.Room) bool {
		return r.RequestID == id || r.ID == id || (r.TraceID != "" && r.TraceID == id)
	}
	// A room or trace id names its request: find the request id first.
	for _, p := range c.Processes {
		for _, r := range p.Rooms {
			if match(r) && r.RequestID != "" {
				v.RequestID = r.RequestID
			}
		}
	}
	for _, p := range c.Processes {
		var rooms []debugdoc.Room
		for _, r := range p.Rooms {
			if r.RequestID == v.RequestID || match(r) {
				rooms = append(rooms, r)
				if v.TraceID == "" {
					v.TraceID = r.TraceID
				}
				if !r.Terminal() {
					v.Live = true
				}
			}
		}
		if len(rooms) > 0 {
			q := p
			q.Rooms, q.Workers, q.Live = rooms, nil, 0
			for _, r := range rooms {
				if !r.Terminal() {
					q.Live++
				}
			}
			v.Processes = append(v.Processes, q)
		}
	}
	return v
}

// InspectRequest fetches the cluster document (which lists finished rooms too)
// and prints request id's view (FindRequest) to w, as text or JSON. Its
// error wraps ErrNotFound when no process has a room of it, and
// ErrOverdue when one of its rooms is past its deadline.
func InspectRequest(ctx context.Context, c *http.Client, base, id string, o Options, w io.Writer) error {
	if o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("inspect: format %q is not supported: use text or json", o.Format)
	}
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	raw, err := FetchCluster(ctx, c, base)
	if err != nil {
		return err
	}
	cl, err := ParseCluster(raw)
	if err != nil {
		return err
	}
	v := FindRequest(cl, id)
	if o.Format == "json" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("inspect: encode: %w", err)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("inspect: write: %w", err)
		}
	} else if err := writeRequest(w, v); err != nil {
		return err
	}
	if len(v.Processes) == 0 {
		return fmt.Errorf("inspect: request %q: %w (the router keeps its last finished requests: --debug-records)", id, ErrNotFound)
	}
	for _, p := range v.Processes {
		for _, r := range p.Rooms {
			if r.Overdue() {
				return fmt.Errorf("inspect: request %q: room %s is %w", id, r.ID, ErrOverdue)
			}
		}
	}
	return nil
}

// writeRequest prints a RequestView: a heading with the trace id, then per
// process its rooms of the request with their phases and history.
func writeRequest(w io.Writer, v RequestView) error {
	var b bytes.Buffer
	state := "finished"
	if v.Live {
		state = "live"
	}
	fmt.Fprintf(&b, "request %s: %s, trace %s\n", v.RequestID, state, orDash(v.TraceID))
	for _, p := range v.Processes {
		fmt.Fprintf(&b, "\n== %s (%s)\n", orDash(p.Worker), p.Role)
		for _, r := range p.Rooms {
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "room\t%s\n", r.ID)
			fmt.Fprintf(tw, "state\t%s\n", stateText(r))
			fmt.Fprintf(tw, "age\t%s\n", formatMS(r.AgeMS))
			if pt := peerText(r); pt != "" {
				fmt.Fprintf(tw, "peer\t%s\n", pt)
			}
			if r.Decision != nil {
				fmt.Fprintf(tw, "path\t%s (%s)\n", r.Decision.Path, r.Decision.Reason)
			}
			if ph := phasesText(r.Phases); ph != "" {
				fmt.Fprintf(tw, "phases\t%s\n", ph)
			}
			fmt.Fprintf(tw, "bytes\t%s\n", formatBytes(r.Bytes))
			if f := flagText(r); f != "" {
				fmt.Fprintf(tw, "flag\t%s\n", f)
			}
			if err := tw.Flush(); err != nil {
				return fmt.Errorf("inspect: format: %w", err)
			}
			for _, t := range r.History {
				fmt.Fprintf(&b, "  %8s  %s -> %s", formatMS(t.AtMS), orDash(t.From), t.To)
				if t.Phase != "" {
					fmt.Fprintf(&b, "/%s", t.Phase)
				}
				fmt.Fprintf(&b, " on %s", t.Event)
				if t.Reason != "" {
					fmt.Fprintf(&b, " (%s)", t.Reason)
				}
				b.WriteByte('\n')
			}
		}
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("inspect: write: %w", err)
	}
	return nil
}

// phasesText writes a router record's TTFT phases briefly.
func phasesText(p *debugdoc.Phases) string {
	if p == nil {
		return ""
	}
	var parts []string
	for _, f := range []struct {
		name string
		v    *float64
	}{{"ttft", p.TTFTMS}, {"queue", p.QueueMS}, {"prefill", p.PrefillMS}, {"transfer", p.TransferMS}, {"first_decode", p.FirstDecodeMS}} {
		if f.v != nil {
			parts = append(parts, f.name+" "+formatMS(*f.v))
		}
	}
	return strings.Join(parts, ", ")
}
