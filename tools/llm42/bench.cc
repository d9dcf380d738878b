// `llm42 bench`: concurrent requests through the engine, reported side by side per schedule
// and concurrency level.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "lib/engine/session.h"
#include "lib/model/llama_model.h"
#include "lib/sampling/philox.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/thread_pool.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"

ABSL_FLAG(std::string, concurrency, "1,4,8,16", "Comma-separated numbers of concurrent requests");
ABSL_FLAG(std::string, schedules, "fast,fixed", "Comma-separated schedules to compare");
ABSL_FLAG(int32_t, prompt_tokens, 128, "Prompt length of each request (random token ids)");
ABSL_FLAG(int32_t, output_tokens, 128, "Tokens each request generates");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward pass");
ABSL_FLAG(bool, bandwidth, true, "Measure memory read bandwidth and report the decode floor");

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(std::string, backend);

namespace llm42::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Token arrival times of one request, recorded from the engine's callback.
struct Trace {
  absl::Mutex mu;
  std::vector<Clock::time_point> times;
};

void OnTokens(void* user, void*, const int32_t*, size_t n, const char*, size_t, int32_t) {
  auto* t = static_cast<Trace*>(user);
  const auto now = Clock::now();
  absl::MutexLock lock(&t->mu);
  for (size_t i = 0; i < n; ++i) t->times.push_back(now);
}

// Best of a few passes of a multi-threaded streaming read over 1 GiB.
double MeasureReadBandwidth(int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> buf(n, 1.0f);
  ThreadPool pool(threads);
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    std::vector<float> sums(static_cast<size_t>(threads), 0);
    const auto t0 = Clock::now();
    pool.RunOnAll([&](int t) {
      const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
      const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
      float acc[16] = {};
      for (size_t i = begin; i + 16 <= end; i += 16) {
        for (int l = 0; l < 16; ++l) acc[l] += buf[i + static_cast<size_t>(l)];
      }
      for (float a : acc) sums[static_cast<size_t>(t)] += a;
    });
    const double s = Seconds(t0, Clock::now());
    if (sums[0] < 0) std::cerr << "";  // keep the reads
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s);
  }
  return best;
}

struct Result {
  double output_tps, prefill_tps, ttft_p50, ttft_p99, itl_p50, itl_p99, decode_tps;
  int64_t preemptions;
};

Result RunOne(const std::string& model, bool fixed, int concurrency, int prompt_len, int out_len,
              int done_before, int total_requests) {
  SessionOptions o;
  o.model_path = model;
  o.threads = absl::GetFlag(FLAGS_threads);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_running_requests = std::max(16, concurrency);
  o.context_length = prompt_len + out_len + 1;
  o.determinism.mode = fixed ? DeterminismMode::kBatchInvariant : DeterminismMode::kSelective;
  auto session = Session::Create(o);
  if (!session.ok()) {
    std::cerr << "llm42 bench: " << session.status().message() << "\n";
    std::exit(1);
  }
  const int32_t vocab = (*session)->tokenizer().vocab().size();
  WarmUp(**session, prompt_len);
  std::vector<std::unique_ptr<Trace>> traces;
  std::vector<std::shared_ptr<Request>> requests;
  const auto start = Clock::now();
  for (int r = 0; r < concurrency; ++r) {
    RequestOptions ro;
    ro.has_prompt_tokens = true;
    ro.prompt_tokens.push_back((*session)->tokenizer().vocab().bos() >= 0 ? (*session)->tokenizer().vocab().bos() : 0);
    for (int i = 1; i < prompt_len; ++i) {
      const double u = PhiloxUniform(static_cast<uint64_t>(r), static_cast<uint64_t>(i));
      ro.prompt_tokens.push_back(3 + static_cast<int32_t>(u * (vocab - 3)));
    }
    ro.max_tokens = out_len;
    ro.ignore_eos = true;
    traces.push_back(std::make_unique<Trace>());
    ro.callback = OnTokens;
    ro.callback_user_data = traces.back().get();
    auto req = (*session)->Submit(ro, nullptr);
    if (!req.ok()) {
      std::cerr << "llm42 bench: " << req.status().message() << "\n";
      std::exit(1);
    }
    requests.push_back(*req);
  }
  // Progress: one bar over every run of the sweep.
  const int64_t goal = int64_t{total_requests} * out_len;
  for (;;) {
    bool all = true;
    for (auto& r : requests) all = all && r->Wait(100);
    int64_t tokens = int64_t{done_before} * out_len;
    for (auto& r : requests) tokens += r->stat(RequestStat::kTokensGenerated);
    const int width = 40, filled = static_cast<int>(width * tokens / std::max<int64_t>(1, goal));
    std::fprintf(stderr, "\r[%s%s] %3d%% %s c=%d", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(),
                 static_cast<int>(100 * tokens / std::max<int64_t>(1, goal)), fixed ? "fixed" : "fast ",
                 concurrency);
    if (all) break;
  }
  const auto end = Clock::now();
  std::vector<double> ttft, itl;
  Clock::time_point last_first = start;
  double decode_tps = 0;
  for (auto& t : traces) {
    absl::MutexLock lock(&t->mu);
    if (t->times.empty()) continue;
    ttft.push_back(Seconds(start, t->times.front()) * 1000);
    last_first = std::max(last_first, t->times.front());
    for (size_t i = 1; i < t->times.size(); ++i) itl.push_back(Seconds(t->times[i - 1], t->times[i]) * 1000);
    if (t->times.size() > 1) {
      decode_tps += static_cast<double>(t->times.size() - 1) / Seconds(t->times.front(), t->times.back());
    }
  }
  Result res;
  res.output_tps = static_cast<double>(concurrency) * out_len / Seconds(start, end);
  res.prefill_tps = static_cast<double>(concurrency) * prompt_len / Seconds(start, last_first);
  res.ttft_p50 = Percentile(ttft, 0.5);
  res.ttft_p99 = Percentile(ttft, 0.99);
  res.itl_p50 = Percentile(itl, 0.5);
  res.itl_p99 = Percentile(itl, 0.99);
  res.decode_tps = decode_tps / static_cast<double>(traces.size());
  res.preemptions = (*session)->stat(SessionStat::kPreemptions);
  return res;
}

}  // namespace

