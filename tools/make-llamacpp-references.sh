#!/usr/bin/env bash
# llama.cpp's reference numbers for tests/llamacpp_parity_test.cc: for each case below, the
# random-weight model `llm42 make-model` writes (the vocabulary of ../shared/vocab, seed 1), and
# llama.cpp's log-probability of each of 128 prompt tokens under teacher forcing plus 16 greedy
# steps with their top-1 margins (tools/llamacpp/reference_llamacpp.cc), one JSON file per case in
# tests/reference/llamacpp/, with the model's fingerprint: the test rebuilds the model and refuses
# to compare against numbers of another one. The models are not committed; the JSON files are.
# Rerun after anything changes what make-model writes.
#
#   tools/make-llamacpp-references.sh [BUILD_DIR]        (default: build)
#   CASES="tiny-blocks:q4_k tiny-qwen3:f32"   (default: every case below)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${1:-build}
llm42="$build/tools/llm42"
[[ -x $llm42 ]] || { echo "make-llamacpp-references: $llm42 not built" >&2; exit 1; }
source "$here/llamacpp_common.sh"
harness=$(llamacpp_harness reference_llamacpp)
out="$repo/tests/reference/llamacpp"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

read -r -a cases <<<"${CASES:-tiny:f32 tiny-blocks:f16 tiny-blocks:q8_0 tiny-blocks:q4_0 tiny-blocks:q4_1 \
tiny-blocks:q5_0 tiny-blocks:q5_1 tiny-blocks:q2_k tiny-blocks:q3_k tiny-blocks:q4_k tiny-blocks:q5_k \
tiny-blocks:q6_k tiny-blocks:iq4_nl tiny-blocks:iq4_xs tiny-qwen2:f32 tiny-qwen3:f32 tiny-qwen3:q4_k tiny-gemma2:f32 tiny-gemma3:f32 tiny-gemma3:q4_k \
tiny-phi:f32 tiny-phi:q6_k tiny-mistral3:f32 tiny-mistral3:q4_k tiny-gemma4:f32 tiny-gemma4:f16 tiny-gemma4:q8_0 tiny-gemma4:q4_0 tiny-gemma4:q4_k tiny-gemma4:q6_k tiny-gemma4:iq4_xs \
tiny-qwen35:f32 tiny-qwen35:f16 tiny-qwen35:q8_0 tiny-qwen35:q4_0 tiny-qwen35:q4_k tiny-qwen35:q6_k tiny-qwen35:iq4_xs \
tiny-qwen3moe:f32 tiny-qwen3moe:f16 tiny-qwen3moe:q8_0 tiny-qwen3moe:q4_0 tiny-qwen3moe:q4_k tiny-qwen3moe:q6_k \
tiny-qwen3moe:iq4_xs tiny-mixtral:f32 tiny-mixtral:q4_0 tiny-qwen35moe:f32 tiny-qwen35moe:f16 tiny-qwen35moe:q8_0 \
tiny-qwen35moe:q4_0 tiny-qwen35moe:q4_k tiny-qwen35moe:q6_k tiny-qwen35moe:iq4_xs tiny-gemma4moe:f32 tiny-gemma4moe:q8_0 \
tiny-gemma4moe:q4_k tiny-qwen3moe:mxfp4 tiny-gptoss:f32 tiny-gptoss:f16 tiny-gptoss:q8_0 tiny-gptoss:q4_0 \
tiny-gptoss:q4_k tiny-gptoss:q6_k tiny-gptoss:iq4_xs tiny-gptoss:mxfp4}"
step=0
for c in "${cases[@]}"; do
  step=$((step + 1))
  preset=${c%%:*} dtype=${c##*:}
  echo "[$step/${#cases[@]}] $preset $dtype" >&2
  model="$work/$preset-$dtype.gguf"
  "$llm42" make-model --preset "$preset" --dtype "$dtype" --seed 1 --out "$model" >/dev/null
  fingerprint=$("$llm42" info --model "$model" --fingerprint | awk '/^fingerprint:/ {print $2}')
  numbers=$("$harness" "$libdir" "$model" 128 16 7)
  {
    echo "{"
    echo "\"preset\": \"$preset\", \"dtype\": \"$dtype\", \"seed\": 1,"
    echo "\"fingerprint\": \"$fingerprint\","
    echo "\"llamacpp\": \"v0.5.0 (node-llama-cpp 3.22.1), CPU, f32 KV cache, teacher forcing in one batch\","
    echo "${numbers#\{}"
  } >"$out/$preset-$dtype.json"
done
echo "make-llamacpp-references: wrote ${#cases[@]} files to tests/reference/llamacpp" >&2
