// llama.cpp's side of tools/bench-grammar.sh: a JSON Schema as `llama-cli --json-schema` takes it.
// The schema goes through llama.cpp's own converter (json_schema_to_grammar, from its common
// library) and its grammar sampler (llama_sampler_init_grammar) in a chain with temperature 0.8
// and a seeded draw; the same prompt then generates N tokens in ROUNDS alternating rounds,
// unconstrained and constrained. Built by that script against node-llama-cpp's llama.cpp (its
// headers and libraries); not part of llm42's build.
//
//   grammar_llamacpp BACKEND_DIR MODEL THREADS SCHEMA N ROUNDS
//
// Prints "convert_ms X", "compile_ms X", "plain_tok_s X", "constrained_tok_s X",
// "grammar_us_per_token X" (sampling time per token constrained minus unconstrained: the
// grammar's share) and "complete K/ROUNDS".
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "json-schema-to-grammar.h"
#include "llama.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

struct Result {
  int tokens = 0;
  double decode_s = 0, sample_s = 0;
  bool complete = false;
};

// One generation of up to n tokens after `prompt`, from a cleared context.
Result Run(llama_context* ctx, const llama_vocab* vocab, const std::vector<llama_token>& prompt, llama_sampler* chain,
           int n) {
  Result r;
  llama_memory_clear(llama_get_memory(ctx), false);
  std::vector<llama_token> p = prompt;
  if (llama_decode(ctx, llama_batch_get_one(p.data(), static_cast<int32_t>(p.size()))) != 0) return r;
  const double t0 = Now();
  for (int i = 0; i < n; ++i) {
    const double s0 = Now();
    llama_token token = llama_sampler_sample(chain, ctx, -1);  // applies the chain and accepts
    r.sample_s += Now() - s0;
    if (llama_vocab_is_eog(vocab, token)) {
      r.complete = true;
      break;
    }
    ++r.tokens;
    if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) break;
  }
  r.decode_s = Now() - t0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: grammar_llamacpp BACKEND_DIR MODEL THREADS SCHEMA N ROUNDS\n");
    return 2;
  }
  llama_log_set(Quiet, nullptr);
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int threads = std::atoi(argv[3]), n = std::atoi(argv[5]), rounds = std::atoi(argv[6]);
  std::ifstream in(argv[4]);
  std::stringstream text;
  text << in.rdbuf();
  double t = Now();
  const std::string gbnf = json_schema_to_grammar(common_json::parse(text.str()));
  std::printf("convert_ms %.2f\n", (Now() - t) * 1e3);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const std::string prompt_text = "The character's next action, as JSON:";
  std::vector<llama_token> prompt(prompt_text.size() + 8);
  prompt.resize(static_cast<size_t>(llama_tokenize(vocab, prompt_text.c_str(), static_cast<int32_t>(prompt_text.size()),
                                                   prompt.data(), static_cast<int32_t>(prompt.size()), true, true)));
  Result plain, constrained;
  int complete = 0;
  double compile_s = 0;
  for (int round = -1; round < rounds; ++round) {  // round -1: a warm-up
    for (const bool with_grammar : {false, true}) {
      llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
      if (with_grammar) {
        t = Now();
        llama_sampler* g = llama_sampler_init_grammar(vocab, gbnf.c_str(), "root");
        compile_s = Now() - t;
        if (g == nullptr) {
          std::fprintf(stderr, "grammar_llamacpp: llama.cpp refused the grammar of %s\n", argv[4]);
          return 1;
        }
        llama_sampler_chain_add(chain, g);
      }
      llama_sampler_chain_add(chain, llama_sampler_init_temp(0.8f));
      llama_sampler_chain_add(chain, llama_sampler_init_dist(1000 + static_cast<uint32_t>(round)));
      const Result r = Run(ctx, vocab, prompt, chain, round < 0 ? 4 : n);
      llama_sampler_free(chain);
      if (round < 0) continue;
      Result& sum = with_grammar ? constrained : plain;
      sum.tokens += r.tokens;
      sum.decode_s += r.decode_s;
      sum.sample_s += r.sample_s;
      complete += with_grammar && r.complete;
    }
  }
  std::printf("compile_ms %.2f\n", compile_s * 1e3);
  std::printf("plain_tok_s %.2f\n", plain.tokens / plain.decode_s);
  std::printf("constrained_tok_s %.2f\n", constrained.tokens / constrained.decode_s);
  std::printf("grammar_us_per_token %.1f\n",
              (constrained.sample_s / constrained.tokens - plain.sample_s / plain.tokens) * 1e6);
  std::printf("complete %d/%d\n", complete, rounds);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
