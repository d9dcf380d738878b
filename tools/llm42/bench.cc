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
#include "lib/backend/backend_registry.h"
#include "lib/backend/cpu/bf16_gemm.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/engine/session.h"
#include "lib/model/model_weights.h"
#include "lib/numerics/philox.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/aligned_vector.h"
#include "lib/util/mutex.h"
#include "lib/util/platform.h"
#include "lib/util/thread_pool.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"
#include "tools/llm42/machine_limits.h"

ABSL_DECLARE_FLAG(std::string, json_schema);
ABSL_FLAG(std::string, concurrency, "1,4,8,16", "Comma-separated numbers of concurrent requests");
ABSL_FLAG(std::string, schedules, "fast,fixed", "Comma-separated schedules to compare");
ABSL_FLAG(int32_t, prompt_tokens, 128, "Prompt length of each request (random token ids)");
ABSL_FLAG(int32_t, output_tokens, 128, "Tokens each request generates");
ABSL_FLAG(int32_t, max_batch_tokens, 512, "Tokens per forward pass");
ABSL_FLAG(bool, bandwidth, true, "Measure memory read bandwidth and report the decode floor");
ABSL_FLAG(int32_t, pp, 0, "llama-bench's shape: prompt processing of N tokens (single stream), after --depth");
ABSL_FLAG(int32_t, tg, 0, "llama-bench's shape: generation of N tokens (single stream), after --depth");
ABSL_FLAG(std::string, batched, "",
          "llama-batched-bench's shape: NPP,NTG,NPL1,NPL2,... (NPL sequences of NPP prompt and NTG "
          "generated tokens each, at once), printed in its columns");
ABSL_FLAG(int32_t, depth, 0, "Context already in the cache before --pp / --tg (llama-bench's -d)");

ABSL_DECLARE_FLAG(std::string, model);

