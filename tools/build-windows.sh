#!/usr/bin/env bash
# Windows x64, cross-built here with Debian's MinGW-w64 (posix threads) and tested under
# Debian's Wine. Writes build-windows/: llm42.dll (its C and C++ runtimes linked in), its import
# libraries (libllm42.dll.a for MinGW, llm42.lib for MSVC), llm42.exe, the test executables, and
# the Java and C# bindings' native libraries (bindings/lib/llm42_jni.dll, llm42_csharp.dll).
#
#   tools/build-windows.sh            build
#   tools/build-windows.sh test       build, then run the Windows tests under Wine
#
# The dependencies (Abseil, Protobuf's runtime, utf8proc, GoogleTest, nlohmann-json) come from
# Debian's sources, cross-built once into a cache by tools/build-deps.sh windows-x86_64.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/install-deps.sh
prefix=$(bash tools/build-deps.sh windows-x86_64)
build=build-windows
linux_cli=()
if [[ ${1:-} == test ]]; then
  # The Linux CLI of the self-contained build, for the cross-OS receipt test.
  source tools/bundled_common.sh
  configure_bundled build-bundled
  cmake --build build-bundled --target llm42_cli
  linux_cli=(-DLLM42_LINUX_CLI="$root/build-bundled/tools/llm42")
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/mingw-w64-x86_64.cmake" \
  -DLLM42_BUNDLED_DEPS=ON -DLLM42_DEPS_PREFIX="$prefix" -DLLM42_WERROR=ON \
  -DLLM42_BUILD_BINDINGS=ON -DLLM42_BUILD_SAMPLES=OFF "${linux_cli[@]}" >/dev/null
cmake --build "$build"
if [[ ${1:-} == test ]]; then
  # Wine's prefix lives in the cache. Its server and services start once here, detached from
  # ctest's output (a service holding ctest's pipe would keep each test waiting until its
  # timeout), and stay up for the run, so a test's start costs milliseconds instead of seconds.
  export WINEPREFIX=${WINEPREFIX:-$HOME/.cache/llm42/wine}
  /usr/lib/wine/wineserver -p >/dev/null 2>&1 || true  # 2: already running
  trap '/usr/lib/wine/wineserver -k >/dev/null 2>&1 || true' EXIT
  WINEDEBUG=-all /usr/lib/wine/wine64 wineboot -u >/dev/null 2>&1
  ctest --test-dir "$build" --output-on-failure --timeout 540 -j2
fi
