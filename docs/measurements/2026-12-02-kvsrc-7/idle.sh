#!/usr/bin/env bash
# idle TTFT: serve --threads 1 vs up --threads 1, per binary; prints mean TTFT ms
set -uo pipefail
M=/tmp/gp/110m-q8_0-8k.gguf
wait_health() { for _ in $(seq 1 600); do curl -sf "$1/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "no health at $1" >&2; return 1; }
for round in 1 2; do
for bin in old new; do
  t=/tmp/tandem-$bin
  $t serve --model $M --port 18801 --threads 1 --log-format json 2>/tmp/idle-serve-$bin.log &
  spid=$!
  $t up --model $M --port 18802 --threads 1 --log-format json 2>/tmp/idle-up-$bin.log &
  upid=$!
  wait_health http://127.0.0.1:18801; wait_health http://127.0.0.1:18802
  sleep 1
  for p in 1024 4096; do
    line="round $round $bin prompt $p:"
    for target in serve:18801 up:18802; do
      ms=$($t bench serve --url "http://127.0.0.1:${target##*:}" --concurrency 1 --requests 4 --prompt-tokens "$p" --gen-tokens 16 --format json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f/%.0f" % (d["mean_ttft_ms"], d["median_ttft_ms"]))')
      line="$line ${target%%:*} $ms"
    done
    echo "$line"
  done
  pref=$(grep -o '"addr":"http://[0-9.:]*"[^}]*"role":"prefill"' /tmp/idle-up-$bin.log | head -1 | grep -o 'http://[0-9.:]*')
  [ -n "$pref" ] && curl -s "$pref/metrics" | grep -E 'shm_src_kv_frames_out|"shm_kv_frames_out"|name="shm_kv_frames_out"' | tr '\n' ' '; echo
  kill $spid; kill -INT $upid; wait $spid $upid 2>/dev/null
done
done
