#!/usr/bin/env bash
# Rolling restart of a whole fleet under load, as docs/operations.md describes it:
#   1. tandem up with 2 prefill + 2 decode workers behind 2 routers sharing one port (every request disaggregated,
#      no prefix cache, so that every KV page must be back once the fleet is idle);
#   2. its capacity, measured with tandem bench serve (closed loop, CONC clients);
#   3. an open loop at SHARE of that capacity (tandem bench serve --request-rate) while every child is sent SIGTERM,
#      one at a time: it drains and exits 0, up starts it again, the next one waits until it is back;
#   4. the load's result, each drain's cost (SIGTERM to exit, and the process's own account of it), tandem inspect
#      (exit 1 on a room past its deadline) and every worker's KV pages in use.
# Environment: PORT (18600), SHARE (0.6), CONC (8), SETTLE (5s: --drain-settle), PROMPT (200), GEN (512), MODEL
# (default: a synthesized tiny model), OUT (a temporary folder: logs and JSON results).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-18600} SHARE=${SHARE:-0.6} CONC=${CONC:-8} SETTLE=${SETTLE:-5s} PROMPT=${PROMPT:-200} GEN=${GEN:-512}
OUT=${OUT:-$(mktemp -d)}
bin=$OUT/tandem
go build -o "$bin" ./cmd/tandem
if [ -z "${MODEL:-}" ]; then
  MODEL=$OUT/tiny.gguf
  "$bin" model synth --preset tiny --type q8_0 -o "$MODEL" >/dev/null
fi
base=http://127.0.0.1:$PORT
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

"$bin" up --model "$MODEL" --prefill 2 --decode 2 --routers 2 --port "$PORT" --pd-threshold 0 --drain-settle "$SETTLE" \
  --worker-arg=--prefix-cache=false >"$OUT/up.out" 2>"$OUT/up.log" &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do grep -q "tandem is up" "$OUT/up.out" && break; sleep 0.2; done
grep -q "tandem is up" "$OUT/up.out" || { echo "tandem up did not start; see $OUT/up.log" >&2; exit 1; }

echo "== capacity: tandem bench serve --url $base --concurrency $CONC --requests $((6 * CONC)) --prompt-tokens $PROMPT --gen-tokens $GEN --stream"
"$bin" bench serve --url "$base" --concurrency "$CONC" --requests $((6 * CONC)) --prompt-tokens "$PROMPT" --gen-tokens "$GEN" --stream \
  --result-file "$OUT/capacity.json" 2>/dev/null | sed -n '1,4p'
cap=$(json "$OUT/capacity.json" "d['request_throughput']")
rate=$(python3 -c "print(round($cap * $SHARE, 3))")
# Long enough for six drains (settle + work + restart) with load on both sides.
secs=$(python3 -c "print(int(6 * (float('${SETTLE%s}') + 6) + 10))")
n=$(python3 -c "print(max(1, int($rate * $secs)))")
echo "== load: tandem bench serve --url $base --request-rate $rate --requests $n (about ${secs}s, ${SHARE} of $cap req/s)"
"$bin" bench serve --url "$base" --request-rate "$rate" --requests "$n" --prompt-tokens "$PROMPT" --gen-tokens "$GEN" --stream \
  --result-file "$OUT/load.json" >"$OUT/load.out" 2>/dev/null &
load=$!
sleep 5

# children returns up's children running the given subcommand, oldest first.
children() { pgrep -P "$up" -f "tandem $1 " || true; }
printf '%-10s %-8s %s\n' ROLE PID "SIGTERM->EXIT"
for role in prefill decode route; do
  for pid in $(children "$role"); do
    port=$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed -E 's/.* --port ([0-9]+).*/\1/')
    t0=$(date +%s.%N)
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
    t1=$(date +%s.%N)
    printf '%-10s %-8s %.3fs\n' "$role" "$pid" "$(echo "$t1 - $t0" | bc)"
    # up starts it again (backoff 0.5 s); wait until it is ready, and for a worker until the routers' next probe.
    for _ in $(seq 1 600); do curl -sf "127.0.0.1:$port/ready" >/dev/null 2>&1 && break; sleep 0.1; done
    [ "$role" = route ] || sleep 2
  done
done
wait $load || true
echo "== the load"
sed -n '1,12p' "$OUT/load.out"
echo "completed $(json "$OUT/load.json" "d['completed']") of $(json "$OUT/load.json" "d['requests']"), failed $(json "$OUT/load.json" "d['failed']")"
echo "== each drain, as the process logged it (requests and rooms held when it stopped admitting, then)"
grep -E 'draining: refusing new work|msg=stopped settled' "$OUT/up.log" | grep -v 'settle window cut short' | sed -E 's/time=[^ ]+ level=INFO //'
echo "== tandem inspect $base"
if TANDEM_HOME=${TANDEM_HOME:-} "$bin" inspect "$base" >"$OUT/inspect.out" 2>&1; then echo "exit 0: no room past its deadline"; else echo "exit $?:"; cat "$OUT/inspect.out"; fi
echo "== KV pages in use on each worker once idle"
sleep 2
for role in prefill decode; do
  for pid in $(children "$role"); do
    port=$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed -E 's/.* --port ([0-9]+).*/\1/')
    echo "$role :$port $(curl -s "127.0.0.1:$port/metrics" | grep -E '^tandem_kv_pages_used ' || echo '?')"
  done
done
echo "(logs and results in $OUT)"
