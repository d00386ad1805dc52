package engine_test

import (
	"fmt"
	"os"
	"testing"
)

var pkgTemp string

func tempDirForPackage() (string, error) { return pkgTemp, nil }

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "tandem-engine-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine tests: make temp dir:", err)
		os.Exit(1)
	}
	pkgTemp = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
