// Package discovery tests `tandem route --discovery k8s` on a real
// kube-apiserver (see package kubetest): a local router process, started
// with the Helm chart's router arguments (--discovery=k8s,
// --discovery-namespace, --discovery-selector) and a kubeconfig for the test
// API server, follows worker Pods that the test creates and marks Ready
// through the status subresource (there is no kubelet). Each Pod's podIP is
// a loopback address (127.0.0.2, 127.0.0.3, ...) where a real `tandem
// prefill` or `tandem decode` process listens, so the router's legs reach
// real workers. Under a steady open-loop load (5 requests/s) the fleet
// scales 1P1D -> 2P2D -> 1P1D:
//
//   - scale out: two Pods created (Pending: no room while not Ready), then
//     made Ready; each new worker must take a room within 1 s of its Pod
//     turning Ready;
//   - scale in: prefill-1's Pod is deleted with a grace period (a
//     deletionTimestamp, as a scale-in does): the router must take it out of
//     rotation and let its legs end; the test then does the kubelet's part
//     (SIGTERM to the worker, which drains and exits 0; the Pod deleted) and
//     the router must drop it. decode-1's Pod is deleted at once: the router
//     must drop it once its legs ended. Neither takes a room afterwards nor
//     holds a KV page;
//   - no request fails, and the remaining workers' KV pages all come back.
//
// It logs the figures: Pod Ready -> first room per new worker, the drain
// and drop times, requests sent and failed.
//
// The test reads only the processes' open endpoints (/ready, /metrics), so
// it needs nothing of Tandem's own packages. It builds the tandem binary
// from the repository (or takes $TANDEM_BIN).
//
// Run it with the tier's binaries:
//
//	KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh) TANDEM_K8S_TESTS=1 go -C test/k8s test ./discovery/
package discovery
