#!/usr/bin/env bash
# Sourced by moe-bench.sh and qwen35-bench.sh: llama_bench_json LB NICE M
# TH GEN runs llama.cpp's llama-bench (LB) on model M at TH threads under
# `nice -n NICE`: the 512-token prefill from an empty context (-p 512 -n
# 0) and GEN decode steps after a 512-token prompt (-p 0 -n GEN -d 512),
# as Tandem's figures are; the file read into memory when
# LLAMA_MMAP=false, --poll LLAMA_POLL when set. It prints one JSON line as
# llamacpp-bench.mjs does: prefill_tok_s and decode_tok_s.
llama_bench_json() {
  local lb=$1 nice=$2 m=$3 th=$4 gen=$5 mmp=1
  [ "${LLAMA_MMAP:-true}" = false ] && mmp=0
  { nice -n "$nice" "$lb" -m "$m" -t "$th" -p 512 -n 0 -r 1 -mmp "$mmp" ${LLAMA_POLL:+--poll "$LLAMA_POLL"} -o jsonl 2>/dev/null
    nice -n "$nice" "$lb" -m "$m" -t "$th" -p 0 -n "$gen" -d 512 -r 1 -mmp "$mmp" ${LLAMA_POLL:+--poll "$LLAMA_POLL"} -o jsonl 2>/dev/null; } | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
pp = [r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0]
tg = [r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0]
print(json.dumps({"source": "llama-bench", "prefill_tok_s": round(pp[0], 2), "decode_tok_s": round(tg[0], 2)}, separators=(",", ":")))'
}
