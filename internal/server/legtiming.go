package server

import (
	"net/http"

	"tandem/internal/api/leg"
)

// LegTimer is implemented by a Stream that can report its worker's
// timings of a router leg (package worker's prefill and decode streams);
// LegTiming returns the value of leg.HeaderTiming, "" when there is none.
type LegTimer interface {
	LegTiming() string
}

// legTiming returns the first stream's leg timing that is not empty.
func legTiming(streams []Stream) string {
	for _, st := range streams {
		if lt, ok := st.(LegTimer); ok {
			if v := lt.LegTiming(); v != "" {
				return v
			}
		}
	}
	return ""
}

// writeLegTiming sends a router leg's worker timings (see leg.HeaderTiming):
// as a comment event of a stream (sw not nil; just before [DONE]) or as a
// header of a whole answer not yet written.
func writeLegTiming(w http.ResponseWriter, sw *sseWriter, streams []Stream) error {
	v := legTiming(streams)
	switch {
	case v == "":
		return nil
	case sw != nil:
		return sw.comment(leg.TimingComment + v)
	}
	w.Header().Set(leg.HeaderTiming, v)
	return nil
}

// comment writes one SSE comment event (text must hold no line break).
func (s *sseWriter) comment(text string) error {
	return s.raw([]byte(": " + text + "\n\n"))
}
