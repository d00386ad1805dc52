package loadgen

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// barInterval is how often the progress bar is redrawn on a terminal.
const barInterval = 200 * time.Millisecond

// startProgress reports progress to w until the returned function is called;
// that function writes a final update and returns once nothing more will be
// written. A nil w reports nothing.
func startProgress(w io.Writer, o Options, t *tally, start time.Time) (stop func()) {
	if w == nil {
		return func() {}
	}
	bar := isTerminal(w)
	interval := o.ProgressInterval
	if bar {
		interval = barInterval
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if bar {
					fmt.Fprintf(w, "\r%s\n", progressLine(o, t, start, true))
				}
				return
			case <-tick.C:
				if bar {
					fmt.Fprintf(w, "\r%s", progressLine(o, t, start, true))
				} else {
					fmt.Fprintf(w, "bench serve: %s\n", progressLine(o, t, start, false))
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressLine describes how far the run is: with a drawn bar on a
// terminal, as plain words otherwise.
func progressLine(o Options, t *tally, start time.Time, bar bool) string {
	ok, failed := int(t.completed.Load()), int(t.failed.Load())
	n := ok + failed
	elapsed := time.Since(start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(ok) / elapsed
	}
	if !bar {
		return fmt.Sprintf("%d/%d requests done (%d ok, %d failed), %.2f req/s, %.0f s", n, o.Requests, ok, failed, rate, elapsed)
	}
	const width = 30
	fill := width * n / o.Requests
	s := "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]"
	// Trailing spaces wipe what a longer previous line left behind.
	return fmt.Sprintf("%s %d/%d  ok %d  failed %d  %.2f req/s  %.1f s   ", s, n, o.Requests, ok, failed, rate, elapsed)
}

// isTerminal reports whether w is a file that is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}
