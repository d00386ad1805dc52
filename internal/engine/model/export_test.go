package model

// SetAttnPath makes every forward step use one attention form ("rows" or
// "tiles"; "" restores the automatic choice) and returns a function that
// restores the previous one. Tests only; not safe with steps in flight.
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
