#!/usr/bin/env bash
# Every GPU test and benchmark, in one run on the device machine (one H200), within a deadline
# (first argument after the build folder, seconds; default 540, inside the device tool's 600); each step gets what is left of
# it, most important first, and the report is written as it goes, so a cut-off run still
# reports what it did. Prepare on a development machine (which has the CUDA toolkit):
#
#   tools/build-gpu-bundle.sh          # build-gpu/ (Release, CUDA) + gpu-libs/ + gpu-shared/
#
# then, through the device tool, with carry = ["build-gpu/tools/llm42",
# "build-gpu/tests/backend_ops_test", "build-gpu/tests/gpu_end_to_end_test",
# "build-gpu/tests/determinism_test", "gpu-libs", "gpu-shared"]:
#
#   tests/gpu/run_device_checks.sh build-gpu 540    # the tool's timeout_s: 580
#
# Results go to $OUT (the device tool's output folder) when set, as five files (the tool brings
# back at most eight): report.md (commit it to docs/gpu-results.md), gpu-results.json (the
# headline figures, results_json.sh; commit it to docs/), logs.tar.gz (each step's full log),
# and the experiment's CSVs (tools/plot_dvr.sh dvr-offline.csv docs/gpu-dvr.png makes its plot on
# the development machine).
set -uo pipefail
build=${1:-build-gpu}
deadline=${2:-540}
out=${OUT:-/tmp/llm42-gpu}
logs=/tmp/llm42-gpu-logs
rm -rf "$logs"
mkdir -p "$out" "$logs"
root=$PWD
export LD_LIBRARY_PATH="$root/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LLM42_SHARED_DIR="$root/gpu-shared"
export LLM42_TEST_TMP_DIR=/tmp/llm42-gpu-tmp
cli="$root/$build/tools/llm42"
report="$out/report.md"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
# Seconds a step may take: its own limit, or what is left before the deadline.
budget() {
  local left=$((deadline - SECONDS - 5))
  ((left < $1)) && echo $((left > 1 ? left : 1)) || echo "$1"
}
# step NAME LIMIT FILTER CMD...: runs CMD with its output in $logs/NAME.log; the report gets the
# lines matching FILTER, the exit status and the time taken.
step() {
  local name=$1 limit filter=$3
  limit=$(budget "$2")
  shift 3
  local t0=$SECONDS
  say ""
  say "### $name (limit ${limit} s)"
  say '```'
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  grep -E "$filter" "$logs/$name.log" | head -n 80 | tee -a "$report"
  say "exit $rc after $((SECONDS - t0)) s$([[ $rc == 124 ]] && echo ' (TIMED OUT)')"
  say '```'
}
bench_lines='^\||^model|^workload|^memory|^FMA|llm42|as a graph'
tests='^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|Which is|actual|near-tie|^\| |error|Error|fixed GEMM|as a graph'

say "# llm42 on the GPU ($(date -u +%Y-%m-%dT%H:%MZ))"
say ""
say '```'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$report"
say '```'

# The Llama-3.1-8B-shaped bf16 model (16 GB) for the benchmarks, written on the CPUs while the
# tests use the GPU ($LLM42_GPU_PRESET picks a smaller one: llama-1b, or tiny to try the script).
preset=${LLM42_GPU_PRESET:-llama-8b}
model=/tmp/$preset-bf16.gguf
"$cli" make-model --preset "$preset" --dtype bf16 --vocab gpu-shared/vocab/ggml-vocab-llama-bpe.gguf \
  --out "$model" > "$logs/make-model.log" 2>&1 &
maker=$!

say ""
say "## Tests"
step ops 60 "$tests" "$build/tests/backend_ops_test" --gtest_filter='*/cuda:BackendRegistry.*'
# The fixed GEMM's fallbacks forced: the tensor-core kernel, then the FMA chains.
step ops_tensor_core_fixed_gemm 30 "$tests" env LLM42_CUDA_OWN_FIXED_GEMM=1 "$build/tests/backend_ops_test" \
  --gtest_filter='*/cuda'