namespace llm42::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The model's GEMM work: every token runs the layers' matrices; a prompt computes logits for its
// last token only (the output matrix once per prompt, and once per generated token).
struct GemmWork {
  double layers = 0;  // FLOPs per token
  double output = 0;  // FLOPs per logits row
  double Prefill(double tokens) const { return tokens * layers + output; }
  double PerDecodedToken() const { return layers + output; }
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Token arrival times of one request, recorded from the engine's callback.
struct Trace {
  Mutex mu;
  std::vector<Clock::time_point> times;
};

void OnTokens(void* user, void*, const int32_t*, size_t n, const char*, size_t, int32_t) {
  auto* t = static_cast<Trace*>(user);
  const auto now = Clock::now();
  MutexLock lock(&t->mu);
  for (size_t i = 0; i < n; ++i) t->times.push_back(now);
}

struct Result {
  double output_tps, prefill_tps, ttft_p50, ttft_p99, itl_p50, itl_p99, decode_tps;
  double t_prefill, t_total;  // seconds: until every request's first token; the whole run
  int64_t preemptions;
  StepSplit step;  // per step of the timed run
};

Result RunOne(const std::string& model, bool fixed, int concurrency, int prompt_len, int out_len,
              int done_before, int total_requests) {
  SessionOptions o = BenchSessionOptions(model);
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_running_requests = std::max(16, concurrency);
  o.context_length = prompt_len + out_len + 1;
  // A KV cache of the run's size (llama-batched-bench's n_kv), resident from the start
  // (BenchSessionOptions): the kernel's zeroing of fresh pages (2-6 % of a 16 x (128 + 128) run's
  // samples where the warm-up below was to touch them, which it did not: it reuses its own freed
  // blocks) stays outside the timing.
  o.kv_cache_tokens = int64_t{concurrency} * o.context_length;
  o.determinism.mode = fixed ? DeterminismMode::kBatchInvariant : DeterminismMode::kSelective;
  auto session = Session::Create(o);
  if (!session.ok()) {
    std::cerr << "llm42 bench: " << session.status().message() << "\n";
    std::exit(1);
  }
  const int32_t vocab = (*session)->tokenizer().vocab().size();
  WarmUp(**session, prompt_len);
  {  // `concurrency` prompts of a whole context each, their tokens unlike the timed ones
    std::vector<std::shared_ptr<Request>> warm;
    for (int r = 0; r < concurrency; ++r) {
      RequestOptions ro;
      ro.has_prompt_tokens = true;
      for (int i = 0; i < prompt_len + out_len; ++i) {
        ro.prompt_tokens.push_back(RandomToken(vocab, uint64_t{1} << 32 | static_cast<uint64_t>(r), i));
      }
      ro.max_tokens = 1;
      auto req = (*session)->Submit(ro, nullptr);
      if (!req.ok()) {
        std::cerr << "llm42 bench: warm-up: " << req.status().message() << "\n";
        std::exit(1);
      }
      warm.push_back(*req);
    }
    for (auto& r : warm) r->Wait(-1);
  }
  std::vector<std::unique_ptr<Trace>> traces;
  std::vector<std::shared_ptr<Request>> requests;
  const EngineStats::StepTimes times_before = (*session)->step_times();
  const auto start = Clock::now();
  for (int r = 0; r < concurrency; ++r) {
    RequestOptions ro;
    ro.has_prompt_tokens = true;
    ro.prompt_tokens.push_back((*session)->tokenizer().vocab().bos() >= 0 ? (*session)->tokenizer().vocab().bos() : 0);
    for (int i = 1; i < prompt_len; ++i) {
      ro.prompt_tokens.push_back(RandomToken(vocab, static_cast<uint64_t>(r), i));
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
  // Progress (on a terminal only): one bar over every run of the sweep.
  const bool terminal = platform::StderrIsTerminal();
  const int64_t goal = int64_t{total_requests} * out_len;
  for (;;) {
    bool all = true;
    for (auto& r : requests) all = all && r->Wait(100);
    int64_t tokens = int64_t{done_before} * out_len;
    for (auto& r : requests) tokens += r->stat(Stat::kTokensGenerated);
    const int width = 40, filled = static_cast<int>(width * tokens / std::max<int64_t>(1, goal));
    if (terminal) std::fprintf(stderr, "\r[%s%s] %3d%% %s c=%d", std::string(static_cast<size_t>(filled), '#').c_str(),
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
    MutexLock lock(&t->mu);
    if (t->times.empty()) continue;
    ttft.push_back(Seconds(start, t->times.front()) * 1000);
    last_first = std::max(last_first, t->times.front());
    for (size_t i = 1; i < t->times.size(); ++i) itl.push_back(Seconds(t->times[i - 1], t->times[i]) * 1000);
    if (t->times.size() > 1) {
      decode_tps += static_cast<double>(t->times.size() - 1) / Seconds(t->times.front(), t->times.back());
    }
  }
  Result res;
  res.t_prefill = Seconds(start, last_first);
  res.t_total = Seconds(start, end);
  res.output_tps = static_cast<double>(concurrency) * out_len / Seconds(start, end);
  res.prefill_tps = static_cast<double>(concurrency) * prompt_len / Seconds(start, last_first);
  res.ttft_p50 = Percentile(ttft, 0.5);
  res.ttft_p99 = Percentile(ttft, 0.99);
  res.itl_p50 = Percentile(itl, 0.5);
  res.itl_p99 = Percentile(itl, 0.99);
  res.decode_tps = decode_tps / static_cast<double>(traces.size());
  res.preemptions = (*session)->stat(Stat::kPreemptions);
  res.step = StepSplitBetween(times_before, (*session)->step_times());
  return res;
}

// Token arrival times of one single-stream request of `prompt_len` random tokens generating
// `out_len`, from submission. The tokens depend on their position and `seed` only, so prompts of
// one seed share their prefixes.
std::vector<double> StreamTimes(Session& s, int prompt_len, int out_len, uint64_t seed = 7) {
  const int32_t vocab = s.tokenizer().vocab().size();
  RequestOptions ro;
  ro.has_prompt_tokens = true;
  ro.prompt_tokens.push_back(std::max(0, s.tokenizer().vocab().bos()));
  for (int i = 1; i < prompt_len; ++i) {
    ro.prompt_tokens.push_back(RandomToken(vocab, seed, i));
  }
  ro.max_tokens = out_len;
  ro.ignore_eos = true;
  Trace trace;
  ro.callback = OnTokens;
  ro.callback_user_data = &trace;
  const auto start = Clock::now();
  auto req = s.Submit(ro, nullptr);
  if (!req.ok()) {
    std::cerr << "llm42 bench: " << req.status().message() << "\n";
    std::exit(1);
  }
  (*req)->Wait(-1);
  MutexLock lock(&trace.mu);
  std::vector<double> out;
  for (auto t : trace.times) out.push_back(Seconds(start, t));
  return out;
}

// What a schedule's GEMMs of `rows` rows are measured against: the FMA peak of the widest vector
// unit, and for fast prompts of bf16 weights where the CPU has AVX-512 BF16 (bf16_gemm.h, from
// kBf16GemmMinRows rows) the peak of its bf16 dot products, which compute twice the FMA's
// multiply-adds per instruction.
struct Peaks {
  double fma = 0, bf16_dot = 0;
  bool Dot(bool fixed, int64_t rows) const { return !fixed && bf16_dot > 0 && rows >= internal::kBf16GemmMinRows; }
  double For(bool fixed, int64_t rows) const { return Dot(fixed, rows) ? bf16_dot : fma; }
  const char* Name(bool fixed, int64_t rows) const { return Dot(fixed, rows) ? "bf16 dot-product peak" : "FMA peak"; }
  // flops_per_s as a percentage of that peak (0 where it was not measured).
  double Percent(double flops_per_s, bool fixed, int64_t rows) const {
    const double peak = For(fixed, rows);
    return peak > 0 ? 100 * flops_per_s / peak : 0.0;
  }
};

void PrintBf16DotPeak(const Peaks& peaks) {
  if (peaks.bf16_dot > 0) {
    std::cout << absl::StrFormat("bf16 dot-product peak %.0f GFLOP/s (fast bf16 prompts are measured against it)\n",
                                 peaks.bf16_dot / 1e9);
  }
}

// The matrices alone, as MatMul runs them for `rows` tokens (random activations, the model's
// weights, this many threads), per schedule, without attention, norms and the rest of a forward
// pass: for a prompt (one layer's matrices) the GEMM kernels' speed against the FMA peak; for one
// row (decode; every matrix of the model, so the weights stream from memory as in a decode step)
// the weight bytes they read per second against the read bandwidth; for a batched decode step
// (every matrix, B rows) both.
void BenchGemms(const std::vector<WeightMatrix>& matrices, bool every, int rows, const std::vector<bool>& schedules,
                int threads, const Peaks& peaks, double bandwidth) {
  CpuBackend be(threads);
  int64_t widest = 0, longest = 0;
  for (const WeightMatrix& w : matrices) {
    widest = std::max(widest, w.cols);
    longest = std::max(longest, w.rows);
  }
  AlignedVector<float> x(static_cast<size_t>(rows * widest)), y(static_cast<size_t>(rows * longest));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(PhiloxUniform(1, i) - 0.5);
  for (bool fixed : schedules) {
    double flops = 0, bytes = 0, seconds = 1e30;
    for (const WeightMatrix& w : matrices) {
      flops += 2.0 * static_cast<double>(rows) * static_cast<double>(w.rows) * static_cast<double>(w.cols);
      bytes += static_cast<double>(w.rows) * static_cast<double>(w.row_bytes);
    }
    for (int pass = 0; pass < 4; ++pass) {  // the best of four passes over all the matrices
      const auto t0 = Clock::now();
      for (const WeightMatrix& w : matrices) {
        if (!be.MatMul(x.data(), rows, w, y.data(), fixed ? Schedule::kFixed : Schedule::kFast).ok()) return;
      }
      seconds = std::min(seconds, Seconds(t0, Clock::now()));
    }
    if (rows == 1) {
      std::cout << absl::StrFormat("%s GEMVs alone (every matrix, 1 row): %.1f GB/s of weights, %.2f of the "
                                   "read bandwidth\n",
                                   fixed ? "fixed" : "fast ", bytes / seconds / 1e9,
                                   bandwidth > 0 ? bytes / seconds / bandwidth : 0.0);
    } else {
      std::cout << absl::StrFormat("%s GEMMs alone (%s, %d rows): %.1f GFLOP/s, %.1f %% of the %s",
                                   fixed ? "fixed" : "fast ", every ? "every matrix" : "one layer's matrices", rows,
                                   flops / seconds / 1e9, peaks.Percent(flops / seconds, fixed, rows),
                                   peaks.Name(fixed, rows));
      if (every) {
        std::cout << absl::StrFormat("; %.1f GB/s of weights, %.2f of the read bandwidth", bytes / seconds / 1e9,
                                     bandwidth > 0 ? bytes / seconds / bandwidth : 0.0);
      }
      std::cout << "\n";
    }
  }
}

// llama-bench's pp N and tg N at depth D, single stream, per schedule: pp from the time to the
// first token of D + N tokens whose first D are in the prefix cache (a D-token prompt of the
// same tokens ran just before; each run's tokens are new, so only those D are found), as
// llama-bench keeps the depth's KV and times the N alone; tg from the spacing of N generated
// tokens after a D-token prompt. The best of two runs.
int BenchPpTg(const std::string& model, const std::vector<bool>& schedules, const GemmWork& gemm, const Peaks& peaks,
              double bandwidth, int64_t weight_bytes, int threads) {
  const int pp = absl::GetFlag(FLAGS_pp), tg = absl::GetFlag(FLAGS_tg), depth = absl::GetFlag(FLAGS_depth);
  std::vector<std::string> rows;
  for (bool fixed : schedules) {
    const std::string sched = fixed ? "fixed" : "fast";
    SessionOptions o = BenchSessionOptions(model);
    o.threads = threads;
    o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
    o.context_length = depth + std::max(pp, tg) + 2;
    o.prefix_caching = depth > 0;  // keeps the depth's KV for pp (see above)
    // A KV cache of one context, resident from the start (BenchSessionOptions: fresh pages' first
    // touch was 8 % of a pp512 run at depth 1024 in a VM).
    o.kv_cache_tokens = o.context_length;
    o.determinism.mode = fixed ? DeterminismMode::kBatchInvariant : DeterminismMode::kSelective;
    auto session = Session::Create(o);
    if (!session.ok()) {
      std::cerr << "llm42 bench: " << session.status().message() << "\n";
      return 1;
    }
    WarmUp(**session, 64);
    if (pp > 0) {
      double best = 1e30;
      for (int rep = 0; rep < 2; ++rep) {
        const uint64_t seed = 100 + static_cast<uint64_t>(rep);
        if (depth > 0) StreamTimes(**session, depth, 1, seed);
        best = std::min(best, StreamTimes(**session, depth + pp, 1, seed).front());
      }
      const double tps = pp / best, flops = gemm.Prefill(pp) / best;
      // A prompt runs in passes of up to --max_batch_tokens rows.
      const int64_t pass = std::min(pp, absl::GetFlag(FLAGS_max_batch_tokens));
      rows.push_back(absl::StrFormat("| %-5s | pp%d @ d%d | %9.1f | GEMM work at %.1f GFLOP/s, %.1f %% of the %s |",
                                     sched, pp, depth, tps, flops / 1e9, peaks.Percent(flops, fixed, pass),
                                     peaks.Name(fixed, pass)));
    }
    if (tg > 0) {
      double best = 0;
      for (int rep = 0; rep < 2; ++rep) {
        const std::vector<double> t = StreamTimes(**session, std::max(1, depth), tg + 1);
        if (t.size() > 1) best = std::max(best, static_cast<double>(t.size() - 1) / (t.back() - t.front()));
      }
      // Bytes read per generated token: the weights, and the K/V of the context (about depth + tg/2).
      const double bytes = static_cast<double>(weight_bytes) +
                           static_cast<double>((*session)->kv_bytes_per_token()) * (depth + tg / 2.0);
      const std::string floor =
          bandwidth > 0 ? absl::StrFormat("%.2f of the bandwidth floor (%.1f tok/s)", best * bytes / bandwidth,
                                          bandwidth / bytes)
                        : std::string("bandwidth not measured (--bandwidth)");
      rows.push_back(absl::StrFormat("| %-5s | tg%d @ d%d | %9.2f | %s |", sched, tg, depth, best, floor));
    }
  }
  std::cout << "\n| sched | test | t/s | against this machine |\n|---|---|---|---|\n";
  for (const std::string& r : rows) std::cout << r << "\n";
  return 0;
}

// The comma-separated positive integers of --`flag`, or false (having said why).
bool ParsePositiveInts(const char* flag, const std::string& text, std::vector<int>* out) {
  for (absl::string_view c : absl::StrSplit(text, ',')) {
    int v;
    if (!absl::SimpleAtoi(c, &v) || v < 1) {
      std::cerr << "llm42 bench: bad --" << flag << " entry '" << c << "'\n";
      return false;
    }
    out->push_back(v);
  }
  return true;
}

}  // namespace

int Bench() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "llm42: --model PATH is required\n";
    return 2;
  }
  if (!absl::GetFlag(FLAGS_json_schema).empty()) return BenchJsonSchema();
  std::vector<int> levels;
  if (!ParsePositiveInts("concurrency", absl::GetFlag(FLAGS_concurrency), &levels)) return 2;
  std::vector<bool> schedules;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_schedules), ',')) {
    if (s != "fast" && s != "fixed") {
      std::cerr << "llm42 bench: schedules are fast and fixed\n";
      return 2;
    }
    schedules.push_back(s == "fixed");
  }
  int prompt_len = absl::GetFlag(FLAGS_prompt_tokens), out_len = absl::GetFlag(FLAGS_output_tokens);
  const bool batched = !absl::GetFlag(FLAGS_batched).empty();
  if (batched) {
    std::vector<int> v;
    if (!ParsePositiveInts("batched", absl::GetFlag(FLAGS_batched), &v)) return 2;
    if (v.size() < 3) {
      std::cerr << "llm42 bench: --batched takes NPP,NTG,NPL[,NPL...]\n";
      return 2;
    }
    prompt_len = v[0];
    out_len = v[1];
    levels.assign(v.begin() + 2, v.end());
  }
  int total = 0;
  for (int c : levels) total += c * static_cast<int>(schedules.size());

  int64_t weight_bytes = 0;
  GemmWork gemm;  // attention excluded
  std::vector<WeightMatrix> layer0, all;  // one layer's matrices; every matrix, output last
  std::unique_ptr<ModelWeights> loaded;
  {
    auto file = GgufFile::Open(model);
    if (!file.ok()) {
      std::cerr << "llm42 bench: " << file.status().message() << "\n";
      return 1;
    }
    auto m = ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file).value()));
    if (!m.ok()) {
      std::cerr << "llm42 bench: " << m.status().message() << "\n";
      return 1;
    }
    weight_bytes = (*m)->weight_bytes();
    const auto elements = [](const WeightMatrix& w) { return static_cast<double>(w.rows) * static_cast<double>(w.cols); };
    gemm.output = 2 * elements((*m)->output());  // a multiply and an add per weight and token
    for (const ModelWeights::Layer& L : (*m)->layers()) {
      for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
        gemm.layers += 2 * elements(*w);
        if (&L == &(*m)->layers().front()) layer0.push_back(*w);
        all.push_back(*w);
      }
    }
    all.push_back((*m)->output());
    loaded = std::move(m).value();
  }
  const int threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads)
                                                       : static_cast<int>(std::thread::hardware_concurrency());
  // This machine's FMA peak and read bandwidth are the references of the CPU backend only; on
  // a GPU they would compare device throughput with host limits (measured there: 3800 % "of the
  // FMA peak"), so they are left out (0) where the backend that runs is not the CPU.
  const auto resolved = ResolveBackend(absl::GetFlag(FLAGS_backend));
  const bool on_cpu = resolved.ok() && std::string_view((*resolved)->name) == "cpu";
  double bandwidth = 0;
  if (absl::GetFlag(FLAGS_bandwidth) && on_cpu) bandwidth = MeasureReadBandwidth(threads);
  const double peak256 = on_cpu ? MeasureFmaPeak(threads, 256) : 0, peak512 = on_cpu ? MeasureFmaPeak(threads, 512) : 0;
  Peaks peaks;
  peaks.fma = std::max(peak256, peak512);
  if (on_cpu && all.front().type == GgmlType::kBF16 && internal::Bf16GemmAvailable()) {
    peaks.bf16_dot = MeasureBf16DotPeak(threads);
  }
  if (absl::GetFlag(FLAGS_pp) > 0 || absl::GetFlag(FLAGS_tg) > 0) {
    std::cout << absl::StrFormat("model %s: %.1f MB of weights per token, %.2f GFLOP of GEMMs per token; %d threads; "
                                 "FMA peak %.0f GFLOP/s (256-bit) / %.0f (512-bit); read bandwidth %.2f GB/s\n",
                                 model, weight_bytes / 1e6, gemm.PerDecodedToken() / 1e9, threads, peak256 / 1e9,
                                 peak512 / 1e9, bandwidth / 1e9);
    PrintBf16DotPeak(peaks);
    if (on_cpu && absl::GetFlag(FLAGS_pp) > 0) {
      BenchGemms(layer0, false, absl::GetFlag(FLAGS_pp), schedules, threads, peaks, bandwidth);
    }
    if (on_cpu && absl::GetFlag(FLAGS_tg) > 0) BenchGemms(all, true, 1, schedules, threads, peaks, bandwidth);
    return BenchPpTg(model, schedules, gemm, peaks, bandwidth, weight_bytes, threads);
  }

  std::vector<std::string> rows;
  int done = 0;
  for (int c : levels) {
    for (bool fixed : schedules) {
      const Result r = RunOne(model, fixed, c, prompt_len, out_len, done, total);
      done += c;
      if (batched) {
        // llama-batched-bench's columns; S_TG counts the tokens generated after every prompt
        // was in.
        const double t_tg = r.t_total - r.t_prefill;
        rows.push_back(absl::StrFormat("| %-5s | %5d | %5d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |",
                                       fixed ? "fixed" : "fast", prompt_len, out_len, c, c * (prompt_len + out_len),
                                       r.t_prefill, c * prompt_len / r.t_prefill, t_tg,
                                       c * (out_len - 1) / t_tg, r.t_total, c * (prompt_len + out_len) / r.t_total));
        continue;
      }
      const double prefill_flops = r.prefill_tps * gemm.Prefill(prompt_len) / prompt_len;  // per second
      rows.push_back(absl::StrFormat(
          "| %-5s | %4d | %9.1f | %8.1f | %6.1f | %5.1f %% | %9.1f | %8.1f | %8.2f | %8.2f | %8.1f | %d | %.2f / %.2f / %.2f |",
          fixed ? "fixed" : "fast", c, r.output_tps, r.prefill_tps, prefill_flops / 1e9,
          peaks.Percent(prefill_flops, fixed, prompt_len), r.ttft_p50, r.ttft_p99, r.itl_p50, r.itl_p99,
          r.decode_tps, r.preemptions, r.step.forward_ms, r.step.logits_ms, r.step.host_ms));
    }
  }
  if (platform::StderrIsTerminal()) std::fprintf(stderr, "\n");
  std::cout << absl::StrFormat("model %s: %.1f MB of weights streamed per decode step; %d threads; "
                               "prompt %d, output %d tokens per request\n",
                               model, weight_bytes / 1e6, threads, prompt_len, out_len);
  if (bandwidth > 0) {
    std::cout << absl::StrFormat("memory read bandwidth %.2f GB/s -> single-stream decode floor %.1f tokens/s\n",
                                 bandwidth / 1e9, bandwidth / static_cast<double>(weight_bytes));
  }
  std::cout << absl::StrFormat("FMA peak on %d threads: %.0f GFLOP/s with 256-bit vectors, %.0f with 512-bit "
                               "(0: not available); GEMM work %.2f GFLOP per prompt token, %.2f per generated token\n",
                               threads, peak256 / 1e9, peak512 / 1e9, gemm.layers / 1e9, gemm.PerDecodedToken() / 1e9);
  PrintBf16DotPeak(peaks);
  if (batched && on_cpu) {
    // A decode step of B sequences without attention and the rest: every matrix with B rows,
    // the weights streaming from memory as in the step.
    for (int c : levels) {
      if (c > 1) BenchGemms(all, true, c, schedules, threads, peaks, bandwidth);
    }
  }
  if (batched) {
    std::cout << "\n| sched | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const std::string& r : rows) std::cout << r << "\n";
    return 0;
  }
  std::cout << "\n| sched | reqs | output tok/s | prefill tok/s | prefill GEMM GFLOP/s | of FMA peak | TTFT p50 ms | "
               "TTFT p99 ms | ITL p50 ms | ITL p99 ms | per-stream tok/s | preemptions | "
               "ms per step: forward / logits copy / host |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& r : rows) std::cout << r << "\n";
  return 0;
}

}  // namespace llm42::cli
