package room

// PlantedBug names a bug deliberately planted in the core, for tests only.
// The simulator (package sim) plants one to prove that its invariants catch
// the class of bug it stands for; a simulator that passes with the bug
// planted would prove nothing.
//
// Nothing outside tests sets Config.Planted: no flag, environment variable
// or configuration file reaches it, and TestPlantedOnlyInTests fails if a
// non-test file of the module outside this package names a planted bug.
type PlantedBug uint8

// The planted bugs. PlantedNone is the zero value and the only one
// production uses.
const (
	// PlantedNone plants nothing.
	PlantedNone PlantedBug = iota
	// PlantedDropEarlyAbort makes the prefill role drop an ABORT for a room
	// it does not know yet (counted as rejected) instead of remembering a
	// Failed tombstone: SGLang's behaviour after #24539. The router's
	// request that comes later then creates a live room that waits for a
	// HELLO decode will never send: the silent pin, bounded only by the
	// hello timeout.
	PlantedDropEarlyAbort
	// PlantedIgnoreState makes the decode role verify DONE against the
	// pages alone: it compares DONE's page bytes (Bytes less StateBytes)
	// with the page bytes it stored and never looks at the state's count
	// or checksum. A state frame lost on the way then goes unnoticed: the
	// sequence resumes from a state with a hole in it.
	PlantedIgnoreState
	plantedCount
)

var plantedNames = [...]string{"none", "drop_early_abort", "ignore_state"}

var _ = [1]int{}[len(plantedNames)-int(plantedCount)]

// String returns the planted bug's snake_case name ("drop_early_abort").
func (p PlantedBug) String() string { return name(plantedNames[:], "planted", int(p)) }
