#!/usr/bin/env bash
# Builds gen.c against the ggml libraries that the npm package
# node-llama-cpp@3.21.1 ships prebuilt, runs it, and writes the vectors file
# the tensor and kernels tests read. Not part of the Go build; see README.md.
#
#   scripts/quantvectors/build.sh [NLC_DIR [OUT]]
#
# NLC_DIR is a folder where `npm install node-llama-cpp@3.21.1` was run
# (default /tmp/nlc; it is installed there when missing). The ggml headers
# come from the llama.cpp source bundle in that package (gitRelease.bundle,
# llama.cpp 80fb11a), which matches the prebuilt libraries. OUT (default
# $TANDEM_SHARED, else ../shared, /testdata/quant/ggml-quant-vectors.gguf)
# is where the vectors go: the shared test data, never the repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nlc=${1:-/tmp/nlc}
out=${2:-${TANDEM_SHARED:-$repo/../shared}/testdata/quant/ggml-quant-vectors.gguf}
if [ ! -d "$nlc/node_modules/node-llama-cpp" ]; then
	mkdir -p "$nlc"
	(cd "$nlc" && npm install --no-audit --no-fund node-llama-cpp@3.21.1)
fi
libdir="$nlc/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
bundle="$nlc/node_modules/node-llama-cpp/llama/gitRelease.bundle"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$bundle" "$work/llama.cpp" 2>/dev/null
gcc -O2 -std=gnu11 -Wall -I"$work/llama.cpp/ggml/include" "$here/gen.c" -o "$work/gen" \
	-L"$libdir" -l:libggml-base.so -Wl,-rpath,"$libdir" -ldl -lm
"$work/gen" "$libdir" "$out"