step ops_fma_fixed_gemm 30 "$tests" env LLM42_CUDA_OWN_FIXED_GEMM=fma "$build/tests/backend_ops_test" \
  --gtest_filter='*/cuda'
# Split rows' partial states with room for one (row, span) slot: every split row a wave of its
# own, which must not change a bit.
step ops_attention_waves 20 "$tests" env LLM42_CUDA_ATTENTION_SCRATCH_BYTES=1 "$build/tests/backend_ops_test" \
  --gtest_filter='*Attention*/cuda'
step end_to_end 150 "$tests" "$build/tests/gpu_end_to_end_test"
say ""
say "## Determinism acceptance suite on cuda (LLM42_TEST_BACKEND=cuda)"
step determinism 110 "$tests" env LLM42_TEST_BACKEND=cuda "$build/tests/determinism_test"

say ""
say "## Benchmarks: $preset shape, bf16 (random weights)"
t0=$SECONDS
wait $maker
say "make-model: exit $? after $((SECONDS - t0)) s more ($(du -h "$model" 2>/dev/null | cut -f1))"
bench=(--backend cuda --model "$model" --bandwidth=false)
# Host-side draws on this machine's cores (a step's rows run on a pool of up to 16 host threads).
step sampling 15 "$bench_lines" "$cli" bench-sampling --vocab_sizes 128256 --rows 256 --threads 16 --draw_backend cuda
step single_stream 40 "$bench_lines" "$cli" bench "${bench[@]}" --pp 2048 --tg 128 --max_batch_tokens 2048
# The same decode without CUDA graphs (each step's kernels launched one by one), for what they save.
step single_stream_no_graphs 25 "$bench_lines" env LLM42_CUDA_GRAPHS=0 "$cli" bench "${bench[@]}" --pp 128 --tg 128
# Where a busy step's time goes (the first run's 256-request steps took 168 ms, their GEMMs ~5):
# the table's last column splits each step into the forward pass, the logits' copy and the host.
step concurrency 60 "$bench_lines" "$cli" bench "${bench[@]}" --schedules fast,fixed --concurrency 64,256 \
  --prompt_tokens 128 --output_tokens 64 --max_batch_tokens 2048

# The LLM-42 experiment (issue 13), last: ShareGPT-like lengths at full scale (~230 prompt and
# ~240 output tokens a request on average), modes off, batch_invariant and selective at 2, 10,
# 20, 50 and 100 % deterministic (the engine's own decode path), offline at T = 0.8 (the issue's
# targets are at T = 0.8), then Poisson arrivals at T = 0.8. Sized to fit: run 3 (2026-12-04)
# took ~29 s a mode offline (64 requests, 14.6k output tokens at 500-840 tok/s, the model's load
# included), so the 7 modes ~205 s; Poisson at 4 req/s gets what is left. Each row prints as its
# run ends, and each step stops at its limit, so a slower device still reports the rows it
# finished, the most important first.
dvr=(bench-dvr "${bench[@]}" --workload sharegpt --scale 1 --requests 64 --windows= --variants=false
  --both_paths=false --max_batch_tokens 2048)
step experiment_offline 230 "$bench_lines" "$cli" "${dvr[@]}" --rate 0 --temperatures 0.8 --csv "$out/dvr-offline.csv"
step experiment_poisson 150 "$bench_lines" "$cli" "${dvr[@]}" --rate 4 --temperatures 0.8 --csv "$out/dvr-poisson.csv"

"$root/tests/gpu/results_json.sh" "$logs/single_stream.log" "$out/dvr-offline.csv" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" "$(date -u +%F)" \
  > "$out/gpu-results.json" 2> "$logs/results_json.log"
tar -C "$logs" -czf "$out/logs.tar.gz" .
echo
echo "==== report ===="
cat "$report"
