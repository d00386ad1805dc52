package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/api/leg"
	"tandem/internal/inspect"
)

func inspectCmd() *cobra.Command {
	var (
		o         inspect.Options
		timeout   time.Duration
		tokenFile string
	)
	cmd := &cobra.Command{
		Use:   "inspect URL [REQUEST_ID] [--format text|json] [--all]",
		Short: "Show the rooms of a router and its workers; exit 1 if any is past its deadline",
		Long: `Inspect reads GET URL/debug/cluster from a router (its own request records and
every worker's room table) and prints a table per process: room, request,
state/phase, age, peer, bytes, and a FLAG column marking rooms that have not
ended and are past their deadline ("OVERDUE 3.2s"). Only live rooms are listed
unless --all. The exit status is 1 when any room is overdue, so scripts can
assert that none is stuck. /debug/cluster needs the cluster credential, derived
from the cluster token ($TANDEM_CLUSTER_TOKEN or --cluster-token-file; with
neither, the token file that ` + "`tandem up`" + ` on this host keeps for the router at URL).

With a REQUEST_ID (the X-Request-Id the router answered with; a room id or a
trace id works too) it follows that one request across the cluster: its trace
id, the router's records of it and the prefill and decode rooms on the workers,
each with its state (a decode room reads "decoding" while its request still
generates), phases and history. It exits 1 when no process has the request.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys *leg.Keys
			if tokenFile == "" && os.Getenv("TANDEM_CLUSTER_TOKEN") == "" {
				tokenFile = upTokenFor(args[0]) // a cluster of `tandem up` on this host
			}
			if tokenFile != "" || os.Getenv("TANDEM_CLUSTER_TOKEN") != "" {
				tok, err := clusterToken(tokenFile)
				if err != nil {
					return err
				}
				if keys, err = leg.NewKeys(tok); err != nil {
					return err
				}
			}
			c := &http.Client{Timeout: timeout, Transport: inspectTransport{keys.Transport(nil), keys != nil}}
			if len(args) == 2 {
				return inspect.InspectRequest(cmd.Context(), c, args[0], args[1], o, cmd.OutOrStdout())
			}
			return inspect.Inspect(cmd.Context(), c, args[0], o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Format, "format", "text", "output: text (tables) or json (the document)")
	fs.BoolVar(&o.All, "all", false, "list finished rooms too")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "limit for fetching the document")
	fs.StringVar(&tokenFile, "cluster-token-file", "", "file holding the cluster token, for the /debug credential (default: $TANDEM_CLUSTER_TOKEN)")
	return cmd
}

// inspectTransport turns a 401 from the router into an error that says
// where the credential comes from.
type inspectTransport struct {
	base      http.RoundTripper
	haveToken bool
}

func (t inspectTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	resp.Body.Close()
	if t.haveToken {
		return nil, fmt.Errorf("%s answered 401: the cluster token given ($TANDEM_CLUSTER_TOKEN or --cluster-token-file) is not the router's", r.URL)
	}
	return nil, fmt.Errorf("%s answered 401: it needs the cluster credential; set $TANDEM_CLUSTER_TOKEN or --cluster-token-file to the cluster token", r.URL)
}
