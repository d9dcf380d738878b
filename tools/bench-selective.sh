#!/usr/bin/env bash
# What selective determinism costs, per weight type (docs/benchmarks.md, "Selective against
# batch_invariant and off"): llama-110m f16, q8_0 and q4_0, greedy and T = 0.8, offline (every
# request at once) and Poisson arrivals at 4 requests/s; modes off, batch_invariant and selective
# at 10 % and 100 % deterministic requests, each run REPEAT times round by round and reported as
# its run of median throughput (bench-dvr --repeat). Then, per weight type, the verify-only path
# at 100 % (decode_path verify: every deterministic token is a fast candidate), whose
# disagreements per thousand compared candidates are how often the fast path's token is not the
# fixed schedule's. Makes the models it lacks; CSVs land in OUT_DIR.
#
#   tools/bench-selective.sh [BUILD_DIR] [MODEL_DIR] [OUT_DIR]
#       (defaults: build, /tmp/llm42-models, /tmp/llm42-selective; REPEAT=3, THREADS=2)
set -euo pipefail
build=${1:-build}
models=${2:-/tmp/llm42-models}
out=${3:-/tmp/llm42-selective}
llm42="$build/tools/llm42"
threads=${THREADS:-2}
repeat=${REPEAT:-3}
[[ -x $llm42 ]] || { echo "bench-selective: $llm42 not built" >&2; exit 1; }
mkdir -p "$models" "$out"

dtypes=(f16 q8_0 q4_0)
steps=$(( ${#dtypes[@]} * 5 ))
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
make_110m_models "${dtypes[@]}"

common=(--threads "$threads" --requests 16 --windows "" --variants=false --fractions 0.1,1)
for d in "${dtypes[@]}"; do
  m="$models/llama-110m-$d.gguf"
  for rate in 0 4; do
    for t in 0 0.8; do
      arrivals=$([[ $rate == 0 ]] && echo offline || echo "Poisson $rate/s")
      progress "$d, $arrivals, T = $t"
      echo "### $d, $arrivals, T = $t"
      "$llm42" bench-dvr --model "$m" "${common[@]}" --rate "$rate" --temperatures "$t" --both_paths=false \
        --repeat "$repeat" --csv "$out/$d-rate$rate-t$t.csv" 2>/dev/null | grep -E '^\|'
      echo
    done
  done
  progress "$d, the verify-only path's disagreements"
  echo "### $d, offline, 100 % deterministic, decode path auto and verify only"
  "$llm42" bench-dvr --model "$m" "${common[@]}" --fractions 1 --rate 0 --temperatures 0,0.8 \
    --csv "$out/$d-disagreement.csv" 2>/dev/null | grep -E '^\|'
  echo
done
