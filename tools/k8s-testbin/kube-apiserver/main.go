// Command kube-apiserver is the Kubernetes API server of k8s.io/kubernetes,
// built from this wrapper module because `go install` refuses
// k8s.io/kubernetes (its go.mod replaces the staging modules). Tandem's
// Kubernetes test tier (test/k8s) runs it against the etcd beside it.
package main

import (
	"os"
	_ "time/tzdata" // the upstream binary carries the time zone database too

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
