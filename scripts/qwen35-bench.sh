#!/usr/bin/env bash
# Hybrid (qwen35) speed against llama.cpp: the synthesized q35-2b preset
# (Qwen3.5-2B's shape: 18 Gated DeltaNet and 6 gated full-attention layers,
# a 32000-token vocabulary, q4_k_m, 0.9 GB) prefilled with 512 tokens and
# decoded for 16, by BenchmarkHybridSpeed (internal/engine/model, which
# drives model.Runner with the sequence's state slot) and by llama.cpp
# through node-llama-cpp 3.21.1 (llamacpp-bench.mjs of ../shared/tools, run
# from $TANDEM_NPM_DIR, which holds node_modules/node-llama-cpp and that
# script), 1 and 2 threads, $ROUNDS interleaved rounds (default 3), each
# under `nice -n $NICE` (default -10; root only, else 0). The model goes to
# $BENCH_DIR (default /tmp/tandem-bench). Read the medians; on a loaded
# machine say so (the load average is printed after every run). With
# LLAMA_BENCH=PATH (llama.cpp's own llama-bench, built by
# ../shared/tools/build-llamacpp.sh from node-llama-cpp 3.21.1's
# gitRelease.bundle) llama.cpp's figures come from llama-bench (-p 512,
# and -n 16 -d 512: decode after the prompt), whose 2-thread decode does not oversubscribe 2 cores as
# node-llama-cpp's does (LLAMA_POLL sets its --poll, the threads'
# busy-wait: default 50, 0 yields). Tandem reads the file into memory with huge
# pages ($MMAP, default false: TANDEM_HYBRID_MMAP, as --mmap=false; a
# mapped file decodes at half the speed or less on this VM, see
# docs/moe-speed.md); llama-bench maps it unless LLAMA_MMAP=false.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BENCH_DIR:-/tmp/tandem-bench}
npm=${TANDEM_NPM_DIR:-/tmp/tandem-npm}
prio=${NICE:--10}
mmap=${MMAP:-false}
[ "$(id -u)" = 0 ] || prio=0
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
go test -c -o "$dir/model.test" ./internal/engine/model/
m="$dir/q35-2b-q4_k_m.gguf"
[ -f "$m" ] || "$dir/tandem" model synth --preset q35-2b --type q4_k_m -o "$m"
"$dir/tandem" model info "$m" | grep -E '^(layer mix|state |per token|parameters)'
have_llama=1
lb=${LLAMA_BENCH:-}
if [ -n "$lb" ]; then
  [ -x "$lb" ] || { echo "LLAMA_BENCH=$lb is not an executable" >&2; exit 1; }
else
  [ -d "$npm/node_modules/node-llama-cpp" ] && [ -f "$npm/llamacpp-bench.mjs" ] || { have_llama=0; echo "no node-llama-cpp in $npm: Tandem only"; }
fi
# llama_run TH: llama.cpp's prefill and decode rates as one JSON line
source scripts/llama-bench.sh
llama_run() {
  if [ -z "$lb" ]; then (cd "$npm" && nice -n "$prio" node llamacpp-bench.mjs "$m" "$1" 512 16 | tail -1); return; fi
  llama_bench_json "$lb" "$prio" "$m" "$1" 16
}
rec=$(mktemp)
trap 'rm -f "$rec"' EXIT
for round in $(seq "${ROUNDS:-3}"); do
  for th in 1 2; do
    t=$(TANDEM_HYBRID_MODEL="$m" TANDEM_HYBRID_MMAP="$mmap" TANDEM_HYBRID_THREADS="$th" nice -n "$prio" "$dir/model.test" \
      -test.run '^$' -test.bench BenchmarkHybridSpeed -test.benchtime=1x | grep -o '[0-9.]* decode-tok/s.*prefill-tok/s')
    echo "round $round threads $th tandem    $t"
    echo "$th tandem_decode $(awk '{ print $1 }' <<<"$t")" >>"$rec"
    echo "$th tandem_prefill $(grep -o '[0-9.]* prefill-tok/s' <<<"$t" | cut -d' ' -f1)" >>"$rec"
    echo "round $round load average $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$have_llama" = 1 ]; then
      l=$(llama_run "$th")
      echo "round $round threads $th llama.cpp $l"
      echo "$th llama_prefill $(grep -o '"prefill_tok_s":[0-9.]*' <<<"$l" | cut -d: -f2)" >>"$rec"
      echo "$th llama_decode $(grep -o '"decode_tok_s":[0-9.]*' <<<"$l" | cut -d: -f2)" >>"$rec"
      echo "round $round load average $(cut -d' ' -f1-3 /proc/loadavg)"
    fi
  done
done
# med TH KEY: the median of the recorded values
med() { awk -v th="$1" -v k="$2" '$1 == th && $2 == k && $3 != "" { print $3 }' "$rec" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
echo
echo "medians of ${ROUNDS:-3} rounds (512-token prefill, 16-token decode; tandem mmap=$mmap, llama.cpp mmap ${LLAMA_MMAP:-default})"
for th in 1 2; do
  tp=$(med "$th" tandem_prefill) lp=$(med "$th" llama_prefill) td=$(med "$th" tandem_decode) ld=$(med "$th" llama_decode)
  echo "threads $th: prefill $tp / $lp = $(ratio "$tp" "$lp")x, decode $td / $ld = $(ratio "$td" "$ld")x (tandem / llama.cpp tok/s)"
done
