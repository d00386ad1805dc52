//go:build race

package model

// raceEnabled reports whether the race detector is on: the slowest
// attention tests then run a smaller part.
const raceEnabled = true
