#!/usr/bin/env bash
# Issue 12's must-show measurement in one command: the goodput sweep of the
# mixed load (25% long prompts, ~1000 tokens, 16 out; 75% short, ~30 tokens,
# 96-128 out; Poisson arrivals; SLO TTFT <= 1 s short / 10 s long, TPOT and
# every inter-token gap <= 250 ms) against
#   up     `tandem up` (1 prefill + 1 decode worker, 1 thread each),
#   up-lend  the same with --lend-cores (the workers share the host's cores
#          by priority, internal/engine/cores; run only with LEND_COMPARE=1:
#          without pacing it gives the decode worker's prompt steps the
#          prefill worker's core and takes nothing back),
#   up-pace  up-lend with --core-lease-pace $PACE (default 80ms): the decode
#          worker spaces its decode-only steps $PACE apart while the prefill
#          worker wants cores, lending its core in between (PACE_COMPARE=0
#          skips it),
#   up-spill  the same with --pd-spill 2 (a long prompt prefills on the decode
#          worker when the prefill queue is twice its own; the default, 0,
#          never spills; run only with SPILL_COMPARE=1),
#   serve  `tandem serve` (2 threads),
#   llama  llama.cpp's llama-server (2 threads, 8 slots; $LLAMA_SERVER, by
#          default /tmp/llama-src/build/bin/llama-server when it exists;
#          LLAMA_SERVER=none skips it),
# plus the baseline of the TTFT comparison, `short-alone`: the short class
# alone on `tandem serve` at the short-request rate of each mixed rate (75%
# of it). It then prints each system's goodput (the highest swept rate with
# >= 90% of requests meeting every objective), up's goodput against serve's
# and llama-server's, and per rate up's short-request TTFT p90 against
# short-alone's and up's long-request TTFT (p50, p90) against serve's.
#
# All on one synthesized 110m Q8_0 model with an 8k context. Results
# (vLLM-style JSON and an SVG plot per run, the logs, summary.txt) go to
# $BENCH_DIR (default /tmp/tandem-goodput). Every rate sends the same prompts
# (one --seed), so the Tandem processes run without their prefix cache (else
# every rate after the first would find its prompts cached); llama-server
# keeps only each slot's last prompt.
#
# Run time with the defaults (REQUESTS=160 a rate at RATES=1,2,3,4,5 for
# up, up-pace, serve and short-alone: enough arrivals that a queue growing
# past the machine's throughput (~3.5-4 req/s of this load) shows in the
# SLO; llama-server, far slower, LLAMA_REQUESTS=24 at
# LLAMA_RATES=0.1,0.2,0.35): about 40 minutes on the project's 2-core VM
# (arrivals alone take requests/rate seconds a rate: ~7 min for each
# Tandem run with the draining of overloaded rates, ~8.5 min for
# short-alone, ~8 min for llama-server), plus building and synthesizing
# the model the first time. Run it with nothing else on the
# machine.
#   scripts/goodput.sh
#   RATES=1,2 REQUESTS=8 LLAMA_SERVER=none scripts/goodput.sh   # a quick check that it works (~2 min)
# UP_ARGS and SERVE_ARGS add flags (e.g. UP_ARGS="--pd-spill 2"); PORT_BASE (18900) moves the ports.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
dir=${BENCH_DIR:-/tmp/tandem-goodput}
rates=${RATES:-1,2,3,4,5}
llama_rates=${LLAMA_RATES:-0.1,0.2,0.35}
requests=${REQUESTS:-160}
llama_requests=${LLAMA_REQUESTS:-24}
port=${PORT_BASE:-18900} # up, serve and llama-server listen on it, +1 and +2
llama=${LLAMA_SERVER:-/tmp/llama-src/build/bin/llama-server}
[ "$llama" = none ] || [ -x "$llama" ] || { echo "no llama-server at $llama: skipping it (LLAMA_SERVER=PATH or none)" >&2; llama=none; }
mkdir -p "$dir"
go build -o "$dir/tandem" ./cmd/tandem
t="$dir/tandem"
shared=${TANDEM_SHARED:-../shared}
vocab=()
[ -f "$shared/models/llama-2-tiny-random.gguf" ] && vocab=(--vocab-from "$shared/models/llama-2-tiny-random.gguf")
model="$dir/110m-q8_0-8k.gguf"
[ -f "$model" ] || "$t" model synth --preset 110m --type q8_0 --context 8192 "${vocab[@]}" -o "$model"

