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
	cmd.AddCommand(modelsRmCmd())
	return cmd
}

func modelsRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm REF [REF...]",
		Aliases: []string{"remove"},
		Short:   "Remove pulled models from the local cache",
		Long: `Rm removes each reference's manifest from the model cache and its file once
no other reference names the same content (as ` + "`ollama rm`" + ` does). REF is written as for
pull: ORG/REPO[:QUANT], hf.co/ORG/REPO[:QUANT] or a file URL; ` + "`tandem models`" + ` lists them.
A model in use by a running server stays readable by it until it exits.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := modelhub.DefaultDir()
			if err != nil {
				return err
			}
			h := &modelhub.Hub{Dir: dir}
			for _, ref := range args {
				e, blobGone, err := h.Remove(ref)
				if err != nil {
					return err
				}
				if blobGone {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s freed)\n", modelhub.Printable(e.Reference), sizeString(e.Size))
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s (its file stays: another reference names it)\n", modelhub.Printable(e.Reference))
				}
			}
			return nil
		},
	}
}
