#!/usr/bin/env bash
# A scripted run of the main job: start `tandem up` (a router, one prefill
# and one decode worker; a synthesized model unless one is given), send one
# completion through it, print the answer and the rooms it left, then stop.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
go build -o tandem ./cmd/tandem
model=${1:-}
port=${PORT:-8000}
# The cluster token: tandem up shares it with every process, inspect needs it.
export TANDEM_CLUSTER_TOKEN=${TANDEM_CLUSTER_TOKEN:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}
args=(up --port "$port")
[ -n "$model" ] && args+=(--model "$model")
./tandem "${args[@]}" &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  curl -sf "localhost:$port/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -s "localhost:$port/v1/completions" -H 'content-type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}'
echo
./tandem inspect "http://localhost:$port" --all || true
