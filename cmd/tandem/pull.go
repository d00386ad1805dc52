package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"tandem/internal/modelhub"
	"tandem/internal/telemetry"
)

// progressLogEvery is the interval of progress log lines when stderr is not
// a terminal.
const progressLogEvery = 5 * time.Second

func pullCmd() *cobra.Command {
	var logFormat string
	cmd := &cobra.Command{
		Use:   "pull [hf.co/]ORG/REPO[:QUANT] | https://huggingface.co/ORG/REPO/resolve/REV/FILE.gguf",
		Short: "Download a GGUF model from the Hugging Face hub into the local cache",
		Long: `Pull downloads a GGUF file from the Hugging Face hub into the model cache
($TANDEM_HOME, default ~/.cache/tandem), verifying its sha256, and records the
reference so that --model REF and ` + "`tandem models`" + ` find it. :QUANT picks the
file whose name carries that quantization tag (case-insensitive); without one,
the Q4_K_M file, else the repository's only GGUF. A cached model is not
downloaded again.

REF is hf.co/ORG/REPO[:QUANT], huggingface.co/ORG/REPO[:QUANT], a file URL, or
the short ORG/REPO[:QUANT]. Where a model is expected (--model, model info,
chat), a path that exists is always the file: a short reference is taken as one
only when no file or folder of that name exists and it does not end in .gguf.

A download the network cuts (reset connection, short body, nothing received for
60 s, a 5xx answer) is resumed within the same pull with a Range request, up to
$TANDEM_PULL_RETRIES times (default 5; 0: none) after waits of 1, 2, 4, 8, 16 s.
What is still missing after that stays as a partial file that the next pull
resumes. $HF_ENDPOINT sets the hub's URL, $HF_TOKEN the token for private or
gated models. A download the hub announces no size for stops at
$TANDEM_PULL_MAX_BYTES (default 50G); one still running after
$TANDEM_PULL_TIMEOUT (default 6h, all retries together), or slower than
256 KiB in 30 s, stops and resumes on the next pull. Names and messages from the
hub are printed with control characters escaped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := loggerTo(cmd.ErrOrStderr(), logFormat)
			if err != nil {
				return err
			}
			h, err := newHub(cmd.ErrOrStderr(), log)
			if err != nil {
				return err
			}
			e, err := h.Pull(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pulled %s\n  file    %s\n  size    %s\n  sha256  %s\n  path    %s\n",
				modelhub.Printable(e.Reference), modelhub.Printable(e.File), sizeString(e.Size), e.SHA256, e.Path)
			return nil
		},
	}
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	return cmd
}

// loggerTo is a logger of format at level info on w (commands without
// --log-level).
func loggerTo(w io.Writer, format string) (*slog.Logger, error) {
	return telemetry.NewLogger(w, format, "info")
}

// newHub returns the hub client configured from the environment, drawing
// download progress on w when it is a terminal and logging it otherwise.
func newHub(w io.Writer, log *slog.Logger) (*modelhub.Hub, error) {
	h, err := modelhub.FromEnv()
	if err != nil {
		return nil, err
	}
	h.Logger = log
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		h.Progress = progressBar(w)
	} else {
		h.Progress = progressLog(log)
	}
	return h, nil
}

// resolveModel turns a --model value into a file path: a hub reference is
// pulled on first use (later uses find it in the cache without asking the
// hub); anything else, or a reference that names an existing file or
// folder, is a path. So a path that exists always wins, and a short
// ORG/REPO[:QUANT] is read as a hub reference only when nothing of that
// name exists here.
func resolveModel(ctx context.Context, m string) (string, error) {
	return resolveModelTo(ctx, m, os.Stderr, slog.Default())
}

// resolveModelTo is resolveModel with pull progress on w and notes to log.
func resolveModelTo(ctx context.Context, m string, w io.Writer, log *slog.Logger) (string, error) {
	if !modelhub.IsRef(m) {
		return m, nil
	}
	if _, err := os.Stat(m); err == nil {
		return m, nil
	}
	short := modelhub.IsShortRef(m)
	h, err := newHub(w, log)
	if err != nil {
		return "", err
	}
	e, ok, err := h.Lookup(m)
	if err != nil {
		return "", err
	}
	if !ok {
		log.Info("model not in the cache: pulling it", "reference", m, "cache", h.Dir)
		if e, err = h.Pull(ctx, m); err != nil {
			if short {
				return "", fmt.Errorf("no file %s here, so it was taken as the hub reference hf.co/%s: %w", m, m, err)
			}
			return "", err
		}
	}
	log.Info("using the cached model", "reference", e.Reference, "file", e.File, "path", e.Path)
	return e.Path, nil
}

// progressBar redraws one line per download on a terminal.
func progressBar(w io.Writer) func(modelhub.Progress) {
	var start time.Time
	return func(p modelhub.Progress) {
		if start.IsZero() {
			start = time.Now()
		}
		const width = 30
		bar, pct := strings.Repeat("-", width), ""
		if p.Total > 0 {
			n := int(p.Done * width / p.Total)
			bar = strings.Repeat("=", n) + strings.Repeat("-", width-n)
			pct = fmt.Sprintf("%3d%% ", p.Done*100/p.Total)
		}
		rate := ""
		if s := time.Since(start).Seconds(); s > 0.5 {
			rate = "  " + sizeString(int64(float64(p.Done-p.Resumed)/s)) + "/s"
		}
		fmt.Fprintf(w, "\r%s [%s] %s%s / %s%s\x1b[K", p.File, bar, pct, sizeString(p.Done), totalString(p.Total), rate)
		if p.Final {
			fmt.Fprintln(w)
			start = time.Time{}
		}
	}
}

// progressLog logs a download's progress every progressLogEvery and at its end.
func progressLog(log *slog.Logger) func(modelhub.Progress) {
	var last time.Time
	return func(p modelhub.Progress) {
		now := time.Now()
		if !p.Final && now.Sub(last) < progressLogEvery {
			return
		}
		last = now
		attrs := []any{"file", p.File, "done_bytes", p.Done, "total_bytes", p.Total}
		if p.Total > 0 {
			attrs = append(attrs, "percent", p.Done*100/p.Total)
		}
		if p.Resumed > 0 {
			attrs = append(attrs, "resumed_from", p.Resumed)
		}
		msg := "downloading"
		if p.Final {
			msg, last = "download ended", time.Time{}
		}
		log.Info(msg, attrs...)
	}
}

func totalString(n int64) string {
	if n < 0 {
		return "?"
	}
	return sizeString(n)
}

// sizeString formats a byte count with a binary unit.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
