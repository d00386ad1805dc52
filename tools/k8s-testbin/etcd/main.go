// Command etcd is the etcd server of go.etcd.io/etcd/server/v3, built from
// this wrapper module because `go install` refuses the server module (its
// go.mod replaces its sibling modules). It is the store of the test tier's
// kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
