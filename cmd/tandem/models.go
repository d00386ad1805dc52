package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"tandem/internal/modelhub"
)

func modelsCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models pulled into the local cache",
		Long: `Models lists every reference pulled with ` + "`tandem pull`" + ` (or through --model):
the reference, the repository file, its size, the start of its sha256 and when
it was pulled. The cache is $TANDEM_HOME (default ~/.cache/tandem).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			dir, err := modelhub.DefaultDir()
			if err != nil {
				return err
			}
			es, err := (&modelhub.Hub{Dir: dir}).List()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				type row struct {
					modelhub.Entry
					Path string `json:"path"`
				}
				rows := make([]row, len(es))
				for i, e := range es {
					rows[i] = row{e, e.Path}
				}
				return json.NewEncoder(out).Encode(rows)
			}
			if len(es) == 0 {
				fmt.Fprintf(out, "no models in %s: pull one with `tandem pull hf.co/ORG/REPO:QUANT`\n", dir)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "REFERENCE\tFILE\tSIZE\tSHA256\tPULLED")
			for _, e := range es {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", modelhub.Printable(e.Reference), modelhub.Printable(e.File), sizeString(e.Size), e.SHA256[:12], e.PulledAt.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}
