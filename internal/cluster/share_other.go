//go:build !unix

package cluster

import (
	"errors"
	"net"
	"os"
)

// listenShared is not available: routers sharing one listening socket
// need Unix descriptor passing.
func listenShared(string) (*os.File, net.Addr, error) {
	return nil, nil, errors.New("cluster: routers sharing one port need a Unix system")
}
