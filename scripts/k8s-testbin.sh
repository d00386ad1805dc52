#!/usr/bin/env bash
# Builds the binaries of the Kubernetes test tier (test/k8s): kube-apiserver
# and etcd from the wrapper module tools/k8s-testbin, and helm with `go
# install`, into a cache outside the repository, and prints that directory
# (nothing else goes to stdout). A binary already there is not built again.
#
#   TANDEM_K8S_TESTBIN_CACHE  parent of the cache (default
#                             ${XDG_CACHE_HOME:-$HOME/.cache}/tandem/k8s-testbin)
#
# The directory is named after the versions and a hash of the wrapper module
# and link flags, so a change of either builds a new set beside the old.
# Use it as KUBEBUILDER_ASSETS (controller-runtime's envtest looks for
# kube-apiserver and etcd there):
#
#   KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh) TANDEM_K8S_TESTS=1 go -C test/k8s test ./...
#
# A cold build costs about 32 CPU-minutes (kube-apiserver 22 with etcd, helm
# 10): 15-20 minutes on an idle 2-core machine; see test/k8s/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
HELM_VERSION=v4.3.2

mod=tools/k8s-testbin
# The versions of k8s.io/kubernetes and etcd are those of the wrapper's go.mod;
# refuse to name the cache after versions the module does not build.
grep -q "k8s.io/kubernetes $K8S_VERSION\$" $mod/go.mod || { echo "k8s-testbin.sh: $mod/go.mod does not require k8s.io/kubernetes $K8S_VERSION" >&2; exit 1; }
grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION\$" $mod/go.mod || { echo "k8s-testbin.sh: $mod/go.mod does not require etcd server $ETCD_VERSION" >&2; exit 1; }

# Version strings as the upstream release builds stamp them (hack/lib/version.sh).
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
kv=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kv="$kv -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
export CGO_ENABLED=0

# The cache folder: the versions, and a hash of what else decides the
# binaries (the wrapper module and the link flags), so editing this script's
# comments does not cost a rebuild.
hash=$( (cat $mod/go.mod $mod/go.sum $mod/*/main.go; echo "$kv") | sha256sum | cut -c1-12)
root=${TANDEM_K8S_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/k8s-testbin}
dir=$root/kube-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION-$(go env GOVERSION)-$hash
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -rf "$dir"/.build-*  # what an interrupted run left

# build NAME: unless $dir/NAME is there, runs build_NAME OUT (which writes
# OUT/NAME) in a fresh folder, then moves the result in place, so an
# interrupted build leaves nothing that looks built.
build() {
  local name=$1 tmp start=$SECONDS
  if [ -x "$dir/$name" ]; then
    echo "k8s-testbin: $name is built ($dir/$name)" >&2
    return
  fi
  echo "k8s-testbin: building $name" >&2
  tmp=$(mktemp -d "$dir/.build-$name.XXXXXX")
  "build_$name" "$tmp" >&2
  mv "$tmp/$name" "$dir/$name"
  rmdir "$tmp"
  echo "k8s-testbin: built $name in $((SECONDS - start)) s" >&2
}

build_kube-apiserver() { go -C $mod build -trimpath -ldflags "-s -w$kv" -o "$1/kube-apiserver" ./kube-apiserver; }
build_etcd() { go -C $mod build -trimpath -ldflags "-s -w" -o "$1/etcd" ./etcd; }
build_helm() {
  GOBIN=$1 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    helm.sh/helm/v4/cmd/helm@$HELM_VERSION
}
build kube-apiserver
build etcd
build helm

echo "$dir"
