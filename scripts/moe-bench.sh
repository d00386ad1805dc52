#!/usr/bin/env bash
# Mixture-of-experts speed against llama.cpp, and decode against this
# machine's memory bandwidth: the synthesized a3b preset (qwen3moe,
# Qwen3-30B-A3B's block with 64 experts of which 8 used, 12 layers,
# q4_k_m, 2.3 GB, 0.75B active parameters, 442 MiB of weights read per
# token) prefilled with 512 tokens and decoded for $GEN (default 32), by
# `tandem bench engine` and by llama.cpp through node-llama-cpp 3.21.1
# (llamacpp-bench.mjs of ../shared/tools, run from $TANDEM_NPM_DIR, which
# holds node_modules/node-llama-cpp and that script), and `tandem bench
# memory` (streaming read bandwidth, 1 GiB, 3 passes) at the same thread
# count, 1 and 2 threads, $ROUNDS interleaved rounds (default 3). Tandem
# runs with --mmap=$MMAP (default false: the file read into memory with
# huge pages); llama.cpp loads as node-llama-cpp does by default (mmap), or
# as $LLAMA_MMAP says (true or false) where the bench script reads it (the
# copy beside this session's node_modules does). Every run
# is under `nice -n $NICE` (default -15: root may raise its priority above
# the machine's other jobs; 0 otherwise). Prints each run, then the medians:
# tok/s of both, Tandem/llama.cpp ratios, decode's active-weight GB/s and
# its share of the bandwidth (of the medians, and the median of each
# round's share of the bandwidth measured right after its run). The model
# goes to $BENCH_DIR (default /tmp/tandem-bench). On a loaded machine (the
# load averages are printed) say so with the figures. With LLAMA_BENCH=PATH (llama.cpp's own
# llama-bench, built by ../shared/tools/build-llamacpp.sh from the source
# node-llama-cpp 3.21.1 ships: its gitRelease.bundle, llama.cpp 80fb11a)
# llama.cpp's figures come from llama-bench (-p 512, and -n $GEN -d 512:
# decode after the prompt; mmap as $LLAMA_MMAP says) instead: node-llama-cpp's 2-thread decode
# oversubscribes a 2-core machine, llama-bench's does not. LLAMA_POLL
# sets llama-bench's --poll (its threads' busy-wait, default 50; 0 yields,
# which suits a machine shared with other jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BENCH_DIR:-/tmp/tandem-bench}
npm=${TANDEM_NPM_DIR:-/tmp/tandem-npm}
gen=${GEN:-32}
mmap=${MMAP:-false}
nice=${NICE:--15}
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
m="$dir/a3b-q4_k_m.gguf"
[ -f "$m" ] || "$dir/tandem" model synth --preset a3b --type q4_k_m -o "$m"
"$dir/tandem" model info "$m" | grep -E '^(experts|per token|parameters)'
nice -n "$nice" true 2>/dev/null || { echo "nice -n $nice not allowed: running at nice 0"; nice=0; }
have_llama=1
lb=${LLAMA_BENCH:-}
if [ -n "$lb" ]; then
  [ -x "$lb" ] || { echo "LLAMA_BENCH=$lb is not an executable" >&2; exit 1; }
  echo "llama.cpp: $lb"
else
  [ -d "$npm/node_modules/node-llama-cpp" ] && [ -f "$npm/llamacpp-bench.mjs" ] || { have_llama=0; echo "no node-llama-cpp in $npm: Tandem only"; }
fi
# llama_bench TH: llama-bench's rates as one JSON line (scripts/llama-bench.sh)
source scripts/llama-bench.sh
llama_bench() { llama_bench_json "$lb" "$nice" "$m" "$1" "$gen"; }
rec=$(mktemp)
trap 'rm -f "$rec"' EXIT
# field JSON NAME: the number NAME holds in the one-line JSON document
field() { grep -o "\"$2\":[0-9.e+-]*" <<<"$1" | head -1 | cut -d: -f2; }
for round in $(seq "${ROUNDS:-3}"); do
  for th in 1 2; do
    t=$(nice -n "$nice" "$dir/tandem" bench engine --model "$m" --mmap="$mmap" --prompt-tokens 512 --gen-tokens "$gen" --threads "$th" --format json)
    echo "round $round threads $th tandem    $t"
    echo "$th tandem_prefill $(field "$t" prefill_tok_s)" >>"$rec"
    echo "$th tandem_decode $(field "$t" decode_tok_s)" >>"$rec"
    echo "$th tandem_gbs $(field "$t" decode_weight_gb_s)" >>"$rec"
    active=$(field "$t" active_weight_bytes)
    if [ "$have_llama" = 1 ]; then
      if [ -n "$lb" ]; then l=$(llama_bench "$th"); else l=$(cd "$npm" && nice -n "$nice" node llamacpp-bench.mjs "$m" "$th" 512 "$gen" | tail -1); fi
      echo "round $round threads $th llama.cpp $l"
      echo "$th llama_prefill $(field "$l" prefill_tok_s)" >>"$rec"
      echo "$th llama_decode $(field "$l" decode_tok_s)" >>"$rec"
    fi
    b=$(nice -n "$nice" "$dir/tandem" bench memory --threads "$th" --size 1GiB --passes 3 --format json)
    echo "round $round threads $th memory    $b"
    echo "$th bandwidth $(field "$b" median_gb_s)" >>"$rec"
    # the share of the bandwidth measured right after the run (the host's
    # other tenants move both within minutes)
    echo "$th share $(awk -v a="$(field "$t" decode_weight_gb_s)" -v b="$(field "$b" median_gb_s)" 'BEGIN { printf "%.4f", a / b }')" >>"$rec"
    echo "round $round threads $th load average $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
# med TH KEY: the median of the recorded values
med() { awk -v th="$1" -v k="$2" '$1 == th && $2 == k { print $3 }' "$rec" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
echo
echo "medians of ${ROUNDS:-3} rounds (512-token prefill, $gen-token decode; $active active weight bytes per token; tandem --mmap=$mmap, llama.cpp mmap ${LLAMA_MMAP:-default})"
printf '%-7s | %-28s | %-28s | %-37s\n' threads "prefill tok/s tandem / llama" "decode tok/s tandem / llama" "decode GB/s tandem / llama / memory"
for th in 1 2; do
  tp=$(med "$th" tandem_prefill) lp=$(med "$th" llama_prefill) td=$(med "$th" tandem_decode) ld=$(med "$th" llama_decode)
  tg=$(med "$th" tandem_gbs) bw=$(med "$th" bandwidth)
  lg=$(awk -v d="$ld" -v a="$active" 'BEGIN { if (d == "-") print "-"; else printf "%.1f", d * a / 1e9 }')
  printf '%-7s | %7.1f / %-7s = %-6s | %7.2f / %-7s = %-6s | %5.1f / %-5s / %5.1f = %s of bandwidth\n' "$th" "$tp" "$lp" "$(ratio "$tp" "$lp")x" \
    "$td" "$ld" "$(ratio "$td" "$ld")x" "$tg" "$lg" "$bw" "$(awk -v a="$tg" -v b="$bw" 'BEGIN { printf "%.0f%%", 100 * a / b }')"
done
for th in 1 2; do
  echo "threads $th: median of each round's decode GB/s over the bandwidth measured right after it: $(awk -v s="$(med "$th" share)" 'BEGIN { printf "%.0f%%", 100 * s }')"
done
