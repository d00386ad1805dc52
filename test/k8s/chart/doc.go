// Package chart tests the Helm chart deploy/helm/tandem on a real
// kube-apiserver (see package kubetest): helm lint in every configuration
// (the chart's ci/*-values.yaml, chart-testing's convention); every object
// that helm template renders applied with server-side apply, as a dry run and
// then for real, in a namespace that enforces the restricted Pod Security
// Standard, with no warning allowed; a Pod made from each Deployment's
// template admitted under that standard; the routers' discovery selector
// matching the worker pods and nothing else; the routers' ServiceAccount
// allowed to watch pods and nothing more; and a generated cluster token kept
// by helm upgrade.
//
// Run it with the tier's binaries:
//
//	KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh) TANDEM_K8S_TESTS=1 go -C test/k8s test ./chart/
package chart
