package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionString describes this build from what the Go toolchain stamped
// into it: the module version (a tag when built with `go install
// ...@vX`, "(devel)" from a checkout), the VCS revision and time with
// "+dirty" for uncommitted changes, the Go version and the platform.
func versionString() string {
	v, rev, when, dirty := "(devel)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	b.WriteString(v)
	if rev != "" {
		fmt.Fprintf(&b, " (commit %.12s", rev)
		if dirty {
			b.WriteString("+dirty")
		}
		if when != "" {
			b.WriteString(", " + when)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "tandem", versionString())
		},
	}
}
