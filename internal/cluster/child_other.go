//go:build !linux

package cluster

import (
	"os/exec"
	"syscall"
)

// childAttr puts a child in a process group of its own. Only Linux can
// tie a child's life to its parent's (see child_linux.go); elsewhere the
// children of a parent killed with SIGKILL keep running.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// startChild starts cmd.
func startChild(cmd *exec.Cmd) error { return cmd.Start() }
