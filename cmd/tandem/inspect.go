package main

import (
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/inspect"
)

func inspectCmd() *cobra.Command {
	var (
		o       inspect.Options
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "inspect URL [--format text|json] [--all]",
		Short: "Show the rooms of a router and its workers; exit 1 if any is past its deadline",
		Long: `Inspect reads GET URL/debug/cluster from a router (its own request records and
every worker's room table) and prints a table per process: room, request,
state/phase, age, peer, bytes, and a FLAG column marking rooms that have not
ended and are past their deadline ("OVERDUE 3.2s"). Only live rooms are listed
unless --all. The exit status is 1 when any room is overdue, so scripts can
assert that none is stuck.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := &http.Client{Timeout: timeout}
			return inspect.Inspect(cmd.Context(), c, args[0], o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Format, "format", "text", "output: text (tables) or json (the document)")
	fs.BoolVar(&o.All, "all", false, "list finished rooms too")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "limit for fetching the document")
	return cmd
}
