// `llm42 bench-dvr`: the LLM-42 paper's experiment on our engine (docs/benchmarks.md). A seeded
// workload arrives as a Poisson process; it runs in mode off, batch_invariant, and selective
// with a given share of deterministic requests; then the window x group sweep at 100 %.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numbers>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "lib/engine/session.h"
#include "lib/numerics/philox.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/platform.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"

ABSL_FLAG(std::string, workload, "sharegpt",
          "sharegpt (lognormal lengths like ShareGPT's, scaled by --scale) or fixed (--prompt_tokens "
          "/ --output_tokens)");
ABSL_FLAG(double, scale, 0.25, "sharegpt: length scale (1 = ShareGPT's means, ~230 in / ~240 out)");
ABSL_FLAG(int32_t, requests, 24, "Requests in the workload");
ABSL_FLAG(double, rate, 4.0, "Poisson arrival rate, requests per second (0: offline, every request at once)");
ABSL_FLAG(std::string, fractions, "0.02,0.1,0.2,0.5,1", "Deterministic shares for mode selective");
ABSL_FLAG(std::string, windows, "16,32,64,128", "Window sizes of the sweep (empty: no sweep)");
ABSL_FLAG(std::string, groups, "1,4,16", "Verify group sizes of the sweep");
ABSL_FLAG(std::string, csv, "", "Also write the rows as CSV to this file (for plotting)");
ABSL_FLAG(std::string, temperatures, "0,0.8,1",
          "Sampling temperatures; every experiment runs at each (0 = greedy)");
ABSL_FLAG(bool, variants, true,
          "At 100 % deterministic, also run the paper's fixed window and each refinement alone");
ABSL_FLAG(int32_t, repeat, 1,
          "Runs of each mode and share, interleaved round by round (off, batch_invariant, selective, "
          "off, ...); each row is the run of median throughput, so that a busy machine's drift falls "
          "on every mode alike");
ABSL_FLAG(bool, both_paths, true,
          "At each deterministic share, run the engine's per-step choice (auto), verification alone "
          "(adaptive+early) and decoding under fixed alone (fixed path); false: auto only");

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int32_t, prompt_tokens);
ABSL_DECLARE_FLAG(int32_t, output_tokens);
ABSL_DECLARE_FLAG(int32_t, max_batch_tokens);

namespace llm42::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  double arrival_s;
  std::vector<int32_t> prompt;
  int32_t output;
  bool deterministic;
};

