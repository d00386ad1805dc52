package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
)

// psMaxBody bounds each document ps reads.
const psMaxBody = 8 << 20

// psDoc is what `tandem ps` reports about the server at a URL.
type psDoc struct {
	URL string `json:"url"`
	// Kind is "router" (a cluster's router: its /health counts workers by
	// role) or "serve" (one process).
	Kind   string    `json:"kind"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
	Models []psModel `json:"models"`
	// Roles counts a router's workers by role.
	Roles map[string]psCount `json:"roles,omitempty"`
	// Workers are a router's workers from /debug/cluster; WorkersError says
	// why they could not be listed (no cluster token, ...).
	Workers      []psWorker `json:"workers,omitempty"`
	WorkersError string     `json:"workers_error,omitempty"`
}

type psModel struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

type psCount struct {
	Healthy    int `json:"healthy"`
	Configured int `json:"configured"`
}

type psWorker struct {
	URL       string `json:"url"`
	Role      string `json:"role"`
	Healthy   bool   `json:"healthy"`
	Draining  bool   `json:"draining,omitempty"`
	Inflight  int    `json:"inflight"`
	LiveRooms *int   `json:"live_rooms,omitempty"`
	Problem   string `json:"problem,omitempty"`
}

func psCmd() *cobra.Command {
	var (
		format, tokenFile, apiKey string
		timeout                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ps [URL]",
		Short: "Show what the server or cluster at URL serves: model, status, workers by role",
		Long: `Ps asks the server at URL (default http://127.0.0.1:8000, where ` + "`tandem up`" + ` and
` + "`tandem serve`" + ` listen) what it serves: the model id and context cap from GET /v1/models,
its status from GET /health (a router counts its healthy and configured workers by
role), and for a router each worker (URL, role, health, requests in flight, live
rooms) from GET /debug/cluster. That last one needs the cluster credential, found as
` + "`tandem inspect`" + ` finds it: $TANDEM_CLUSTER_TOKEN, --cluster-token-file, or the token file
` + "`tandem up`" + ` keeps on this host for the router at URL; without it the workers are left
out and ps says why. --api-key (default $TANDEM_API_KEY) is sent to /v1/models.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			u := "http://127.0.0.1:8000"
			if len(args) == 1 {
				u = args[0]
			}
			u = strings.TrimSuffix(strings.TrimRight(u, "/"), "/v1")
			if apiKey == "" {
				apiKey = os.Getenv("TANDEM_API_KEY")
			}
			doc, err := psQuery(cmd.Context(), u, apiKey, tokenFile, timeout)
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			return doc.writeText(cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&format, "format", "text", "output: text or json")
	fs.StringVar(&tokenFile, "cluster-token-file", "", "file holding the cluster token, for /debug/cluster (default: $TANDEM_CLUSTER_TOKEN, else the file `tandem up` keeps)")
	fs.StringVar(&apiKey, "api-key", "", "API key for /v1/models (default: $TANDEM_API_KEY)")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "limit for each request")
	return cmd
}

