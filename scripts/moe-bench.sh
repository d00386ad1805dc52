#!/usr/bin/env bash
# Mixture-of-experts speed against llama.cpp: the synthesized a3b preset
# (qwen3moe, Qwen3-30B-A3B's block with 64 experts of which 8 used, 12
# layers, q4_k_m, 2.3 GB) prefilled with 512 tokens and decoded for 16, by
# `tandem bench engine` and by llama.cpp through node-llama-cpp 3.21.1
# (llamacpp-bench.mjs of ../shared/tools, run from $TANDEM_NPM_DIR, which
# holds node_modules/node-llama-cpp and that script), 1 and 2 threads,
# $ROUNDS interleaved rounds (default 3). The model goes to $BENCH_DIR
# (default /tmp/tandem-bench). Read the medians; on a loaded machine say so.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BENCH_DIR:-/tmp/tandem-bench}
npm=${TANDEM_NPM_DIR:-/tmp/tandem-npm}
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
m="$dir/a3b-q4_k_m.gguf"
[ -f "$m" ] || "$dir/tandem" model synth --preset a3b --type q4_k_m -o "$m"
"$dir/tandem" model info "$m" | grep -E '^(experts|per token|parameters)'
have_llama=1
[ -d "$npm/node_modules/node-llama-cpp" ] && [ -f "$npm/llamacpp-bench.mjs" ] || { have_llama=0; echo "no node-llama-cpp in $npm: Tandem only"; }
for round in $(seq "${ROUNDS:-3}"); do
  for th in 1 2; do
    echo "round $round threads $th tandem   $("$dir/tandem" bench engine --model "$m" --prompt-tokens 512 --gen-tokens 16 --threads "$th" --format json)"
    [ "$have_llama" = 1 ] && echo "round $round threads $th llama.cpp $(cd "$npm" && node llamacpp-bench.mjs "$m" "$th" 512 16 | tail -1)"
    echo "round $round load average $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