// Lognormal lengths with ShareGPT-like medians and spread (scaled), clipped, and exponential
// inter-arrival gaps (none offline: --rate 0); everything drawn from Philox with a fixed seed.
std::vector<Job> MakeWorkload(int32_t vocab, int32_t bos) {
  const int n = absl::GetFlag(FLAGS_requests);
  const bool fixed = absl::GetFlag(FLAGS_workload) == "fixed";
  const double scale = absl::GetFlag(FLAGS_scale);
  std::vector<Job> jobs;
  double t = 0;
  auto normal = [](uint64_t i, uint32_t stream) {
    const double u1 = std::max(PhiloxUniform(4242, i, stream), 1e-12), u2 = PhiloxUniform(4242, i, stream + 1);
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  };
  for (int i = 0; i < n; ++i) {
    Job j;
    if (absl::GetFlag(FLAGS_rate) > 0) {
      t += -std::log(std::max(PhiloxUniform(4242, static_cast<uint64_t>(i), 1), 1e-12)) / absl::GetFlag(FLAGS_rate);
    }
    j.arrival_s = t;
    int in, out;
    if (fixed) {
      in = absl::GetFlag(FLAGS_prompt_tokens);
      out = absl::GetFlag(FLAGS_output_tokens);
    } else {
      in = static_cast<int>(std::clamp(scale * std::exp(5.1 + 0.9 * normal(static_cast<uint64_t>(i), 2)), 8.0, 1024.0));
      out = static_cast<int>(std::clamp(scale * std::exp(5.2 + 0.8 * normal(static_cast<uint64_t>(i), 4)), 8.0, 512.0));
    }
    j.prompt.push_back(bos);
    for (int k = 1; k < in; ++k) {
      j.prompt.push_back(3 + static_cast<int32_t>(PhiloxUniform(static_cast<uint64_t>(i), static_cast<uint64_t>(k), 6) * (vocab - 3)));
    }
    j.output = out;
    j.deterministic = false;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// Marks round(fraction * n) jobs deterministic, spread evenly over the arrival order.
void MarkDeterministic(std::vector<Job>& jobs, double fraction) {
  const auto n = static_cast<int>(jobs.size());
  const int k = static_cast<int>(std::lround(fraction * n));
  for (int i = 0; i < n; ++i) jobs[static_cast<size_t>(i)].deterministic = false;
  for (int i = 0; i < k; ++i) jobs[static_cast<size_t>(i * n / k)].deterministic = true;
  if (k == 0 && fraction > 0 && n > 0) jobs[0].deterministic = true;  // at least one
}

// How deterministic requests decode: which of DvrController's refinements of the paper's fixed
// window are on, and the decode path (the default lets the engine choose per step).
struct Variant {
  const char* name;
  bool adaptive_window, early_verify;
  DecodePath path;
};
constexpr Variant kPaper{"paper", false, false, DecodePath::kVerify},
    kAdaptive{"adaptive", true, false, DecodePath::kVerify},
    kEarly{"early", false, true, DecodePath::kVerify},
    kBoth{"adaptive+early", true, true, DecodePath::kVerify},
    kAuto{"auto", true, true, DecodePath::kAuto}, kFixedPath{"fixed path", true, true, DecodePath::kFixed};

struct Row {
  double temperature;
  std::string variant;
  std::string mode;
  double det_share;
  int32_t window, group;
  double output_tps, recompute_pct;
  int64_t verify_passes, rollbacks, decoded_fixed;
  // Candidates that disagreed with their replay per thousand compared (-1: none verified): how
  // often the fast path's token is not the fixed schedule's.
  double disagree_per_k;
  double ttft_p50, ttft_p99, e2e_p50, e2e_p99;
  StepSplit step;
};

// Set from the engine's callback when a request's last token is committed.
struct Finish {
  std::atomic<int64_t> at_ns{0};
};

void OnCommit(void* user, void*, const int32_t*, size_t, const char*, size_t, int32_t finished) {
  if (finished) {
    static_cast<Finish*>(user)->at_ns.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
  }
}

Row Run(const std::string& model, DeterminismMode mode, const std::vector<Job>& jobs, int32_t window,
        int32_t group, const std::string& label, double share, double temperature, Variant variant) {
  SessionOptions o = BenchSessionOptions(model);  // every prompt prefilled, as in the paper
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_running_requests = 64;
  o.context_length = 2048;
  o.determinism.mode = mode;
  o.determinism.window = window;
  o.determinism.verify_group = group;
  o.determinism.adaptive_window = variant.adaptive_window;
  o.determinism.early_verify = variant.early_verify;
  o.determinism.decode_path = variant.path;
  auto session = Session::Create(o);
  if (!session.ok()) {
    std::cerr << "llm42 bench-dvr: " << session.status().message() << "\n";
    std::exit(1);
  }
  Session& s = **session;
  const bool terminal = platform::StderrIsTerminal();  // progress only there
  WarmUp(s, 32);
  const int64_t base_tokens = s.stat(Stat::kTokensGenerated);
  const EngineStats::StepTimes times_before = s.step_times();
  std::vector<std::shared_ptr<Request>> reqs(jobs.size());
  std::vector<Clock::time_point> submitted(jobs.size());
  std::vector<Finish> finish(jobs.size());
  const auto start = Clock::now();
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(jobs[i].arrival_s)));
    RequestOptions r;
    r.has_prompt_tokens = true;
    r.prompt_tokens = jobs[i].prompt;
    r.max_tokens = jobs[i].output;
    r.ignore_eos = true;
    r.sampling.temperature = static_cast<float>(temperature);
    r.deterministic = jobs[i].deterministic && mode != DeterminismMode::kOff;
    r.callback = OnCommit;
    r.callback_user_data = &finish[i];
    submitted[i] = Clock::now();
    reqs[i] = *s.Submit(r, nullptr);
    if (terminal) std::fprintf(stderr, "\r%-40s submitted %zu/%zu   ", label.c_str(), i + 1, jobs.size());
  }
  std::vector<double> ttft, e2e;
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i]->Wait(-1);  // the callback has run by then
    const Clock::time_point done{std::chrono::duration_cast<Clock::duration>(
        std::chrono::nanoseconds(finish[i].at_ns.load()))};
    e2e.push_back(std::chrono::duration<double>(done - submitted[i]).count() * 1000);
    ttft.push_back(reqs[i]->stat(Stat::kTimeToFirstTokenUs) / 1000.0);
    if (terminal) std::fprintf(stderr, "\r%-40s finished %zu/%zu    ", label.c_str(), i + 1, reqs.size());
  }
  const double makespan = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t out = s.stat(Stat::kTokensGenerated) - base_tokens;
  Row row;
  row.temperature = temperature;
  row.variant = mode == DeterminismMode::kSelective ? variant.name : "-";
  row.mode = mode == DeterminismMode::kOff ? "off" : mode == DeterminismMode::kBatchInvariant ? "batch_invariant" : "selective";
  row.det_share = share;
  row.window = window;
  row.group = group;
  row.output_tps = static_cast<double>(out) / makespan;
  row.recompute_pct = 100.0 * static_cast<double>(s.stat(Stat::kTokensRolledBack)) / static_cast<double>(std::max<int64_t>(1, out));
  row.verify_passes = s.stat(Stat::kVerifyPasses);
  row.decoded_fixed = s.stat(Stat::kTokensDecodedFixed);
  row.rollbacks = s.stat(Stat::kRollbacks);
  const int64_t compared = s.stat(Stat::kTokensVerified) - s.stat(Stat::kTokensRolledBack) + row.rollbacks;
  row.disagree_per_k = compared > 0 ? 1000.0 * static_cast<double>(row.rollbacks) / static_cast<double>(compared) : -1;
  row.ttft_p50 = Percentile(ttft, 0.5);
  row.ttft_p99 = Percentile(ttft, 0.99);
  row.e2e_p50 = Percentile(e2e, 0.5);
  row.e2e_p99 = Percentile(e2e, 0.99);
  row.step = StepSplitBetween(times_before, s.step_times());
  return row;
}

