//go:build unix

package cluster

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// listenShared opens the routers' listening socket on addr and returns it
// as a file to pass to each router (--listen-fd), and its address.
//
// The file's descriptor is left in blocking mode, so that os/exec, which
// puts every descriptor it passes into blocking mode, has nothing to
// change: the mode belongs to the socket, shared with every router, and a
// router blocked in accept(2) could not be woken to stop. Each router sets
// it non-blocking when it opens its listener. This process never accepts.
func listenShared(addr string) (*os.File, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close() // the duplicate below keeps the socket open
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) {
		syscall.ForkLock.RLock() // no child may inherit the duplicate before it is close-on-exec
		defer syscall.ForkLock.RUnlock()
		if fd, dupErr = syscall.Dup(int(s)); dupErr == nil {
			syscall.CloseOnExec(fd)
			dupErr = syscall.SetNonblock(fd, false)
		}
	}); err != nil {
		return nil, nil, err
	}
	if dupErr != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return nil, nil, fmt.Errorf("duplicate the listening socket: %w", dupErr)
	}
	return os.NewFile(uintptr(fd), "routers-listener"), ln.Addr(), nil
}
