# Sourced by the benchmark scripts (tools/bench-*.sh): needs $llm42 and $models set.
step=0
# One progress line on stderr per step of $steps.
progress() { step=$((step + 1)); echo "[$step/$steps] $*" >&2; }
# Writes the random-weight llama-110m GGUF of each dtype given that $models lacks.
make_110m_models() {
  local d m
  for d in "$@"; do
    m="$models/llama-110m-$d.gguf"
    [[ -f $m ]] || "$llm42" make-model --preset llama-110m --dtype "$d" --out "$m" >/dev/null
  done
}
