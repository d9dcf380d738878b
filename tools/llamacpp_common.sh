# Sourced by the scripts that run llama.cpp beside llm42 (tools/bench-llamacpp.sh,
# tools/make-llamacpp-references.sh). llama.cpp is release v0.5.0 as the npm package
# node-llama-cpp 3.22.1 ships its source, built for this CPU (GGML_NATIVE, CPU only) by that
# package's own `source build`: its prebuilt libraries pick a CPU variant at run time and ran
# f16/bf16 prompts at half a native build's speed on a Zen 5. Cached under $LLM42_LLAMACPP_CACHE
# (default ~/.cache/llm42/node-llama-cpp-3.22.1; a first run installs and builds it, about ten
# minutes on two cores). Sets $libdir (its libraries) and $src (its source tree).
cache=${LLM42_LLAMACPP_CACHE:-$HOME/.cache/llm42/node-llama-cpp-3.22.1}
command -v npm >/dev/null || { echo "llama.cpp: needs npm (Debian: apt-get install npm)" >&2; exit 1; }
pkg="$cache/node_modules/node-llama-cpp"
if [[ ! -d $pkg/llama/localBuilds ]]; then
  echo "llama.cpp: installing node-llama-cpp 3.22.1 and building its llama.cpp in $cache" >&2
  mkdir -p "$cache"
  npm install --prefix "$cache" --omit=optional --ignore-scripts --no-audit --no-fund node-llama-cpp@3.22.1 >&2
  # `source download` takes the release from the git bundle inside the package (no network) and
  # builds it for this CPU.
  (cd "$cache" && npx --no-install node-llama-cpp source download --gpu false --noUsageExample) >&2
fi
libllama=$(find "$pkg/llama/localBuilds" -path '*/Release/*' -name 'libllama.v*.so' | head -1)
[[ -n $libllama ]] || { echo "llama.cpp: no libllama built under $pkg/llama/localBuilds" >&2; exit 1; }
libdir=$(dirname "$libllama")
src="$pkg/llama/llama.cpp"

# llamacpp_harness SOURCE [common]: builds tools/llamacpp/SOURCE.cc against that library (once,
# again when the source is newer) and prints the binary's path; with `common`, against its common
# library too (json_schema_to_grammar).
llamacpp_harness() {
  local name=$1 here extra=()
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  [[ ${2:-} == common ]] && extra=(-I"$src/common" -I"$src/vendor" -l:libllama-common.so)
  local out="$cache/$name"
  if [[ ! -x $out || $here/llamacpp/$name.cc -nt $out ]]; then
    g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" -o "$out" "$here/llamacpp/$name.cc" \
      -L"$libdir" "${extra[@]}" -l:"$(basename "$libllama")" -l:"$(basename "$(ls "$libdir"/libggml.v*.so | head -1)")" \
      -l:libggml-base.so -Wl,-rpath,"$libdir" >&2
  fi
  echo "$out"
}
