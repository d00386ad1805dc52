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

// setLegTiming writes the first stream's leg timing that is not empty:
// as an HTTP trailer of a stream (trailer true: the headers are out), or
// as a header of a whole answer not yet written.
func setLegTiming(w http.ResponseWriter, streams []Stream, trailer bool) {
	for _, st := range streams {
		lt, ok := st.(LegTimer)
		if !ok {
			continue
		}
		if v := lt.LegTiming(); v != "" {
			name := leg.HeaderTiming
			if trailer {
				name = http.TrailerPrefix + name
			}
			w.Header().Set(name, v)
			return
		}
	}
}
