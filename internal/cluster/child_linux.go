package cluster

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// childAttr puts a child in a process group of its own and asks the
// kernel to send it SIGTERM when its parent dies (PR_SET_PDEATHSIG), so
// the children of a `tandem up` killed with SIGKILL drain and exit
// instead of serving on as orphans.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// The kernel's "parent" for PR_SET_PDEATHSIG is the thread that forked
// the child, not the process: a child forked from a Go thread that later
// exits would be signalled then. So every child is started from one
// goroutine locked to its thread for the life of the process (it never
// returns, so the runtime never retires the thread).
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild starts cmd from the spawner thread.
func startChild(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd, done}
	return <-done
}
