#!/usr/bin/env bash
# Runs Tandem's checks and tests: formatting, vet, the race detector on the
# packages with goroutines, then every test. Shared test data (real models,
# llama.cpp vectors) is read from $TANDEM_SHARED or ../shared; tests that need
# it skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change:"; echo "$bad"; exit 1; fi

echo "== go vet"
go vet ./...
go vet -tags tandemfaults ./cmd/tandem ./internal/pd/faults

if command -v staticcheck >/dev/null 2>&1; then
  echo "== staticcheck"
  staticcheck ./...
fi

echo "== go test -race (concurrent packages)"
go test -race -count=1 ./internal/engine/kernels/ ./internal/engine/model/ ./internal/engine/kvcache/ ./internal/engine/ \
  ./internal/pd/worker/ ./internal/pd/transfer/ ./internal/router/ ./internal/server/ ./internal/engine/prefixcache/ ./internal/loadgen/

echo "== go test"
go test -count=1 ./...
