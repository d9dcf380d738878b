#!/usr/bin/env bash
# The CPU kernel benchmarks of docs/benchmarks.md in one run: llama-bench's shapes (pp512, tg64
# at depths 0, 512 and 1900) for every weight type, pp512 at depth 1024 (f16; the depth kept in
# the prefix cache, as llama-bench keeps it), the KV cache in f32 and f16 at depth 1900,
# llama-1b f16's pp512 and tg32, and llama-batched-bench's shape, each printed with the FMA peak
# and read bandwidth measured in the same run (and the GEMMs and GEMVs alone). Makes the models
# it lacks.
#
#   tools/bench-cpu.sh [BUILD_DIR] [MODEL_DIR]     (defaults: build, /tmp/llm42-models)
set -euo pipefail
build=${1:-build}
models=${2:-/tmp/llm42-models}
llm42="$build/tools/llm42"
threads=${THREADS:-2}
[[ -x $llm42 ]] || { echo "bench-cpu: $llm42 not built" >&2; exit 1; }
mkdir -p "$models"

dtypes=(f32 f16 bf16 q8_0 q4_0)
steps=$(( ${#dtypes[@]} * 2 + 5 ))
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
make_110m_models "${dtypes[@]}"
big="$models/llama-1b-f16.gguf"
[[ -f $big ]] || "$llm42" make-model --preset llama-1b --dtype f16 --out "$big" >/dev/null

echo "## pp512 and tg64 at depth 0 and 512 ($threads threads)"
for d in "${dtypes[@]}"; do
  m="$models/llama-110m-$d.gguf"
  progress "$d depth 0"
  "$llm42" bench --model "$m" --threads "$threads" --pp 512 --tg 64
  progress "$d depth 512"
  "$llm42" bench --model "$m" --threads "$threads" --tg 64 --depth 512 | grep -E '^\| (fast|fixed)'
done

echo
echo "## pp512 at depth 1024, f16 weights"
progress "pp512 at depth 1024"
"$llm42" bench --model "$models/llama-110m-f16.gguf" --threads "$threads" --pp 512 --depth 1024 --bandwidth=false |
  grep -E '^\| (fast|fixed)'

echo
echo "## tg64 at depth 1900, f16 weights, KV cache f32 and f16"
for kv in f32 f16; do
  progress "depth 1900, KV $kv"
  "$llm42" bench --model "$models/llama-110m-f16.gguf" --threads "$threads" --tg 64 --depth 1900 --kv_dtype "$kv"
done

echo
echo "## pp512 and tg32, llama-1b f16"
progress "llama-1b f16"
"$llm42" bench --model "$big" --threads "$threads" --pp 512 --tg 32

echo
echo "## llama-batched-bench's shape, f16"
progress "batched"
"$llm42" bench --model "$models/llama-110m-f16.gguf" --threads "$threads" --batched 128,128,1,4,8,16
