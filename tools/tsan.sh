#!/usr/bin/env bash
# Builds the concurrency tests with ThreadSanitizer (build-tsan/) and runs them: the engine
# thread against submitting, reading, cancelling and destroying threads (engine_test), the C ABI
# under 16 client threads (stress_test, c_api_test), continuous batching (batching_test) and a
# step's draws on host threads (EngineStep.DrawsOnHostThreads...) and the thread pool's hand-out
# of chunks (thread_pool_test), and the sampling rule run by threads sharing its histograms as a
# device block does (DrawRule.Selection..., sampling_test).
# Any report fails (halt_on_error). Debian's Abseil is not instrumented; lib/util/mutex.h tells
# TSan what absl::Mutex orders. Checked to fail: Session::Submit touching its queue outside the
# lock gave 50 reports in ConcurrentClientsWithRandomCancels.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/install-deps.sh
build=build-tsan
targets=(engine_test engine_step_test stress_test batching_test c_api_test thread_pool_test sampling_test)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLM42_SANITIZE=thread \
  -DLLM42_WERROR=ON -DLLM42_WITH_CUDA=OFF -DLLM42_BUILD_BINDINGS=OFF -DLLM42_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}"
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tools/tsan.supp}
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 180 \
  -R '^(EngineTest|Stress|StressDeathTest|Batching|ThreadPool)\.|^EngineStep\.DrawsOnHostThreads|^DrawRule\.Selection|^c_api_test$'
