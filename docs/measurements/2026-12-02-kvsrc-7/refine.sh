#!/usr/bin/env bash
# refinement between the grid's rates: each system in a fresh process, the script's load and SLO
set -uo pipefail
dir=/tmp/gp; t=$dir/tandem; model=$dir/110m-q8_0-8k.gguf
rates=${1:-4.5}
mixed="long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128"
wait_health() { for _ in $(seq 1 900); do curl -sf "$1/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
run() { name=$1; shift
  "$@" > $dir/refine-$name.log 2>&1 & pid=$!
  wait_health http://127.0.0.1:18950
  echo "== $name"
  $t bench serve --url http://127.0.0.1:18950 --dataset mixed --mixed "$mixed" --goodput "short.ttft:1000" --goodput "long.ttft:10000" --goodput "tpot:250 itl:250" \
    --requests 160 --sweep-rates "$rates" --result-file $dir/refine-$name.json --seed 1 2>&1 | grep -v "requests done"
  kill -INT $pid; wait $pid 2>/dev/null
}
run up $t up --model $model --port 18950 --threads 1 --worker-arg=--prefix-cache=false
run up-pace $t up --model $model --port 18950 --threads 1 --lend-cores --worker-arg=--core-lease-pace=80ms --worker-arg=--prefix-cache=false
run serve $t serve --model $model --port 18950 --threads 2 --prefix-cache=false
