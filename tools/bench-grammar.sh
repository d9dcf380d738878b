#!/usr/bin/env bash
# Constrained output, llm42 and llama.cpp side by side on this machine (issue 42's comparison):
# the same GGUF files, thread count, prompt and JSON Schema (tools/grammar-bench.schema.json: an
# object with nested arrays, enums and strings), temperature 0.8, rounds alternating unconstrained
# and constrained generations of N tokens. llama.cpp's side is what `llama-cli --json-schema`
# does: its own schema converter and grammar sampler (tools/llamacpp/grammar_llamacpp.cc); llm42's
# is `llm42 bench --json_schema`. Models: llama-110m (32k vocabulary) and llama-1b with the
# 128k-token Llama 3 vocabulary (../shared/vocab/ggml-vocab-llama-bpe.gguf), both made by
# `llm42 make-model`. Prints one markdown table.
#
#   tools/bench-grammar.sh [BUILD_DIR] [MODEL_DIR]      (defaults: build, /tmp/llm42-models)
#   THREADS=2 TOKENS=200 ROUNDS=4 SCHEMA=tools/grammar-bench.schema.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
models=${2:-/tmp/llm42-models}
llm42="$build/tools/llm42"
threads=${THREADS:-2} tokens=${TOKENS:-200} rounds=${ROUNDS:-4}
schema=${SCHEMA:-$here/grammar-bench.schema.json}
shared=${LLM42_SHARED_DIR:-$here/../../shared}
[[ -x $llm42 ]] || { echo "bench-grammar: $llm42 not built" >&2; exit 1; }
source "$here/llamacpp_common.sh"
harness=$(llamacpp_harness grammar_llamacpp common)

mkdir -p "$models"
declare -A files=([llama-110m]="$models/llama-110m-f16.gguf" [llama-1b-128k]="$models/llama-1b-v128k-q4_0.gguf")
[[ -f ${files[llama-110m]} ]] || "$llm42" make-model --preset llama-110m --dtype f16 --out "${files[llama-110m]}" >/dev/null
[[ -f ${files[llama-1b-128k]} ]] || "$llm42" make-model --preset llama-1b --dtype q4_0 \
  --vocab "$shared/vocab/ggml-vocab-llama-bpe.gguf" --out "${files[llama-1b-128k]}" >/dev/null

echo "| model | side | compile ms | unconstrained tok/s | constrained tok/s | ratio | grammar us/token | JSON complete |"
echo "|---|---|---|---|---|---|---|---|"
step=0
for name in llama-110m llama-1b-128k; do
  file=${files[$name]}
  step=$((step + 1)); echo "[$step/4] llm42 on $name" >&2
  "$llm42" bench --model "$file" --json_schema "$schema" --threads "$threads" --output_tokens "$tokens" \
      --rounds "$rounds" 2>/dev/null | awk -F'|' -v m="$name" '/^\| [0-9]/ {
    gsub(/ /, ""); printf "| %s | llm42 | %.1f | %s | %s | %s | %s | %s |\n", m, $2 + $3, $4, $5, $6, $8, $9 }'
  step=$((step + 1)); echo "[$step/4] llama.cpp on $name" >&2
  "$harness" "$libdir" "$file" "$threads" "$schema" "$tokens" "$rounds" | awk -v m="$name" '
    { v[$1] = $2 }
    END { printf "| %s | llama.cpp | %.1f | %.1f | %.1f | %.3f | %.1f | %s |\n", m, v["convert_ms"] + v["compile_ms"],
          v["plain_tok_s"], v["constrained_tok_s"], v["constrained_tok_s"] / v["plain_tok_s"], v["grammar_us_per_token"], v["complete"] }'
done
