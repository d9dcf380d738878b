// llm42 bench --model M --json_schema FILE: what a JSON Schema costs a generation. The schema is
// compiled against the model's vocabulary (timed: conversion and parse, then the token grammar
// with its first mask); then, in alternating rounds, the same prompt generates --output_tokens
// tokens unconstrained and under the schema (temperature 0.8, a seed per round, plain or
// --deterministic requests). Prints a markdown table: decode tokens/s of each, their ratio, and
// the time the engine spent changing logits (the grammar masks) per masked row, measured inside
// the engine (EngineStats::StepTimes).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "lib/engine/grammar_cache.h"
#include "lib/engine/session.h"
#include "lib/tokenizer/tokenizer.h"
#include "tools/llm42/bench_util.h"
#include "tools/llm42/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, json_schema);
ABSL_DECLARE_FLAG(std::string, prompt);
ABSL_DECLARE_FLAG(int32_t, output_tokens);
ABSL_DECLARE_FLAG(bool, deterministic);
ABSL_FLAG(int32_t, rounds, 3, "bench --json_schema: rounds of (unconstrained, constrained) generations");

namespace llm42::cli {
namespace {

struct Generation {
  int64_t tokens = 0;
  double decode_s = 0;
  int64_t controlled_rows = 0;
  double controls_s = 0;
  bool stopped = false;
};

std::optional<Generation> Generate(Session& s, const RequestOptions& o) {
  const EngineStats::StepTimes before = s.step_times();
  const auto start = std::chrono::steady_clock::now();
  auto r = s.Submit(o, nullptr);
  if (!r.ok()) {
    std::cerr << "llm42 bench: " << r.status().message() << "\n";
    return std::nullopt;
  }
  (*r)->Wait(-1);
  const double total = SecondsSince(start);
  if (!(*r)->status().ok()) {
    std::cerr << "llm42 bench: " << (*r)->status().message() << "\n";
    return std::nullopt;
  }
  const EngineStats::StepTimes after = s.step_times();
  Generation g;
  g.tokens = static_cast<int64_t>((*r)->output_tokens().size());
  g.decode_s = total - static_cast<double>((*r)->stat(Stat::kTimeToFirstTokenUs)) * 1e-6;
  g.controlled_rows = after.controlled_rows - before.controlled_rows;
  g.controls_s = after.controls_s - before.controls_s;
  g.stopped = (*r)->finish_reason() == FinishReason::kStop;
  return g;
}

}  // namespace

int BenchJsonSchema() {
  const std::string path = absl::GetFlag(FLAGS_json_schema);
  const std::optional<std::string> schema = ReadFileBytes(path);
  if (!schema) {
    std::cerr << "llm42 bench: cannot read " << path << "\n";
    return 2;
  }
  SessionOptions so = BenchSessionOptions(absl::GetFlag(FLAGS_model));
  auto session = Session::Create(so);
  if (!session.ok()) {
    std::cerr << "llm42 bench: " << session.status().message() << "\n";
    return 1;
  }
  Session& s = **session;
  // Compile time, alone: conversion and parse; then the grammar against the vocabulary (the
  // session does the same at the first request, and keeps it for the next ones).
  auto start = std::chrono::steady_clock::now();
  auto grammar = RequestOptions::MakeOutputGrammar(RequestOptions::OutputGrammar::Kind::kJsonSchema, *schema);
  const double convert_s = SecondsSince(start);
  if (!grammar.ok()) {
    std::cerr << "llm42 bench: " << path << ": " << grammar.status().message() << "\n";
    return 1;
  }
  // (A cache of its own: the session compiles it again at its first constrained request, inside
  // that request's time to first token.)
  const Vocab& vocab = s.tokenizer().vocab();
  GrammarCache cache(s.tokenizer());
  start = std::chrono::steady_clock::now();
  auto compiled = cache.Get(*grammar);
  const double compile_s = SecondsSince(start);
  if (!compiled.ok()) {
    std::cerr << "llm42 bench: " << compiled.status().message() << "\n";
    return 1;
  }
  RequestOptions o;
  o.prompt_text = absl::GetFlag(FLAGS_prompt).empty() ? "The character's next action, as JSON:" : absl::GetFlag(FLAGS_prompt);
  o.has_prompt_text = true;
  o.max_tokens = absl::GetFlag(FLAGS_output_tokens);
  o.sampling.temperature = 0.8f;
  o.has_seed = true;
  o.deterministic = absl::GetFlag(FLAGS_deterministic);
  // Warm-up: pages the weights in (not timed).
  RequestOptions warm = o;
  warm.max_tokens = 4;
  if (!Generate(s, warm)) return 1;
  Generation plain, constrained;
  int64_t stopped = 0;
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  for (int round = 0; round < rounds; ++round) {
    std::fprintf(stderr, "[%d/%d] round %d\n", round + 1, rounds, round + 1);
    o.sampling.seed = 1000 + static_cast<uint64_t>(round);
    for (const bool with_schema : {false, true}) {
      RequestOptions ro = o;
      ro.ignore_eos = !with_schema;
      if (with_schema) ro.output_grammar = *grammar;
      const std::optional<Generation> g = Generate(s, ro);
      if (!g) return 1;
      Generation& sum = with_schema ? constrained : plain;
      sum.tokens += g->tokens;
      sum.decode_s += g->decode_s;
      sum.controlled_rows += g->controlled_rows;
      sum.controls_s += g->controls_s;
      stopped += with_schema && g->stopped;
    }
  }
  auto tok_s = [](const Generation& g) { return g.decode_s > 0 ? static_cast<double>(g.tokens - 1) / g.decode_s : 0.0; };
  std::printf("schema %s on %s, %d threads, vocabulary %d, %s requests\n\n", path.c_str(),
              absl::GetFlag(FLAGS_model).c_str(), so.threads, vocab.size(), o.deterministic ? "deterministic" : "plain");
  std::printf("| conversion ms | grammar compile ms | unconstrained tok/s | constrained tok/s | ratio | masked rows | mask us/row | JSON complete |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::printf("| %.2f | %.1f | %.1f | %.1f | %.3f | %lld | %.1f | %lld/%d |\n", convert_s * 1e3, compile_s * 1e3, tok_s(plain),
              tok_s(constrained), tok_s(plain) > 0 ? tok_s(constrained) / tok_s(plain) : 0.0,
              static_cast<long long>(constrained.controlled_rows),
              constrained.controlled_rows > 0 ? constrained.controls_s / static_cast<double>(constrained.controlled_rows) * 1e6 : 0.0,
              static_cast<long long>(stopped), rounds);
  return 0;
}

}  // namespace llm42::cli
