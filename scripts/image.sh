#!/usr/bin/env bash
# Builds Tandem's container image without a Docker engine: the static tandem
# binary (CGO_ENABLED=0), then an OCI image layout holding it (tools/image),
# running as user 65532 with /usr/local/bin/tandem as its entrypoint and this
# machine's CA bundle for the hub client. Prints the layout folder and the
# image's digest.
#
#   scripts/image.sh [OUT]        OUT defaults to dist/image
#   IMAGE_TAG=NAME:TAG            the image's name in the layout (default tandem:<git commit>)
#   GOARCH=arm64                  build for another architecture
#
# Push it with crane (go install github.com/google/go-containerregistry/cmd/crane@v0.22.1):
#   crane push dist/image REGISTRY/tandem:TAG
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

out=${1:-dist/image}
case $out in /*) ;; *) out=$PWD/$out ;; esac
arch=${GOARCH:-$(go env GOARCH)}
rev=$(git rev-parse --short HEAD 2>/dev/null || echo dev)
tag=${IMAGE_TAG:-tandem:$rev}
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$ca" ]; then
  echo "image.sh: no CA bundle at $ca (apt-get install ca-certificates): the image gets none, and the hub client cannot verify TLS" >&2
  ca=""
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$work/tandem" ./cmd/tandem
mkdir -p "$(dirname "$out")"
GOARCH= go -C tools/image run . -binary "$work/tandem" -out "$out" -ca "$ca" -tag "$tag" -arch "$arch" -version "$rev"