mixed="long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128"
short_only="short:share=1,in=30,out=96-128"
slo=(--goodput "short.ttft:1000" --goodput "long.ttft:10000" --goodput "tpot:250 itl:250")
short_slo=(--goodput "short.ttft:1000" --goodput "tpot:250 itl:250")
# The short class's rate at each mixed rate: 75% of it.
short_rates=$(echo "$rates" | tr ',' '\n' | awk '{printf "%s%g", (NR>1?",":""), $1*0.75}')

wait_health() { for _ in $(seq 1 900); do curl -sf "$1/ready" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "not ready at $1" >&2; return 1; }

sweep() { # name url spec rates slo...
  local name=$1 url=$2 spec=$3 r=$4 n=$requests
  shift 4
  [ "$name" = llama-server ] && n=$llama_requests
  echo "== $name (rates $r, $n requests each)"
  "$t" bench serve --url "$url" --dataset mixed --mixed "$spec" "$@" --requests "$n" \
    --sweep-rates "$r" --plot "$dir/$name.svg" --result-file "$dir/$name.json" --seed 1
}

run_with() { # name url sweep-args -- command...
  local name=$1 url=$2
  shift 2
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  "$@" >"$dir/$name.log" 2>&1 &
  local pid=$!
  wait_health "$url"
  sweep "$name" "$url" "${args[@]}" || echo "$name: the sweep failed (see $dir/$name.log)" >&2
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start=$(date +%s)
rm -f "$dir"/{up,up-lend,up-pace,up-spill,serve,short-alone,llama-server}.json
# shellcheck disable=SC2086 # UP_ARGS and SERVE_ARGS are word lists
run_with up "http://127.0.0.1:$port" "$mixed" "$rates" "${slo[@]}" -- \
  "$t" up --model "$model" --port "$port" --threads 1 --worker-arg=--prefix-cache=false ${UP_ARGS:-}
if [ "${LEND_COMPARE:-0}" != 0 ]; then
  # shellcheck disable=SC2086
  run_with up-lend "http://127.0.0.1:$port" "$mixed" "$rates" "${slo[@]}" -- \
    "$t" up --model "$model" --port "$port" --threads 1 --worker-arg=--prefix-cache=false ${UP_ARGS:-} --lend-cores
fi
if [ "${PACE_COMPARE:-1}" != 0 ]; then
  # shellcheck disable=SC2086
  run_with up-pace "http://127.0.0.1:$port" "$mixed" "$rates" "${slo[@]}" -- \
    "$t" up --model "$model" --port "$port" --threads 1 --worker-arg=--prefix-cache=false ${UP_ARGS:-} --lend-cores \
    "--worker-arg=--core-lease-pace=${PACE:-80ms}"
fi
if [ "${SPILL_COMPARE:-0}" != 0 ]; then
  # shellcheck disable=SC2086
  run_with up-spill "http://127.0.0.1:$port" "$mixed" "$rates" "${slo[@]}" -- \
    "$t" up --model "$model" --port "$port" --threads 1 --worker-arg=--prefix-cache=false ${UP_ARGS:-} --pd-spill 2
fi
# shellcheck disable=SC2086
run_with serve "http://127.0.0.1:$((port + 1))" "$mixed" "$rates" "${slo[@]}" -- \
  "$t" serve --model "$model" --port "$((port + 1))" --threads 2 --prefix-cache=false ${SERVE_ARGS:-}
# shellcheck disable=SC2086
run_with short-alone "http://127.0.0.1:$((port + 1))" "$short_only" "$short_rates" "${short_slo[@]}" -- \
  "$t" serve --model "$model" --port "$((port + 1))" --threads 2 --prefix-cache=false ${SERVE_ARGS:-}
if [ "$llama" != none ]; then
  run_with llama-server "http://127.0.0.1:$((port + 2))" "$mixed" "$llama_rates" "${slo[@]}" -- \
    "$llama" -m "$model" -t 2 -tb 2 -np 8 -c 8192 --port "$((port + 2))"
fi
echo "sweeps took $(( $(date +%s) - start )) s"

python3 - "$dir" <<'EOF' | tee "$dir/summary.txt"
import json, os, sys

d = sys.argv[1]
def load(name):
    p = os.path.join(d, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None

def cls(point, c, stat):
    v = point["result"].get("classes", {}).get(c, {}).get(stat)
    return v if isinstance(v, (int, float)) else None

def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"

def good_ratio(n, m):  # goodput n / goodput m; a bound when m has none
    a, b = good.get(n), good.get(m)
    if a and b:
        return f"{a / b:.2f}x"
    if a and m in lowest:
        return f"> {a / lowest[m]:.2f}x ({m} below its lowest rate, {lowest[m]:g})"
    return "-"

def ms(v):
    return f"{v:.0f}" if v is not None else "-"

runs = {n: load(n) for n in ["up", "up-lend", "up-pace", "up-spill", "serve", "short-alone", "llama-server"]}
print("goodput (highest rate with >= 90% attainment; - : none of the swept rates):")
good, lowest = {}, {}
for n, r in runs.items():
    if r is None or n == "short-alone":
        continue
    good[n] = r.get("goodput_rate") or None
    lowest[n] = min(p["request_rate"] for p in r["points"])
    att = ", ".join(f"{p['request_rate']:g}: {100 * p['attainment']:.1f}%" for p in r["points"])
    print(f"  {n:13} {good[n] if good[n] else '-'} req/s   ({att})")
for u in ["up", "up-lend", "up-pace", "up-spill"]:
    if u in good:
        print(f"  {u} / serve {good_ratio(u, 'serve')} (goal >= 1.5x)")
        print(f"  {u} / llama-server {good_ratio(u, 'llama-server')} (goal >= 2x)")

serve, alone = runs["serve"], runs["short-alone"]
for u in ["up", "up-lend", "up-pace", "up-spill"]:
    up = runs[u]
    if not (up and serve and alone):
        continue
    srv = {p["request_rate"]: p for p in serve["points"]}
    print(f"\nTTFT in ms: {u} under the mixed load against short-alone (serve, the short class alone at 75% of the rate)")
    print("and against serve under the same mixed load (goals: short p90 <= 1.2x short-alone; long within 1.3x serve)")
    print(f"  {'rate':>5} {'short p90':>9} {'alone p90':>9} {'ratio':>6}   {'long p50':>8} {'serve':>6} {'ratio':>6}   {'long p90':>8} {'serve':>6} {'ratio':>6}")
    for p, a in zip(up["points"], alone["points"]):
        s = srv.get(p["request_rate"])
        sp90, ap90 = cls(p, "short", "p90_ttft_ms"), cls(a, "short", "p90_ttft_ms")
        l50, l90 = cls(p, "long", "p50_ttft_ms"), cls(p, "long", "p90_ttft_ms")
        s50 = cls(s, "long", "p50_ttft_ms") if s else None
        s90 = cls(s, "long", "p90_ttft_ms") if s else None
        print(f"  {p['request_rate']:>5g} {ms(sp90):>9} {ms(ap90):>9} {ratio(sp90, ap90):>6}   "
              f"{ms(l50):>8} {ms(s50):>6} {ratio(l50, s50):>6}   {ms(l90):>8} {ms(s90):>6} {ratio(l90, s90):>6}")

def top(point, stat):
    v = point["result"].get(stat)
    return v if isinstance(v, (int, float)) else None

print("\nCompleted requests per second at each offered rate (first arrival to last completion): past saturation")
print("this is what the machine sustains for the load, whatever the SLO")
for u in ["serve", "up", "up-lend", "up-pace", "up-spill", "llama-server"]:
    r = runs[u]
    if r:
        print(f"  {u:12} " + ", ".join(f"{p['request_rate']:g}: {p['result'].get('request_throughput', 0):.2f}" for p in r["points"]))

print("\nWhat pacing and lending cost: short-request end-to-end p50, TPOT p50 and ITL p99 (all requests), ms")
print(f"  {'run':8} {'rate':>5} {'short e2el p50':>14} {'tpot p50':>8} {'itl p99':>7}")
for u in ["serve", "up", "up-lend", "up-pace", "up-spill"]:
    r = runs[u]
    if not r:
        continue
    for p in r["points"]:
        print(f"  {u:8} {p['request_rate']:>5g} {ms(cls(p, 'short', 'p50_e2el_ms')):>14} "
              f"{ms(top(p, 'median_tpot_ms')):>8} {ms(top(p, 'p99_itl_ms')):>7}")
EOF
echo "results in $dir"
