// `llm42 bench-chat`: what prefix caching buys conversations. Two workloads, each run in a
// session with the prefix cache and in one without:
// - a chat of --turns turns after a --system_tokens system prompt, each turn continuing the last
//   (RequestOptions::parent) with --user_tokens new tokens and --reply_tokens generated: time to
//   first token per turn;
// - --characters characters sharing one persona prompt, each speaking one line after the other:
//   prefill tokens computed, and the whole run's time.
// Prompts are random token ids (the model's weights do not change speed).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "lib/engine/session.h"
#include "lib/util/platform.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(bool, deterministic);
ABSL_FLAG(int32_t, turns, 20, "bench-chat: turns of the conversation");
ABSL_FLAG(int32_t, system_tokens, 1000, "bench-chat: tokens of the system prompt (and of the shared persona)");
ABSL_FLAG(int32_t, user_tokens, 24, "bench-chat: tokens of each user message (and of each character's cue)");
ABSL_FLAG(int32_t, reply_tokens, 24, "bench-chat: tokens generated per turn (and per character's line)");
ABSL_FLAG(int32_t, characters, 8, "bench-chat: characters sharing the persona prompt");

namespace llm42::cli {
namespace {

std::vector<int32_t> RandomTokens(std::mt19937& rng, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = 3 + static_cast<int32_t>(rng() % 250);  // ids every vocabulary has
  return t;
}

std::unique_ptr<Session> Open(bool prefix_caching) {
  SessionOptions o = BenchSessionOptions(absl::GetFlag(FLAGS_model));
  o.prefix_caching = prefix_caching;
  auto s = Session::Create(o);
  if (!s.ok()) {
    std::cerr << "llm42 bench-chat: " << s.status().message() << "\n";
    return nullptr;
  }
  return std::move(s).value();
}

RequestOptions Turn(std::vector<int32_t> tokens, const Request* parent) {
  RequestOptions r;
  r.prompt_tokens = std::move(tokens);
  r.has_prompt_tokens = true;
  r.max_tokens = absl::GetFlag(FLAGS_reply_tokens);
  r.ignore_eos = true;
  r.deterministic = absl::GetFlag(FLAGS_deterministic);
  if (parent != nullptr) r.parent = *parent->AsParent();
  return r;
}

struct TurnResult {
  double ttft_ms;
  int64_t history;  // tokens before the turn's new ones
  int64_t prefilled;
};

// The chat: time to first token per turn.
std::vector<TurnResult> RunChat(Session& s) {
  std::mt19937 rng(42);
  std::vector<TurnResult> out;
  std::shared_ptr<Request> last;
  int64_t history = 0;
  for (int t = 0; t < absl::GetFlag(FLAGS_turns); ++t) {
    std::vector<int32_t> tokens = RandomTokens(rng, absl::GetFlag(FLAGS_user_tokens));
    if (t == 0) {
      std::vector<int32_t> system = RandomTokens(rng, absl::GetFlag(FLAGS_system_tokens));
      system.insert(system.end(), tokens.begin(), tokens.end());
      tokens = std::move(system);
    }
    auto r = s.Submit(Turn(tokens, last.get()), nullptr);
    if (!r.ok()) {
      std::cerr << "llm42 bench-chat: turn " << t + 1 << ": " << r.status().message() << "\n";
      break;
    }
    (*r)->Wait(-1);
    out.push_back({static_cast<double>((*r)->stat(Stat::kTimeToFirstTokenUs)) / 1e3, history,
                   (*r)->stat(Stat::kPrefillTokens)});
    history = static_cast<int64_t>((*r)->prompt().size() + (*r)->output_tokens().size());
    last = *r;
    if (platform::StderrIsTerminal()) std::fprintf(stderr, "\r  turn %d/%d", t + 1, absl::GetFlag(FLAGS_turns));
  }
  if (platform::StderrIsTerminal()) std::fprintf(stderr, "\n");
  return out;
}

struct CastResult {
  double seconds;
  int64_t prefilled;
  int64_t generated;
};

// The characters: each line after the previous one, every prompt the persona plus a cue.
CastResult RunCast(Session& s) {
  std::mt19937 rng(7);
  const std::vector<int32_t> persona = RandomTokens(rng, absl::GetFlag(FLAGS_system_tokens));
  const int64_t prefill_before = s.stat(Stat::kPrefillTokens);
  const int64_t generated_before = s.stat(Stat::kTokensGenerated);
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < absl::GetFlag(FLAGS_characters); ++c) {
    std::vector<int32_t> prompt = persona;
    const std::vector<int32_t> cue = RandomTokens(rng, absl::GetFlag(FLAGS_user_tokens));
    prompt.insert(prompt.end(), cue.begin(), cue.end());
    auto r = s.Submit(Turn(prompt, nullptr), nullptr);
    if (r.ok()) (*r)->Wait(-1);
  }
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          s.stat(Stat::kPrefillTokens) - prefill_before, s.stat(Stat::kTokensGenerated) - generated_before};
}

}  // namespace

int BenchChat() {
  if (absl::GetFlag(FLAGS_model).empty()) {
    std::cerr << "llm42 bench-chat: --model is required\n";
    return 2;
  }
  std::vector<TurnResult> chat[2];
  CastResult cast[2];
  for (bool cached : {true, false}) {
    std::fprintf(stderr, "prefix cache %s\n", cached ? "on" : "off");
    auto s = Open(cached);
    if (s == nullptr) return 1;
    WarmUp(*s, 64);
    chat[cached] = RunChat(*s);
    cast[cached] = RunCast(*s);
  }
  std::printf("## A %d-turn chat after a %d-token system prompt (%d-token messages, %d-token replies%s)\n\n",
              absl::GetFlag(FLAGS_turns), absl::GetFlag(FLAGS_system_tokens), absl::GetFlag(FLAGS_user_tokens),
              absl::GetFlag(FLAGS_reply_tokens), absl::GetFlag(FLAGS_deterministic) ? ", deterministic" : "");
  std::printf("| turn | history tokens | TTFT cached ms | prefilled | of turn 1 | TTFT uncached ms | prefilled | uncached / cached |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const size_t turns = std::min(chat[0].size(), chat[1].size());
  for (size_t t = 0; t < turns; ++t) {
    const TurnResult &on = chat[1][t], &off = chat[0][t];
    std::printf("| %zu | %lld | %.1f | %lld | %.2f | %.1f | %lld | %.1f |\n", t + 1, static_cast<long long>(on.history),
                on.ttft_ms, static_cast<long long>(on.prefilled), on.ttft_ms / chat[1][0].ttft_ms, off.ttft_ms,
                static_cast<long long>(off.prefilled), off.ttft_ms / on.ttft_ms);
  }
  std::printf("\n## %d characters sharing a %d-token persona, one line each (%d-token cue, %d tokens)\n\n",
              absl::GetFlag(FLAGS_characters), absl::GetFlag(FLAGS_system_tokens), absl::GetFlag(FLAGS_user_tokens),
              absl::GetFlag(FLAGS_reply_tokens));
  std::printf("| prefix cache | prefilled tokens | seconds | generated tok/s |\n|---|---|---|---|\n");
  for (bool cached : {false, true}) {
    const CastResult& c = cast[cached];
    std::printf("| %s | %lld | %.2f | %.1f |\n", cached ? "on" : "off", static_cast<long long>(c.prefilled), c.seconds,
                static_cast<double>(c.generated) / c.seconds);
  }
  return 0;
}

}  // namespace llm42::cli
