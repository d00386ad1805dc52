#!/usr/bin/env bash
# Runs Tandem's checks and tests: formatting, vet, the race detector on the
# packages with goroutines, then every test. Shared test data (real models,
# llama.cpp vectors) is read from $TANDEM_SHARED or ../shared; tests that need
# it skip with a message when it is absent. staticcheck is installed from the
# Go module proxy when it is missing; TANDEM_SKIP_STATICCHECK=1 skips it on
# purpose (the script says so loudly).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
# Go modules of their own beside the product's: the image builder and the
# Kubernetes test tier (tools/k8s-testbin is built by scripts/k8s-testbin.sh).
aux_modules="tools/image test/k8s"

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi

echo "== go vet"
go vet ./...
go vet -tags tandemfaults ./cmd/tandem ./internal/pd/faults
# The modules beside the product's (tools/k8s-testbin is two mains that its
# build script type-checks; vetting it would compile kube-apiserver twice).
for m in $aux_modules; do go -C "$m" vet ./...; done

# staticcheck is required; when it is not on PATH it is installed from
# the Go module proxy at the version CI uses (a fresh machine needs no extra
# step). TANDEM_SKIP_STATICCHECK=1 skips it on purpose, with a loud notice;
# nothing skips it silently.
staticcheck_version=v0.8.2
if [ "${TANDEM_SKIP_STATICCHECK:-}" = "1" ]; then
  echo "!! ============================================================="
  echo "!! staticcheck SKIPPED because TANDEM_SKIP_STATICCHECK=1."
  echo "!! This run does not check what the README promises."
  echo "!! ============================================================="
else
  export PATH="$PATH:$(go env GOPATH)/bin"
  if ! command -v staticcheck >/dev/null 2>&1; then
    echo "== installing staticcheck $staticcheck_version (go install honnef.co/go/tools/cmd/staticcheck@$staticcheck_version)"
    if ! go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"; then
      echo "staticcheck could not be installed from the Go module proxy." >&2
      echo "Install it by hand (go install honnef.co/go/tools/cmd/staticcheck@$staticcheck_version)" >&2
      echo "or skip it on purpose: TANDEM_SKIP_STATICCHECK=1 $0" >&2
      exit 1
    fi
  fi
  echo "== staticcheck"
  staticcheck ./...
  for m in $aux_modules; do (cd "$m" && staticcheck ./...); done
fi

echo "== go test -race (concurrent packages)"
go test -race -count=1 ./internal/engine/kernels/ ./internal/engine/model/ ./internal/engine/kvcache/ ./internal/engine/ \
  ./internal/pd/worker/ ./internal/pd/transfer/ ./internal/router/... ./internal/server/ ./internal/engine/prefixcache/ ./internal/loadgen/ \
  ./internal/engine/grammar/ ./internal/modelhub/ ./internal/cluster/ ./internal/engine/cores/ ./internal/pd/shm/ ./internal/api/drain/

echo "== go test"
go test -count=1 ./...

# The run above uses the best kernel level the CPU has; the llama.cpp
# equality tests must pass at the lower levels too (TANDEM_KERNEL_LEVEL, read
# by the TestMain of internal/engine/model and internal/engine). A level the
# CPU lacks is skipped, with the features it lacks; any other failure of the
# check stops the script.
echo "== go test at the lower kernel levels (llama.cpp equality tests)"
for L in generic avx2; do
  if ! out=$(TANDEM_KERNEL_LEVEL=$L go test -count=1 -run '^$' ./internal/engine/model/ 2>&1); then
    if grep -q "cpu lacks" <<<"$out"; then
      echo "-- $L skipped: $(grep -m1 "cpu lacks" <<<"$out")"
      continue
    fi
    echo "$out"; exit 1
  fi
  echo "-- $L"
  TANDEM_KERNEL_LEVEL=$L go test -count=1 ./internal/engine/model/
  TANDEM_KERNEL_LEVEL=$L go test -count=1 -run 'SlidingWindow|AllWindowed' ./internal/engine/
done

# The container image check, and the Kubernetes tier: it runs on the
# binaries in $KUBEBUILDER_ASSETS (KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh));
# without them its tests skip saying so, unless TANDEM_K8S_TESTS=1 (as .ci/run
# sets it), which makes that a failure.
echo "== go test tools/image (the OCI image layout)"
go -C tools/image test -count=1 ./...
echo "== go test test/k8s (chart and harness on kube-apiserver ${KUBEBUILDER_ASSETS:+from $KUBEBUILDER_ASSETS})"
[ -n "${KUBEBUILDER_ASSETS:-}" ] || echo "-- KUBEBUILDER_ASSETS is not set: the tier's tests skip (build the binaries: KUBEBUILDER_ASSETS=\$(scripts/k8s-testbin.sh))"
log=$(mktemp)
if ! go -C test/k8s test -count=1 -v ./... >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
grep -E '^\s*(--- |ok |FAIL)|^\s+\S+_test\.go:[0-9]+: .*(skip|objects accepted)|=== SCALE BY|^\s+\S+: (Pod .* -> |SIGTERM -> )|^\s+requests: [0-9]+ sent' "$log" || true  # each test's outcome, skips, what was applied, the scaling figures
rm -f "$log"
