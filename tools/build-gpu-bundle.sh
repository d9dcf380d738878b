#!/usr/bin/env bash
# Builds what the GPU machine runs (tests/gpu/run_device_checks.sh): build-gpu/ (Release, the
# CUDA backend, tests and CLI; no sanitizers), gpu-libs/, the shared libraries that machine
# lacks (Abseil's, utf8proc's and BLIS's, from this machine's Debian packages; libcrypto too, in
# case),
# and gpu-shared/, the few files of ../shared the GPU tests read (../shared does not travel).
# All three are git-ignored; name them in the device tool's carry.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/install-deps.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLM42_WITH_CUDA=ON \
  -DLLM42_BUILD_BINDINGS=OFF -DLLM42_BUILD_SAMPLES=OFF -DLLM42_SANITIZE= >/dev/null
cmake --build build-gpu --target llm42_cli backend_ops_test gpu_end_to_end_test determinism_test
rm -rf gpu-libs
mkdir -p gpu-libs
for bin in build-gpu/tools/llm42 build-gpu/tests/backend_ops_test build-gpu/tests/gpu_end_to_end_test \
  build-gpu/tests/determinism_test; do
  ldd "$bin" | awk '/libabsl|libutf8proc|libcrypto|libblis/ { print $3 }'
done | sort -u | xargs -r cp -L -t gpu-libs/
rm -rf gpu-shared
mkdir -p gpu-shared/models gpu-shared/reference gpu-shared/vocab
cp ../shared/models/stories260K.gguf gpu-shared/models/
cp ../shared/reference/stories260K_llamacpp.json gpu-shared/reference/
cp ../shared/vocab/ggml-vocab-llama-spm.gguf ../shared/vocab/ggml-vocab-llama-bpe.gguf gpu-shared/vocab/
du -sh build-gpu/tools/llm42 build-gpu/tests/*_test gpu-libs gpu-shared
