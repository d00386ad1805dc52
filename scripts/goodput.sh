#!/usr/bin/env bash
# Goodput sweep of the mixed load (issue 12's measurement): 25% long prompts
# (~1000 tokens, 16 out), 75% short (~30 tokens, 96-128 out), Poisson
# arrivals, SLO TTFT <= 1 s short / 10 s long, TPOT and every inter-token
# gap <= 250 ms. Runs it against `tandem up` (1 prefill + 1 decode worker,
# 1 thread each), `tandem serve` (2 threads) and, when LLAMA_SERVER points at
# llama.cpp's llama-server binary, llama-server (2 threads, 8 slots), all on
# one synthesized 110m Q8_0 model with an 8k context. Results (vLLM-style
# JSON and an SVG plot per system) go to $BENCH_DIR (default /tmp/tandem-goodput).
# Every rate sends the same prompts (one --seed), so the Tandem processes run
# without their prefix cache (else every rate after the first would find its
# prompts cached); llama-server keeps only each slot's last prompt.
#   RATES=0.2,0.35,0.5 REQUESTS=40 scripts/goodput.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
dir=${BENCH_DIR:-/tmp/tandem-goodput}
rates=${RATES:-0.2,0.35,0.5,0.7,1.0}
requests=${REQUESTS:-40}
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
t="$dir/tandem"
shared=${TANDEM_SHARED:-../shared}
vocab=()
[ -f "$shared/models/llama-2-tiny-random.gguf" ] && vocab=(--vocab-from "$shared/models/llama-2-tiny-random.gguf")
model="$dir/110m-q8_0-8k.gguf"
[ -f "$model" ] || "$t" model synth --preset 110m --type q8_0 --context 8192 "${vocab[@]}" -o "$model"

mixed="long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128"
slo=(--goodput "short.ttft:1000" --goodput "long.ttft:10000" --goodput "tpot:250 itl:250")

wait_health() { for _ in $(seq 1 900); do curl -sf "$1/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "no health at $1" >&2; return 1; }

sweep() { # name url
  echo "== $1"
  "$t" bench serve --url "$2" --dataset mixed --mixed "$mixed" "${slo[@]}" --requests "$requests" \
    --sweep-rates "$rates" --plot "$dir/$1.svg" --result-file "$dir/$1.json" --seed 1
}

run_with() { # name url command...
  local name=$1 url=$2; shift 2
  "$@" >"$dir/$name.log" 2>&1 &
  local pid=$!
  wait_health "$url"
  sweep "$name" "$url" || true
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

run_with up http://127.0.0.1:18900 "$t" up --model "$model" --port 18900 --threads 1 --worker-arg=--prefix-cache=false ${UP_ARGS:-}
run_with serve http://127.0.0.1:18901 "$t" serve --model "$model" --port 18901 --threads 2 --prefix-cache=false ${SERVE_ARGS:-}
if [ -n "${LLAMA_SERVER:-}" ]; then
  run_with llama-server http://127.0.0.1:18902 "$LLAMA_SERVER" -m "$model" -t 2 -tb 2 -np 8 -c 8192 --port 18902
fi
echo "results in $dir"
