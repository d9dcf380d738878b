#!/usr/bin/env bash
# tools/fuzz.sh TARGET SECONDS [libFuzzer flags...]
# Builds build-fuzz/ (clang, AddressSanitizer + UBSan, libFuzzer coverage; fuzz/CMakeLists.txt)
# and fuzzes TARGET (gguf_fuzzer, receipt_fuzzer, tokenizer_fuzzer, saved_conversation_fuzzer,
# hf_fuzzer, chat_template_fuzzer, session_config_fuzzer, c_api_fuzzer, gbnf_fuzzer,
# json_schema_fuzzer, or "all") for SECONDS
# each, starting from a seed corpus made at run time from ../shared, the CLI and
# fuzz/make_seeds.py (nothing binary is committed). Prints libFuzzer's progress and a summary line per target;
# exits non-zero on a crash, whose reproducer stays in build-fuzz/crashes/TARGET/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [[ $# -lt 2 ]]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target=$1 seconds=$2
shift 2
targets=(gguf_fuzzer receipt_fuzzer tokenizer_fuzzer saved_conversation_fuzzer hf_fuzzer chat_template_fuzzer
         session_config_fuzzer c_api_fuzzer gbnf_fuzzer json_schema_fuzzer)
[[ $target == all ]] || targets=("$target")
shared=${LLM42_SHARED_DIR:-$root/../shared}
build=build-fuzz
bash tools/install-deps.sh

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLLM42_BUILD_FUZZERS=ON -DLLM42_SANITIZE=address,undefined -DLLM42_WITH_CUDA=OFF \
  -DLLM42_BUILD_TESTS=OFF -DLLM42_BUILD_SAMPLES=OFF -DLLM42_BUILD_BINDINGS=OFF >/dev/null
cmake --build "$build" --target llm42_cli "${targets[@]}"

# Seeds.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{gguf_fuzzer,receipt_fuzzer,tokenizer_fuzzer,saved_conversation_fuzzer}
python3 fuzz/make_seeds.py "$seeds"
if [[ -d $shared ]]; then
  cp "$shared/models/stories260K.gguf" "$shared/vocab/ggml-vocab-llama-spm.gguf" "$seeds/gguf_fuzzer/"
  i=0
  for inp in "$shared"/vocab/*.inp; do
    awk -v dir="$seeds/tokenizer_fuzzer" -v base=$((i += 1)) \
      'BEGIN { RS = "\n__ggml_vocab_test__\n" } { f = dir "/" base "-" NR; printf "%s", $0 > f; close(f) }' "$inp"
  done
  for form in bin txtpb; do
    "$build/tools/llm42" generate --model "$shared/models/stories260K.gguf" --prompt "Once upon a time" \
      --max-tokens 8 --temperature 0.8 --seed 3 --deterministic --print-logprobs --stats=false \
      --receipt "$seeds/receipt_fuzzer/seed.$form" >/dev/null 2>&1
  done
  # Real chat templates for the Jinja renderer, each with a short conversation.
  mkdir -p "$seeds/chat_template_fuzzer"
  for t in "$shared"/templates/*.jinja; do
    { printf '\x00'; cat "$t"; printf '\n--8<--\nsystem\n--8<--\nBe brief.\n--8<--\nuser\n--8<--\nHi'; } \
      > "$seeds/chat_template_fuzzer/$(basename "$t" .jinja)"
  done
else
  echo "fuzz.sh: $shared is missing: tokenizer_fuzzer and c_api_fuzzer (which need its vocabularies and model) are skipped" >&2
  targets=("${targets[@]/tokenizer_fuzzer/}")
  targets=("${targets[@]/c_api_fuzzer/}")
fi
printf 'LLM42CV2' > "$seeds/saved_conversation_fuzzer/magic"
printf 'LLM42CV1' > "$seeds/saved_conversation_fuzzer/magic_v1"
mkdir -p "$seeds/gbnf_fuzzer"
printf 'root ::= "{" ws (item ("," ws item)*)? "}"\nitem ::= [a-z]+ | "\\"" [^"]* "\\""\nws ::= [ \\t\\n]*\0{a, "b"}' \
  > "$seeds/gbnf_fuzzer/object"
mkdir -p "$seeds/json_schema_fuzzer"
printf '%s' '{"type": "object", "properties": {"a": {"type": "array", "items": {"enum": [1, "x"]}, "maxItems": 3},
 "b": {"type": "string", "pattern": "^[a-z]{2}\\d?$"}, "c": {"$ref": "#/$defs/n"}}, "required": ["a"],
 "$defs": {"n": {"type": "integer", "minimum": -5, "maximum": 120}}}' > "$seeds/json_schema_fuzzer/object"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  [[ -n $t ]] || continue
  corpus=$build/corpus/$t crashes=$build/crashes/$t
  mkdir -p "$corpus" "$crashes"
  dict=()
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  echo "== $t: ${seconds} s"
  if ! LLM42_SHARED_DIR=$shared "$build/fuzz/$t" "$corpus" "$seeds/$t" -max_total_time="$seconds" \
      -artifact_prefix="$crashes/" -print_final_stats=1 -rss_limit_mb=4096 "${dict[@]}" "$@" 2>"$build/$t.log"; then
    status=1
    tail -n 60 "$build/$t.log"
    echo "fuzz.sh: $t FAILED; reproducer in $crashes/" >&2
  fi
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/$t.log" | tr '\n' ' '
  grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$build/$t.log" | tail -n 1
done
exit $status
