#!/usr/bin/env python3
"""Prints a benchmark result JSON as vLLM's `vllm bench serve --save-result`
writes it, reading only vLLM's field names, so it checks that a `tandem bench
serve --result-file` (or a --sweep-rates file's points) can stand in for one.
Exits 1 naming the first field vLLM writes that the file lacks. request_goodput
may be null or absent: vLLM writes null when the run had no --goodput.

    scripts/vllm-result.py RESULT.json [RESULT.json ...]
"""
import json
import sys

# Fields of vLLM's saved result (benchmarks/serve: "completed", throughputs,
# and mean/median/std/pNN for ttft, tpot, itl, e2el in milliseconds).
FIELDS = ["completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
          "output_throughput", "total_token_throughput"]
METRICS = ["ttft", "tpot", "itl", "e2el"]
STATS = ["mean", "median", "std", "p99"]


def show(name, r):
    missing = [f for f in FIELDS if f not in r] + \
        [f"{s}_{m}_ms" for m in METRICS for s in STATS if f"{s}_{m}_ms" not in r]
    if missing:
        sys.exit(f"{name}: no {missing[0]} (vLLM's result has it)")
    goodput = r.get("request_goodput")
    goodput = "-" if goodput is None else f"{goodput:.3f} req/s"
    print(f"{name}: {r['completed']} completed in {r['duration']:.1f} s, "
          f"{r['request_throughput']:.3f} req/s, goodput {goodput}, "
          f"{r['output_throughput']:.1f} output tok/s")
    for m in METRICS:
        print("  " + m.upper().ljust(5) + "  ".join(f"{s} {r[f'{s}_{m}_ms']:9.1f} ms" for s in STATS))


for path in sys.argv[1:]:
    with open(path) as f:
        doc = json.load(f)
    if "points" in doc:  # a sweep: one result per rate
        for p in doc["points"]:
            show(f"{path} @ {p['request_rate']} req/s", p["result"])
    else:
        show(path, doc)
