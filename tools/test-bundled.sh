#!/usr/bin/env bash
# The self-contained build (LLM42_BUNDLED_DEPS): Abseil, Protobuf's runtime and utf8proc built
# from Debian's sources into a cache (tools/build-deps.sh; seconds once cached), libllm42 linked
# with them, and the tests about it: the library needs only the C and C++ runtimes, exports only
# the C ABI, works beside a host on Debian's shared Protobuf and Abseil that registers llm42's
# own receipt.proto in its Protobuf, and passes the C ABI test; the CUDA backend is the plug-in
# libllm42-cuda.so (where the toolkit is found), which the registry loads (backend_plugin_test with
# fake plug-ins; cuda_plugin_loads with the real one).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

source tools/bundled_common.sh
build=build-bundled
configure_bundled "$build"
cmake --build "$build" --target llm42 c_api_test host_coexistence_test backend_plugin_test llm42_cli
ctest --test-dir "$build" --output-on-failure --timeout 180 \
  -R '^(exported_symbols|needed_libraries|host_coexistence|c_api_test|BackendPlugin\..*|cuda_plugin_loads)$'
