#!/usr/bin/env bash
# llm42 and llama.cpp side by side, on this machine, the same GGUF files and thread count, runs
# alternated (issue 12's comparison): llama-bench's pp512 and tg128 at depths 0, 512 and 1900
# (the llama-110m presets' trained context is 2048; llm42 refuses a context past it), for every
# weight type, llama-1b's (f16 and q4_0) pp512 and tg32, and llama-batched-bench's 128,128,1,4,8,16
# on f16; and the same pp512 and tg128 on the newer families' presets FAMILIES (gemma4-110m: Gemma
# 4's layer shapes, shared K/V and per-layer embeddings at llama-110m's size; qwen35-110m: Qwen3.5's
# DeltaNet and gated attention layers at that size) for FAMILY_DTYPES. The k-quant mixes (KQUANTS, llama.cpp's names) are llama.cpp's own files: the f16 model
# quantized by llama.cpp's quantizer (tools/llamacpp/quantize_llamacpp.cc), what people download.
# Both sides with an f16 KV cache (llama.cpp's default; llm42's is f32, so --kv_dtype f16).
# Prints one markdown table of the best of ROUNDS rounds per side, with the ratios.
#
# llama.cpp is release v0.5.0, built for this CPU (tools/llamacpp_common.sh).
# tools/llamacpp/bench_llamacpp.cc times the llama.cpp side as llama-bench and
# llama-batched-bench do.
#
#   tools/bench-llamacpp.sh [BUILD_DIR] [MODEL_DIR]      (defaults: build, /tmp/llm42-models)
#   ROUNDS=2 THREADS=2 DTYPES="f32 f16 bf16 q8_0 q4_0" KQUANTS="Q4_K_M Q5_K_M Q6_K IQ4_XS" BIG=1
#   BIGS="f16 q4_0" BATCHED=1 FAMILIES="gemma4-110m qwen35-110m" FAMILY_DTYPES="f16 q8_0 Q4_K_M"
#   PLOT=ratios.png   (BIGS and FAMILY_DTYPES may name k-quant mixes too; FAMILIES="" for none)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
models=${2:-/tmp/llm42-models}
llm42="$build/tools/llm42"
threads=${THREADS:-2}
rounds=${ROUNDS:-2}
read -r -a dtypes <<<"${DTYPES-f32 f16 bf16 q8_0 q4_0}"
[[ -x $llm42 ]] || { echo "bench-llamacpp: $llm42 not built" >&2; exit 1; }

# llama.cpp, built once.
source "$here/llamacpp_common.sh"
harness=$(llamacpp_harness bench_llamacpp)
quantize=$(llamacpp_harness quantize_llamacpp)

mkdir -p "$models"
read -r -a kquants <<<"${KQUANTS-Q4_K_M Q5_K_M Q6_K IQ4_XS}"
# A model of `preset` in `dtype`: make-model's, or llama.cpp's quantization of make-model's f16.
make_model() {  # PRESET DTYPE
  local m="$models/$1-$2.gguf" f16="$models/$1-f16.gguf"
  [[ -f $m ]] && return
  if [[ $2 == [A-Z]* ]]; then
    [[ -f $f16 ]] || "$llm42" make-model --preset "$1" --dtype f16 --out "$f16" >/dev/null
    "$quantize" "$f16" "$m" "$2" >/dev/null 2>&1
  else
    "$llm42" make-model --preset "$1" --dtype "$2" --out "$m" >/dev/null
  fi
}
dtypes+=("${kquants[@]}")
for d in "${dtypes[@]}"; do make_model llama-110m "$d"; done
read -r -a bigs <<<"${BIGS:-f16 q4_0}"
if [[ ${BIG:-1} == 1 ]]; then
  for d in "${bigs[@]}"; do make_model llama-1b "$d"; done
fi

read -r -a families <<<"${FAMILIES-gemma4-110m qwen35-110m}"
read -r -a family_dtypes <<<"${FAMILY_DTYPES:-f16 q8_0 Q4_K_M}"
for f in "${families[@]}"; do
  for d in "${family_dtypes[@]}"; do make_model "$f" "$d"; done
