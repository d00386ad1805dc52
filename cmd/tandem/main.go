package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().ExecuteContext(signalContext()); err != nil {
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
	root.AddCommand(versionCmd(), generateCmd(), modelCmd(), benchCmd(), serveCmd(), prefillCmd(), decodeCmd(), upCmd(), routeCmd(), inspectCmd(), pullCmd(), modelsCmd(), psCmd(), chatCmd())
	return root
}
