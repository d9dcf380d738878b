# Sourced by the scripts that build the self-contained libllm42 (tools/test-bundled.sh,
# tools/package.sh): installs what is missing, builds (or finds cached) the bundled dependencies,
# and defines configure_bundled BUILD_DIR [CMAKE_ARGS...], which configures BUILD_DIR to link
# them (LLM42_BUNDLED_DEPS), with the CUDA backend as the plug-in libllm42-cuda.so where the CUDA
# toolkit is found (LLM42_CUDA_PLUGIN).
bash tools/install-deps.sh
llm42_deps_prefix=$(bash tools/build-deps.sh)
configure_bundled() {
  local build=$1
  shift
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLM42_BUNDLED_DEPS=ON \
    -DLLM42_DEPS_PREFIX="$llm42_deps_prefix" -DLLM42_CUDA_PLUGIN=ON -DLLM42_WERROR=ON "$@" >/dev/null
}
