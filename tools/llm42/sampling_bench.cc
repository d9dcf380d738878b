// `llm42 bench-sampling`: what a step's host-side draws cost, per draw and for a step of many
// rows drawn one after another or on a pool of host threads (as Engine::Step draws them), over
// random logits of a given vocabulary size; with --draw_backend, the same step's draws where the
// logits are (Backend::DrawRows, the same bits). No model: sampling depends only on the logits.
#include <chrono>
#include <memory>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "lib/backend/backend_registry.h"
#include "lib/sampling/sampler.h"
#include "lib/util/thread_pool.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"
#include "lib/util/status.h"

ABSL_FLAG(std::string, vocab_sizes, "32000,128256", "bench-sampling: comma-separated vocabulary sizes");
ABSL_FLAG(int32_t, rows, 256, "bench-sampling: rows of a step (decoding requests)");
ABSL_FLAG(std::string, draw_backend, "", "bench-sampling: also time a step's draws on this backend (DrawRows)");

namespace llm42::cli {
namespace {

struct Case {
  const char* name;
  float spread;  // standard deviation of the logits
  SamplingParams params;
};

// The best of three DrawRows calls over the rows (uploaded once), at the positions the host's
// last round drew at; fails if a drawn token differs from the host's in `tokens`.
absl::StatusOr<double> TimeDrawRows(Backend& backend, const std::vector<std::vector<float>>& logits,
                                    const SamplingParams& params, const std::vector<int32_t>& tokens) {
  const size_t vocab = logits[0].size();
  LLM42_ASSIGN_OR_RETURN(float* x, backend.Workspace(90, logits.size() * vocab));
  std::vector<RowDraw> draws(logits.size());
  for (size_t r = 0; r < logits.size(); ++r) {
    LLM42_RETURN_IF_ERROR(backend.CopyFromHost(x + r * vocab, logits[r].data(), vocab));
    draws[r].row = static_cast<int32_t>(r);
    draws[r].position = 2;  // the host's last round
    draws[r].params = params;
  }
  std::vector<DrawnRow> out(draws.size());
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    LLM42_RETURN_IF_ERROR(backend.DrawRows(x, static_cast<int64_t>(vocab), draws, out.data()));
    best = std::min(best, SecondsSince(t0));
  }
  for (size_t r = 0; r < draws.size(); ++r) {
    if (out[r].draw.token != tokens[r]) {
      return absl::InternalError(absl::StrCat("row ", r, ": drew ", out[r].draw.token, ", the host ", tokens[r]));
    }
  }
  return best;
}

}  // namespace

int BenchSampling() {
  const int rows = absl::GetFlag(FLAGS_rows);
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  if (rows < 1) {
    std::fprintf(stderr, "bench-sampling: --rows must be at least 1\n");
    return 2;
  }
  const Case cases[] = {
      {"T 0.8, N(0, 1) logits (flat)", 1.0f, SamplingParams{0.8f, 0, 1.0f, 0.0f, 1}},
      {"T 0.8, N(0, 3) logits", 3.0f, SamplingParams{0.8f, 0, 1.0f, 0.0f, 1}},
      {"T 0.8, top-k 40, top-p 0.95", 1.0f, SamplingParams{0.8f, 40, 0.95f, 0.0f, 1}},
      {"greedy", 1.0f, SamplingParams{}},
  };
  ThreadPool pool(threads);
  const std::string device = absl::GetFlag(FLAGS_draw_backend);
  std::unique_ptr<Backend> backend;
  if (!device.empty()) {
    absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(device, BackendOptions{threads});
    if (!b.ok()) {
      std::fprintf(stderr, "bench-sampling: backend %s: %s\n", device.c_str(), b.status().ToString().c_str());
      return 1;
    }
    backend = *std::move(b);
  }
  std::printf("| vocab | draw | ms per draw | %d rows, one thread (ms) | %d rows, %d threads (ms) |%s\n", rows, rows,
              threads, backend ? absl::StrCat(" ", rows, " rows, DrawRows on ", device, " (ms) |").c_str() : "");
  std::printf("|---|---|---|---|---|%s\n", backend ? "---|" : "");
  for (absl::string_view v : absl::StrSplit(absl::GetFlag(FLAGS_vocab_sizes), ',', absl::SkipEmpty())) {
    int vocab = 0;
    if (!absl::SimpleAtoi(v, &vocab) || vocab < 2) {
      std::fprintf(stderr, "bench-sampling: bad --vocab_sizes entry '%s'\n", std::string(v).c_str());
      return 2;
    }
    for (const Case& c : cases) {
      std::fprintf(stderr, "bench-sampling: vocab %d, %s\n", vocab, c.name);
      std::mt19937 gen(7);
      std::normal_distribution<float> normal(0.0f, c.spread);
      std::vector<std::vector<float>> logits(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(vocab)));
      for (auto& row : logits) {
        for (float& l : row) l = normal(gen);
      }
      std::vector<int32_t> tokens(static_cast<size_t>(rows));
      auto draw = [&](int64_t r, int64_t position) {
        tokens[static_cast<size_t>(r)] = SampleToken(logits[static_cast<size_t>(r)], c.params, position);
      };
      // One row again and again, then whole steps both ways (three of each, the best kept).
      const int singles = std::max(8, 2000000 / vocab);
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < singles; ++i) draw(i % rows, i);
      const double per_draw = SecondsSince(t0) / singles;
      double serial = 1e30, parallel = 1e30;
      for (int round = 0; round < 3; ++round) {
        t0 = std::chrono::steady_clock::now();
        for (int64_t r = 0; r < rows; ++r) draw(r, round);
        serial = std::min(serial, SecondsSince(t0));
        t0 = std::chrono::steady_clock::now();
        pool.ParallelFor(rows, 1, [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) draw(r, round);
        });
        parallel = std::min(parallel, SecondsSince(t0));
      }
      std::string on_device;
      if (backend != nullptr && !IsGreedy(c.params)) {
        absl::StatusOr<double> s = TimeDrawRows(*backend, logits, c.params, tokens);
        if (!s.ok()) {
          std::fprintf(stderr, "bench-sampling: DrawRows: %s\n", s.status().ToString().c_str());
          return 1;
        }
        on_device = absl::StrFormat(" %.2f |", *s * 1e3);
      } else if (backend != nullptr) {
        on_device = " (ArgmaxRows) |";
      }
      std::printf("| %d | %s | %.3f | %.1f | %.1f |%s\n", vocab, c.name, per_draw * 1e3, serial * 1e3, parallel * 1e3,
                  on_device.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace llm42::cli
