// Command kube-apiserver is the Kubernetes API server of k8s.io/kubernetes,
// built from this wrapper module because `go install` refuses
// k8s.io/kubernetes (its go.mod replaces the staging modules). Tandem's
// Kubernetes test tier (test/k8s) runs it against the etcd beside it.
package main