int Bench() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "llm42: --model PATH is required\n";
    return 2;
  }
  std::vector<int> levels;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_concurrency), ',')) {
    int v;
    if (!absl::SimpleAtoi(c, &v) || v < 1) {
      std::cerr << "llm42 bench: bad --concurrency entry '" << c << "'\n";
      return 2;
    }
    levels.push_back(v);
  }
  std::vector<bool> schedules;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_schedules), ',')) {
    if (s != "fast" && s != "fixed") {
      std::cerr << "llm42 bench: schedules are fast and fixed\n";
      return 2;
    }
    schedules.push_back(s == "fixed");
  }
  const int prompt_len = absl::GetFlag(FLAGS_prompt_tokens), out_len = absl::GetFlag(FLAGS_output_tokens);
  int total = 0;
  for (int c : levels) total += c * static_cast<int>(schedules.size());

  int64_t weight_bytes = 0;
  {
    auto file = GgufFile::Open(model);
    if (!file.ok()) {
      std::cerr << "llm42 bench: " << file.status().message() << "\n";
      return 1;
    }
    auto m = LlamaModel::Load(std::shared_ptr<const GgufFile>(std::move(file).value()));
    if (!m.ok()) {
      std::cerr << "llm42 bench: " << m.status().message() << "\n";
      return 1;
    }
    weight_bytes = (*m)->weight_bytes();
  }
  const int threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads)
                                                       : static_cast<int>(std::thread::hardware_concurrency());
  double bandwidth = 0;
  if (absl::GetFlag(FLAGS_bandwidth)) bandwidth = MeasureReadBandwidth(threads);

  std::vector<std::string> rows;
  int done = 0;
  for (int c : levels) {
    for (bool fixed : schedules) {
      const Result r = RunOne(model, fixed, c, prompt_len, out_len, done, total);
      done += c;
      rows.push_back(absl::StrFormat(
          "| %-5s | %4d | %9.1f | %8.1f | %9.1f | %8.1f | %8.2f | %8.2f | %8.1f | %d |",
          fixed ? "fixed" : "fast", c, r.output_tps, r.prefill_tps, r.ttft_p50, r.ttft_p99,
          r.itl_p50, r.itl_p99, r.decode_tps, r.preemptions));
    }
  }
  std::fprintf(stderr, "\n");
  std::cout << absl::StrFormat("model %s: %.1f MB of weights streamed per decode step; %d threads; "
                               "prompt %d, output %d tokens per request\n",
                               model, weight_bytes / 1e6, threads, prompt_len, out_len);
  if (bandwidth > 0) {
    std::cout << absl::StrFormat("memory read bandwidth %.2f GB/s -> single-stream decode floor %.1f tokens/s\n",
                                 bandwidth / 1e9, bandwidth / static_cast<double>(weight_bytes));
  }
  std::cout << "\n| sched | reqs | output tok/s | prefill tok/s | TTFT p50 ms | TTFT p99 ms | "
               "ITL p50 ms | ITL p99 ms | per-stream tok/s | preemptions |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& r : rows) std::cout << r << "\n";
  return 0;
}

}  // namespace llm42::cli
