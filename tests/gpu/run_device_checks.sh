#!/usr/bin/env bash
# Every GPU test and benchmark, in one run on the device machine (one H200), within 8 minutes;
# prints its table last. Prepare on a development machine (which has the CUDA toolkit):
#
#   tools/build-gpu-bundle.sh          # build-gpu/ (Release, CUDA) + gpu-libs/ (Abseil, utf8proc)
#
# then, through the device tool, with carry = ["build-gpu/tools/llm42", "build-gpu/tests/backend_ops_test",
# "build-gpu/tests/gpu_end_to_end_test", "gpu-libs", "gpu-shared"]:
#
#   tests/gpu/run_device_checks.sh build-gpu
#
# Results go to $OUT (the device tool's output folder) when set; commit the printed report to
# docs/gpu-results.md.
set -uo pipefail
build=${1:-build-gpu}
out=${OUT:-/tmp/llm42-gpu}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLM42_SHARED_DIR="$PWD/gpu-shared"
export LLM42_TEST_TMP_DIR="$out/tmp"
cli="$build/tools/llm42"
report="$out/report.md"
: > "$report"
say() { echo "$*" | tee -a "$report"; }

say "# llm42 on the GPU ($(date -u +%Y-%m-%dT%H:%MZ))"
say ""
say '```'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$report"
say '```'

# 1. The gpu-labelled tests (op conformance on cuda, end to end), run directly: ctest's files
# name this machine's paths. 3 minutes at most.
say ""
say "## Tests"
say '```'
(cd "$out" && timeout 90 "$OLDPWD/$build/tests/backend_ops_test" --gtest_filter='*/cuda:BackendRegistry.*' 2>&1 |
  grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|Which is|actual' | head -n 60) | tee -a "$report"
(cd "$out" && timeout 90 "$OLDPWD/$build/tests/gpu_end_to_end_test" 2>&1 |
  grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|Which is|actual|near-tie' | head -n 40) | tee -a "$report"
say '```'

# 2. Benchmarks on a random model of Llama-3.1-8B's shape in bf16; about 4 minutes.
model=/tmp/llama-8b-bf16.gguf
if [[ ! -f $model ]]; then
  timeout 150 "$cli" make-model --preset llama-8b --dtype bf16 \
    --vocab gpu-shared/vocab/ggml-vocab-llama-bpe.gguf --out "$model" >/dev/null 2>&1 ||
    say "make-model llama-8b failed or timed out"
fi
say ""
say "## llm42 bench --backend cuda, llama-8b shape, bf16"
for shape in "128 128" "512 128"; do
  set -- $shape
  say ""
  say "### prompt $1, output $2"
  timeout 120 "$cli" bench --backend cuda --model "$model" --schedules fast,fixed --concurrency 1,16,64,256 \
    --prompt_tokens "$1" --output_tokens "$2" --max_batch_tokens 2048 --bandwidth=false 2>/dev/null |
    tee -a "$report"
done
echo
echo "==== report ===="
cat "$report"
