//go:build !tandemfaults

package main

import (
	"github.com/spf13/pflag"

	"tandem/internal/pd/transfer"
)

// registerFaultFlags adds nothing: fault injection exists only in binaries
// built with -tags tandemfaults, so a production build cannot enable it.
func registerFaultFlags(*pflag.FlagSet, *pdFlags) {}

func (f *pdFlags) faults() (transfer.Faults, error) {
	_ = f.faultSpec // set only by the tandemfaults flag
	return nil, nil
}
