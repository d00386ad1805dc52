package model

// SetAttnPath chooses the attention form of every forward step: "rows"
// (per-query for every sequence), "tiles" (tiles for every sequence whose
// tiles hold four query rows, even at kernel levels without block
// assembly), "" (the automatic choice). It returns a function that restores the previous one. Tests
// only; not safe with steps in flight.
func SetAttnPath(p string) (restore func()) {
	prev := attnForce
	switch p {
	case "rows":
		attnForce = attnRows
	case "tiles":
		attnForce = attnTiles
	default:
		attnForce = attnAuto
	}
	return func() { attnForce = prev }
}

// RaceEnabled reports whether the tests run under the race detector.
const RaceEnabled = raceEnabled
