//go:build !linux

package main

import "syscall"

// chatChildAttr puts the server `chat --model` starts in its own process
// group; without Linux's parent-death signal it outlives a killed chat.
func chatChildAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
