package sim

// chooser picks the next item in exhaustive mode.
type chooser struct{}
