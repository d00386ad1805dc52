#!/usr/bin/env bash
# Measures what tracing costs: tandem up (1 prefill + 1 decode, every
# request disaggregated) with tracing off against tracing on at sampling
# 1.0, exporting OTLP/HTTP to a local sink, in interleaved rounds (the
# order alternates each round). Each run is a closed loop of tandem bench
# serve; the script prints each run's output token throughput and the CPU
# time (user + system) the cluster's processes spent, then the medians and
# the costs (1 - on/off for throughput, on/off - 1 for CPU). CPU time is
# the steadier figure on a shared machine. ROUNDS (5), REQUESTS (96), CONC
# (8), PROMPT (64 words), GEN (32 tokens), MODEL (a synthesized tiny q8_0
# model) size it; TANDEM_BIN runs a binary built elsewhere (another commit).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${TRACE_COST_DIR:-/tmp/tandem-trace-cost}
mkdir -p "$dir"
t=${TANDEM_BIN:-}
if [ -z "$t" ]; then go build -o "$dir/tandem" ./cmd/tandem; t="$dir/tandem"; fi
model=${MODEL:-$dir/tiny.gguf}
[ -f "$model" ] || "$t" model synth --preset tiny --type q8_0 -o "$model" >/dev/null
rounds=${ROUNDS:-5} requests=${REQUESTS:-96} conc=${CONC:-8} prompt=${PROMPT:-64} gen=${GEN:-32}
port=${PORT:-18931} sinkport=$((port + 1))

# The OTLP sink: answers every export 200 with an empty (valid) protobuf
# response and counts the bytes it got.
python3 - "$sinkport" >"$dir/sink.log" 2>&1 <<'PY' &
import http.server, sys
total = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global total
        n = int(self.headers.get("Content-Length", 0)); self.rfile.read(n); total += n
        self.send_response(200); self.send_header("Content-Type", "application/x-protobuf"); self.send_header("Content-Length", "0"); self.end_headers()
        print("export", n, "total", total, flush=True)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT

wait_ready() { for _ in $(seq 1 600); do curl -sf "$1/ready" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "not ready at $1" >&2; return 1; }

n=0
run() { # mode: off | on; each run on its own port (the previous cluster may still be letting go of its own)
  local port=$((port + 2 + 3 * n)) extra=()
  [ "$1" = on ] && extra=(--otlp-endpoint "http://127.0.0.1:$sinkport" --trace-sample 1)
  /usr/bin/time -f "%U %S" -o "$dir/cpu-$1" "$t" up --model "$model" --port "$port" --prefill 1 --decode 1 --pd-threshold 0 --log-level warn "${extra[@]}" \
    --worker-arg=--stats-interval=0 --worker-arg=--prefix-cache=false >"$dir/up-$1.log" 2>&1 &
  local timer=$! up
  for _ in $(seq 1 50); do up=$(pgrep -P "$timer" | head -1) && [ -n "$up" ] && break; sleep 0.1; done
  wait_ready "http://127.0.0.1:$port"
  "$t" bench serve --url "http://127.0.0.1:$port" --requests "$requests" --concurrency "$conc" \
    --prompt-tokens "$prompt" --gen-tokens "$gen" --format json 2>/dev/null >"$dir/bench-$1.json"
  kill -INT "$up" 2>/dev/null || true
  wait "$timer" 2>/dev/null || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); u,s=open(sys.argv[2]).read().split()[-2:]; print("%.2f" % d["output_throughput"], d["completed"], d.get("failed", 0), "%.2f" % (float(u)+float(s)))' "$dir/bench-$1.json" "$dir/cpu-$1"
}

off=() on=() offcpu=() oncpu=()
for r in $(seq 1 "$rounds"); do
  order=(off on); [ $((r % 2)) = 0 ] && order=(on off)
  for m in "${order[@]}"; do
    n=$((n + 1))
    read -r tput done failed cpu < <(run "$m") || true
    printf 'round %d %-3s output tokens/s %8s  cluster CPU %6s s (completed %s, failed %s)\n' "$r" "$m" "$tput" "$cpu" "$done" "$failed"
    if [ "$m" = on ]; then on+=("$tput"); oncpu+=("$cpu"); else off+=("$tput"); offcpu+=("$cpu"); fi
  done
done
python3 - "${off[*]}" "${on[*]}" "${offcpu[*]}" "${oncpu[*]}" <<'PY'
import statistics, sys
off, on, offc, onc = ([float(x) for x in a.split()] for a in sys.argv[1:5])
mo, mn = statistics.median(off), statistics.median(on)
co, cn = statistics.median(offc), statistics.median(onc)
print(f"throughput median off {mo:.2f} tok/s, on {mn:.2f} tok/s: tracing costs {100*(1-mn/mo):+.2f}%")
print(f"cluster CPU median off {co:.2f} s, on {cn:.2f} s: tracing costs {100*(cn/co-1):+.2f}%")
PY
echo "sink: $(tail -1 "$dir/sink.log")"
