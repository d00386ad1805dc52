// Package discovery tests `tandem route --discovery k8s` on a real
// kube-apiserver (see package kubetest): a local router process, started
// with the Helm chart's router arguments (--discovery=k8s,
// --discovery-namespace, --discovery-selector) and a kubeconfig for the test
// API server, follows worker Pods that the test creates and marks Ready
// through the status subresource (there is no kubelet). Each Pod's podIP is
// a loopback address (127.0.0.2, 127.0.0.3, ...) where a real `tandem
// prefill` or `tandem decode` process listens, so the router's legs reach
// real workers. Under a steady load the fleet scales 1P1D -> 2P2D (Pods
// created and made Ready) -> 1P1D (one Pod terminated with a grace period,
// as a scale-in does; one deleted at once): every request completes, each
// new worker takes a room within a second of its Pod turning Ready, a
// removed one gets no new room and finishes what it holds, and every
// worker's KV pages come back.
//
// The test reads only the processes' open endpoints (/ready, /metrics), so
// it needs nothing of Tandem's own packages. It builds the tandem binary
// from the repository (or takes $TANDEM_BIN).
//
// Run it with the tier's binaries:
//
//	KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh) TANDEM_K8S_TESTS=1 go -C test/k8s test ./discovery/
package discovery