std::vector<double> ParseList(const std::string& text) {
  std::vector<double> v;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double d;
    if (absl::SimpleAtod(p, &d)) v.push_back(d);
  }
  return v;
}

}  // namespace

int BenchDvr() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "llm42: --model PATH is required\n";
    return 2;
  }
  int32_t vocab = 0, bos = 1;
  {
    SessionOptions o;  // only reads the vocabulary (on the CPU, which maps the file)
    o.model_path = model;
    o.backend = "cpu";
    o.threads = 1;
    o.kv_cache_tokens = 64;
    auto s = Session::Create(o);
    if (!s.ok()) {
      std::cerr << "llm42 bench-dvr: " << s.status().message() << "\n";
      return 1;
    }
    vocab = (*s)->tokenizer().vocab().size();
    bos = std::max(0, (*s)->tokenizer().vocab().bos());
  }
  std::vector<Job> jobs = MakeWorkload(vocab, bos);
  int64_t in_tokens = 0, out_tokens = 0;
  for (const Job& j : jobs) {
    in_tokens += static_cast<int64_t>(j.prompt.size());
    out_tokens += j.output;
  }
  const int32_t w0 = 64, g0 = 8;  // the policy's defaults
  // Each row is printed as its run ends, so a run cut short still reports what it measured.
  std::cout << absl::StrFormat(
      "workload %s: %d requests, %d prompt + %d output tokens in all, %s; model %s; %d threads\n\n",
      absl::GetFlag(FLAGS_workload), jobs.size(), in_tokens, out_tokens,
      absl::GetFlag(FLAGS_rate) > 0 ? absl::StrFormat("Poisson %.2f req/s", absl::GetFlag(FLAGS_rate))
                                    : std::string("offline (every request at once)"),
      model, absl::GetFlag(FLAGS_threads));
  std::cout << "| T | mode | det % | path | W | G | output tok/s | vs off | recomputed % | verify passes | "
               "rollbacks | disagree / 1k | decoded under fixed | TTFT p50 ms | TTFT p99 ms | E2E p50 ms | E2E p99 ms | "
               "ms per step: forward / logits copy / host |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            << std::flush;
  std::ofstream csv;
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    csv.open(platform::Utf8Path(absl::GetFlag(FLAGS_csv)));
    csv << "mode,det_share,window,group,output_tps,vs_off,recompute_pct,verify_passes,rollbacks,"
           "ttft_p50,ttft_p99,e2e_p50,e2e_p99,temperature,variant,decoded_fixed,step_forward_ms,step_logits_ms,"
           "step_host_ms,disagree_per_k\n";
  }
  double off = 0;
  auto emit = [&](const Row& r) {
    if (r.mode == "off") off = r.output_tps;  // each temperature's rows start with its off run
    if (platform::StderrIsTerminal()) std::fprintf(stderr, "\n");
    const std::string disagree = r.disagree_per_k < 0 ? "-" : absl::StrFormat("%.1f", r.disagree_per_k);
    std::cout << absl::StrFormat("| %g | %s | %g | %s | %d | %d | %.1f | %.3f | %.2f | %d | %d | %s | %d | %.0f | %.0f | %.0f | %.0f "
                                 "| %.2f / %.2f / %.2f |\n",
                                 r.temperature, r.mode, r.det_share * 100, r.variant, r.window, r.group,
                                 r.output_tps, r.output_tps / off,
                                 r.recompute_pct, r.verify_passes, r.rollbacks, disagree, r.decoded_fixed, r.ttft_p50, r.ttft_p99,
                                 r.e2e_p50, r.e2e_p99, r.step.forward_ms, r.step.logits_ms, r.step.host_ms)
              << std::flush;
    if (csv) {
      csv << absl::StrFormat("%s,%g,%d,%d,%.2f,%.4f,%.3f,%d,%d,%.1f,%.1f,%.1f,%.1f,%g,%s,%d,%.3f,%.3f,%.3f,%.2f\n", r.mode,
                             r.det_share, r.window, r.group, r.output_tps, r.output_tps / off, r.recompute_pct,
                             r.verify_passes, r.rollbacks, r.ttft_p50, r.ttft_p99, r.e2e_p50, r.e2e_p99,
                             r.temperature, r.variant, r.decoded_fixed, r.step.forward_ms, r.step.logits_ms,
                             r.step.host_ms, r.disagree_per_k)
          << std::flush;
    }
  };
  for (double t : ParseList(absl::GetFlag(FLAGS_temperatures))) {
    const std::string at = absl::StrFormat("T=%g ", t);
    // The comparison: off, batch_invariant and selective at each share, run --repeat times round
    // by round; each row is its configuration's run of median throughput.
    struct Config {
      DeterminismMode mode;
      double share;
      Variant variant;
      std::string label;
    };
    std::vector<Config> configs = {{DeterminismMode::kOff, 0, kBoth, at + "off"},
                                   {DeterminismMode::kBatchInvariant, 1, kBoth, at + "batch_invariant"}};
    for (double f : ParseList(absl::GetFlag(FLAGS_fractions))) {
      std::vector<Variant> paths = {kAuto};
      if (absl::GetFlag(FLAGS_both_paths)) paths.insert(paths.end(), {kBoth, kFixedPath});
      for (const Variant& v : paths) {
        configs.push_back({DeterminismMode::kSelective, f, v, at + absl::StrFormat("selective %g%% %s", f * 100, v.name)});
      }
    }
    const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
    std::vector<std::vector<Row>> runs(configs.size());
    for (int round = 0; round < repeat; ++round) {
      for (size_t c = 0; c < configs.size(); ++c) {
        const Config& k = configs[c];
        MarkDeterministic(jobs, k.share);
        const std::string label = repeat > 1 ? k.label + absl::StrFormat(" (%d/%d)", round + 1, repeat) : k.label;
        runs[c].push_back(Run(model, k.mode, jobs, w0, g0, label, k.share, t, k.variant));
        if (repeat == 1) emit(runs[c].back());
      }
    }
    for (size_t c = 0; c < configs.size() && repeat > 1; ++c) {
      std::vector<Row>& r = runs[c];
      std::sort(r.begin(), r.end(), [](const Row& a, const Row& b) { return a.output_tps < b.output_tps; });
      emit(r[r.size() / 2]);
    }
    MarkDeterministic(jobs, 1.0);
    if (absl::GetFlag(FLAGS_variants)) {
      for (const Variant& v : {kPaper, kAdaptive, kEarly, kFixedPath}) {
        emit(Run(model, DeterminismMode::kSelective, jobs, w0, g0,
                 at + absl::StrFormat("selective 100%% %s", v.name), 1, t, v));
      }
    }
    for (double w : ParseList(absl::GetFlag(FLAGS_windows))) {
      for (double g : ParseList(absl::GetFlag(FLAGS_groups))) {
        if (static_cast<int>(w) == w0 && static_cast<int>(g) == g0 && absl::GetFlag(FLAGS_variants)) continue;
        emit(Run(model, DeterminismMode::kSelective, jobs, static_cast<int32_t>(w), static_cast<int32_t>(g),
                 at + absl::StrFormat("sweep W=%g G=%g", w, g), 1, t, kPaper));
      }
    }
  }
  return 0;
}

}  // namespace llm42::cli
