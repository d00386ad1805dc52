#!/usr/bin/env bash
# Reproduces the figures in the closing notes: engine speed (110m and 1b
# Q8_0, 1 and 2 threads), serving throughput and latency (tandem serve,
# concurrency 1 and 8), time to first token through tandem up versus tandem
# serve, and KV transfer throughput beside a memory copy. Models are
# synthesized into $BENCH_DIR (default /tmp/tandem-bench) with the Llama-2
# vocabulary from ../shared when available. Takes several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
dir=${BENCH_DIR:-/tmp/tandem-bench}
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
t="$dir/tandem"
shared=${TANDEM_SHARED:-../shared}
vocab=()
[ -f "$shared/models/llama-2-tiny-random.gguf" ] && vocab=(--vocab-from "$shared/models/llama-2-tiny-random.gguf")
[ -f "$dir/110m-q8_0.gguf" ] || "$t" model synth --preset 110m --type q8_0 "${vocab[@]}" -o "$dir/110m-q8_0.gguf"
[ -f "$dir/110m-q8_0-8k.gguf" ] || "$t" model synth --preset 110m --type q8_0 --context 8192 "${vocab[@]}" -o "$dir/110m-q8_0-8k.gguf"
[ -f "$dir/1b-q8_0.gguf" ] || "$t" model synth --preset 1b --type q8_0 "${vocab[@]}" -o "$dir/1b-q8_0.gguf"

section() { printf '\n== %s\n' "$*"; }

if [ "${SKIP_ENGINE:-}" = "" ]; then
section "engine: tandem bench engine (prompt 512 in one step, then 128 greedy tokens)"
for m in 110m 1b; do
  for th in 1 2; do
    printf '%-5s threads %d: ' "$m" "$th"
    "$t" bench engine --model "$dir/$m-q8_0.gguf" --prompt-tokens 512 --gen-tokens 128 --threads "$th" --format json
  done
done
fi

wait_health() { for _ in $(seq 1 600); do curl -sf "$1/ready" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "not ready at $1" >&2; return 1; }

if [ "${SKIP_SERVE:-}" = "" ]; then
section "serving: tandem bench serve against tandem serve (110m q8_0, prompt ~256 words, 128 tokens)"
"$t" serve --model "$dir/110m-q8_0.gguf" --port 18801 --log-format json 2>"$dir/serve.log" &
spid=$!
trap 'kill $spid 2>/dev/null || true' EXIT
wait_health http://127.0.0.1:18801
for c in 1 8; do
  printf 'concurrency %d: ' "$c"
  "$t" bench serve --url http://127.0.0.1:18801 --concurrency "$c" --requests $((c * 4)) --prompt-tokens 256 --gen-tokens 128 --format json
done
kill $spid; wait $spid 2>/dev/null || true
fi

# Same compute on both sides: serve gets one thread, as each tandem up
# worker does (the prefill worker alone computes the prompt).
section "time to first token: tandem up (1 prefill, 1 decode, 1 thread each) versus tandem serve (1 thread) (110m q8_0 8k context, 16 generated tokens, 3 requests each)"
"$t" serve --model "$dir/110m-q8_0-8k.gguf" --port 18801 --threads 1 --log-format json 2>"$dir/serve1.log" &
spid=$!
"$t" up --model "$dir/110m-q8_0-8k.gguf" --port 18802 --threads 1 --log-format json 2>"$dir/up.log" &
upid=$!
trap 'kill $spid 2>/dev/null || true; kill -INT $upid 2>/dev/null || true; wait $upid 2>/dev/null || true' EXIT
wait_health http://127.0.0.1:18801
wait_health http://127.0.0.1:18802
for p in 128 1024 4096; do
  for target in serve:18801 up:18802; do
    printf 'prompt %4d words, %-5s: ' "$p" "${target%%:*}"
    "$t" bench serve --url "http://127.0.0.1:${target##*:}" --concurrency 1 --requests 3 --prompt-tokens "$p" --gen-tokens 16 --format json
  done
done
section "KV transfer counters of the tandem up run (prefill side)"
pref=$(grep -o '\[prefill-0\].*"msg":"serving","addr":"http://[0-9.:]*' "$dir/up.log" | head -1 | grep -o 'http://[0-9.:]*' || true)
[ -n "$pref" ] && curl -s "$pref/metrics" | grep -E '^tandem_pd_transfer_(bytes_total|seconds_(sum|count))'

section "KV transfer over loopback TCP versus a memory copy of the same bytes (go test -bench)"
go test -run '^$' -bench 'SendKV|Memcpy' -benchtime 300ms ./internal/pd/transfer | grep -E '^Benchmark'
