//go:build !linux

package model

import "syscall"

// rusageThread falls back to the whole process outside Linux.
const rusageThread = syscall.RUSAGE_SELF