// psQuery gathers the psDoc of the server at base.
func psQuery(ctx context.Context, base, apiKey, tokenFile string, timeout time.Duration) (*psDoc, error) {
	plain := &http.Client{Timeout: timeout}
	doc := &psDoc{URL: base, Kind: "serve", Models: []psModel{}}

	var models struct {
		Data []psModel `json:"data"`
	}
	if err := psGet(ctx, plain, base+"/v1/models", apiKey, &models); err != nil {
		return nil, fmt.Errorf("%w (is a tandem serve or up running at %s?)", err, base)
	}
	doc.Models = append(doc.Models, models.Data...)

	var health struct {
		Status  string   `json:"status"`
		Reason  string   `json:"reason"`
		Prefill *psCount `json:"prefill"`
		Decode  *psCount `json:"decode"`
	}
	if err := psGet(ctx, plain, base+"/health", "", &health); err != nil {
		return nil, err
	}
	doc.Status, doc.Reason = health.Status, health.Reason
	if health.Prefill == nil && health.Decode == nil {
		return doc, nil // one process: nothing more to list
	}
	doc.Kind = "router"
	doc.Roles = map[string]psCount{}
	if health.Prefill != nil {
		doc.Roles["prefill"] = *health.Prefill
	}
	if health.Decode != nil {
		doc.Roles["decode"] = *health.Decode
	}

	if tokenFile == "" && os.Getenv("TANDEM_CLUSTER_TOKEN") == "" {
		tokenFile = upTokenFor(base)
	}
	if tokenFile == "" && os.Getenv("TANDEM_CLUSTER_TOKEN") == "" {
		doc.WorkersError = "listing the workers needs the cluster token: set $TANDEM_CLUSTER_TOKEN or --cluster-token-file (`tandem up` on this host keeps it where ps finds it)"
		return doc, nil
	}
	tok, err := clusterToken(tokenFile)
	if err != nil {
		return nil, err
	}
	keys, err := leg.NewKeys(tok)
	if err != nil {
		return nil, err
	}
	var cl debugdoc.Cluster
	c := &http.Client{Timeout: timeout, Transport: keys.Transport(nil)}
	if err := psGet(ctx, c, base+"/debug/cluster", "", &cl); err != nil {
		var se *psStatusError
		if errors.As(err, &se) && se.status == http.StatusUnauthorized {
			doc.WorkersError = "the cluster token given is not this router's (401 on /debug/cluster)"
			return doc, nil
		}
		doc.WorkersError = err.Error()
		return doc, nil
	}
	live := map[string]int{}
	for _, p := range cl.Processes {
		if p.Worker != "" && p.Error == "" {
			live[p.Worker] = p.Live
		}
	}
	for _, p := range cl.Processes {
		for _, w := range p.Workers {
			pw := psWorker{URL: w.URL, Role: w.Role, Healthy: w.Healthy, Draining: w.Draining, Inflight: w.Inflight, Problem: w.Problem}
			if n, ok := live[w.URL]; ok {
				pw.LiveRooms = &n
			}
			doc.Workers = append(doc.Workers, pw)
		}
	}
	return doc, nil
}

type psStatusError struct {
	url    string
	status int
	body   string
}

func (e *psStatusError) Error() string {
	return fmt.Sprintf("GET %s answered %d: %s", e.url, e.status, e.body)
}

// psGet GETs u and decodes its JSON into v.
func psGet(ctx context.Context, c *http.Client, u, apiKey string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, psMaxBody+1))
	if err != nil {
		return fmt.Errorf("GET %s: read: %w", u, err)
	}
	if len(b) > psMaxBody {
		return fmt.Errorf("GET %s: more than %d bytes", u, psMaxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return &psStatusError{u, resp.StatusCode, strings.TrimSpace(string(b[:min(len(b), 300)]))}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: not the JSON a tandem server answers: %w", u, err)
	}
	return nil
}

func (d *psDoc) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "URL\t%s (%s)\n", d.URL, d.Kind)
	for _, m := range d.Models {
		ctx := ""
		if m.MaxModelLen > 0 {
			ctx = fmt.Sprintf(" (max_model_len %d)", m.MaxModelLen)
		}
		fmt.Fprintf(tw, "MODEL\t%s%s\n", m.ID, ctx)
	}
	status := d.Status
	if d.Reason != "" {
		status += ": " + d.Reason
	}
	fmt.Fprintf(tw, "STATUS\t%s\n", status)
	for _, role := range []string{"prefill", "decode"} {
		if c, ok := d.Roles[role]; ok {
			fmt.Fprintf(tw, "%s\t%d of %d healthy\n", strings.ToUpper(role), c.Healthy, c.Configured)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.WorkersError != "" {
		_, err := fmt.Fprintf(w, "workers: %s\n", d.WorkersError)
		return err
	}
	if len(d.Workers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tROLE\tHEALTHY\tIN FLIGHT\tLIVE ROOMS\tPROBLEM")
	for _, wk := range d.Workers {
		h := "yes"
		switch {
		case wk.Draining:
			h = "draining"
		case !wk.Healthy:
			h = "no"
		}
		live := "?"
		if wk.LiveRooms != nil {
			live = fmt.Sprint(*wk.LiveRooms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", wk.URL, wk.Role, h, wk.Inflight, live, wk.Problem)
	}
	return tw.Flush()
}
