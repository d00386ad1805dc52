package invariant_test

import (
	"errors"
	"testing"

	"tandem/internal/invariant"
)

func TestFailfPanicsWithError(t *testing.T) {
	defer func() {
		v := recover()
		err, ok := v.(error)
		var ie *invariant.Error
		if !ok || !errors.As(err, &ie) || ie.Msg != "room: broken invariant: page 3 freed twice" {
			t.Errorf("recovered %#v, want an *invariant.Error naming the package and the problem", v)
		}
	}()
	invariant.Failf("room", "page %d freed twice", 3)
}

func TestCheck(t *testing.T) {
	invariant.Check(true, "x", "never")
	defer func() {
		if recover() == nil {
			t.Errorf("Check(false) did not panic")
		}
	}()
	invariant.Check(false, "x", "boom")
}
