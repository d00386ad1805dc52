//go:build tandemfaults

package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"tandem/internal/pd/faults"
	"tandem/internal/pd/transfer"
)

// registerFaultFlags adds --inject-faults to the worker roles. This file
// is compiled only with -tags tandemfaults (failure tests).
func registerFaultFlags(fs *pflag.FlagSet, f *pdFlags) {
	fs.StringVar(&f.faultSpec, "inject-faults", "", "TEST BUILD ONLY: inject transfer faults, e.g. drop=0.01,delay=0.1:20ms,cut=0.001,seed=3 (see internal/pd/faults)")
}

func (f *pdFlags) faults() (transfer.Faults, error) {
	if f.faultSpec == "" {
		return nil, nil
	}
	sp, err := faults.Parse(f.faultSpec)
	if err != nil {
		return nil, fmt.Errorf("--inject-faults: %w", err)
	}
	fmt.Fprintf(os.Stderr, "WARNING: injecting transfer faults (%s): this is a test build\n", f.faultSpec)
	return faults.New(sp), nil
}
