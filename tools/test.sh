#!/usr/bin/env bash
# Installs what is missing, builds everything with AddressSanitizer and UBSan (set
# LLM42_SANITIZE= to build without), and runs the whole test suite. BLIS is required here (not
# merely used where found), so that its tests run rather than skip.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash tools/install-deps.sh
sanitize=${LLM42_SANITIZE-address,undefined}
build=build-test
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLLM42_SANITIZE="$sanitize" -DLLM42_WERROR=ON -DLLM42_WITH_BLIS=ON >/dev/null
cmake --build "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 180
