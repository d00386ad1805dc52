// Package kubetest runs a real Kubernetes control plane (etcd and
// kube-apiserver, started by controller-runtime's envtest) for Tandem's
// Kubernetes test tier, and gives tests what they need on it: a kubeconfig
// file a local process (a router, helm) can use, namespaces, server-side
// apply of rendered manifests, and Pods whose lifecycle a test drives by hand,
// since there is no kubelet, scheduler or controller manager: CreatePod binds
// a Pod to a node name (so that a graceful delete keeps it, terminating, as a
// kubelet would), SetPodReady writes its status (Ready, phase Running, a pod
// IP such as 127.0.0.2) through the status subresource, TerminatePod deletes
// it with a grace period (it stays, with a deletionTimestamp) and DeletePod
// removes it.
//
// The binaries come from scripts/k8s-testbin.sh, which builds them into a
// cache and prints its folder: set KUBEBUILDER_ASSETS to it (or
// TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD and TEST_ASSET_HELM one by one).
// When one is missing a test skips saying how to build them, unless
// TANDEM_K8S_TESTS=1 (as CI sets it), which turns the skip into a failure;
// TANDEM_K8S_TESTS=0 skips the tier even with the binaries there.
//
// One control plane serves a whole test binary: Shared starts it on first
// use and Main stops it after the tests. Each test works in namespaces of
// its own.
package kubetest
