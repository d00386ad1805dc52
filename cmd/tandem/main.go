package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tandem:", err)
		os.Exit(1)
	}
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tandem",
		Short:         "Disaggregated LLM serving with a pure Go engine",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("tandem {{.Version}}\n")
	root.AddCommand(versionCmd(), generateCmd(), modelCmd(), benchCmd(), serveCmd(), prefillCmd(), decodeCmd(), upCmd(), routeCmd(), inspectCmd(), pullCmd(), modelsCmd())
	return root
}
