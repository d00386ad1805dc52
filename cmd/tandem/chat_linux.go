package main

import "syscall"

// chatChildAttr puts the server `chat --model` starts in its own process
// group (chat stops it itself; a Ctrl-C at the terminal reaches chat only)
// and has Linux end it when chat dies, even by SIGKILL.
func chatChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