done

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
# One line per measurement: MODEL TEST SIDE T/S.
lcpp() {  # MODEL-NAME FILE pp|tg N DEPTH
  "$harness" "$libdir" "$2" "$threads" "$3" "$4" "$5" 2 | awk -v m="$1" '{print m, $1 "@d" substr($2, 2), "llama.cpp", $3}' >>"$raw"
}
ours() {  # MODEL-NAME FILE llm42-bench-flags...
  local name=$1 file=$2
  shift 2
  "$llm42" bench --model "$file" --threads "$threads" --kv_dtype f16 --bandwidth=false "$@" 2>/dev/null |
    awk -v m="$name" -F'|' '/^\| (fast|fixed) / {gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4);
      print m, $3, "llm42-" $2, $4}' >>"$raw"
}
batched() {  # FILE
  for npl in 1 4 8 16; do
    "$harness" "$libdir" "$1" "$threads" batched 128 128 "$npl" | awk '{print "f16", "batched-B" $3 "-S", "llama.cpp", $10}' >>"$raw"
  done
  "$llm42" bench --model "$1" --threads "$threads" --kv_dtype f16 --batched 128,128,1,4,8,16 2>/dev/null |
    awk -F'|' '/^\| (fast|fixed) / {gsub(/ /, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $12); print "f16", "batched-B" $5 "-S", "llm42-" $2, $12}' >>"$raw"
}

steps=$(( rounds * (${#dtypes[@]} + ${BIG:-1} * ${#bigs[@]} + ${#families[@]} * ${#family_dtypes[@]} + ${BATCHED:-1}) ))
step=0
for ((r = 1; r <= rounds; ++r)); do
  for d in "${dtypes[@]}"; do
    step=$((step + 1)); echo "[$step/$steps] round $r: $d" >&2
    m="$models/llama-110m-$d.gguf"
    lcpp "$d" "$m" pp 512 0
    for depth in 0 512 1900; do lcpp "$d" "$m" tg 128 "$depth"; done
    ours "$d" "$m" --pp 512 --tg 128
    ours "$d" "$m" --tg 128 --depth 512
    ours "$d" "$m" --tg 128 --depth 1900
  done
  if [[ ${BIG:-1} == 1 ]]; then
    for d in "${bigs[@]}"; do
      step=$((step + 1)); echo "[$step/$steps] round $r: llama-1b $d" >&2
      m="$models/llama-1b-$d.gguf"
      lcpp "1b-$d" "$m" pp 512 0
      lcpp "1b-$d" "$m" tg 32 0
      ours "1b-$d" "$m" --pp 512 --tg 32
    done
  fi
  for f in "${families[@]}"; do
    for d in "${family_dtypes[@]}"; do
      step=$((step + 1)); echo "[$step/$steps] round $r: $f $d" >&2
      m="$models/$f-$d.gguf"
      lcpp "${f%-110m}-$d" "$m" pp 512 0
      lcpp "${f%-110m}-$d" "$m" tg 128 0
      ours "${f%-110m}-$d" "$m" --pp 512 --tg 128
    done
  done
  if [[ ${BATCHED:-1} == 1 ]]; then
    step=$((step + 1)); echo "[$step/$steps] round $r: batched" >&2
    batched "$models/llama-110m-f16.gguf"
  fi
done

table=$(mktemp)
trap 'rm -f "$raw" "$table"' EXIT
echo "## llm42 and llama.cpp v0.5.0 side by side ($threads threads, best of $rounds alternated rounds, f16 KV cache)"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(date -u +%F)"
echo
echo "| model | test | llama.cpp t/s | llm42 fast | llm42 fixed | fast / llama.cpp | fixed / llama.cpp |"
echo "|---|---|---|---|---|---|---|"
awk '{k = $1 " " $2; if (!(k in seen)) {seen[k] = 1; order[n++] = k}
      if ($4 > best[k, $3]) best[k, $3] = $4}
     END {for (i = 0; i < n; ++i) {k = order[i]; split(k, p, " ")
       l = best[k, "llama.cpp"]; f = best[k, "llm42-fast"]; x = best[k, "llm42-fixed"]
       printf "| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n", p[1], p[2], l, f, x, (l > 0 ? f / l : 0), (l > 0 ? x / l : 0)}}' "$raw" |
  tee "$table"

# The ratios as bars, one pair per model and test, against the parity line.
if [[ -n ${PLOT:-} ]]; then
  source "$here/need-gnuplot.sh"
  awk -F'|' '{gsub(/ /, ""); print $2 ":" $3, $7, $8}' "$table" >"$table.dat"
  gnuplot <<GP
set terminal pngcairo size 1400,560 font ",10" noenhanced
set bmargin 9
set rmargin 6
set output "$PLOT"
set title "llm42 / llama.cpp v0.5.0, t/s ratio ($threads threads, best of $rounds alternated rounds, f16 KV cache)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8
set yrange [0:*]
set ylabel "llm42 / llama.cpp"
set xtics rotate by -45
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
set arrow from graph 0, first 1.2 to graph 1, first 1.2 nohead dt 3 lw 1 lc rgb "red"
set label "issue 12's prefill goal (1.2)" at graph 0.995, first 1.24 right tc rgb "red" front
plot "$table.dat" using 2:xtic(1) title "fast", "" using 3 title "fixed"
GP
  rm -f "$table.dat"
  echo "wrote $PLOT" >&2
fi
