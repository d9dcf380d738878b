// llama.cpp's side of tools/make-llamacpp-references.sh: the reference numbers llm42's parity test
// (tests/llamacpp_parity_test.cc) compares against. Built by that script against the llama.cpp
// library that the node-llama-cpp npm package builds; not part of llm42's build.
//
//   reference_llamacpp BACKEND_DIR MODEL N_PROMPT N_GREEDY SEED
//
// Prompt: a BOS (where the vocabulary adds one) and N_PROMPT - 1 tokens drawn uniformly from the
// vocabulary (mt19937 seeded SEED), decoded in one batch with every position's logits (teacher
// forcing), f32 KV cache, no flash attention. Then N_GREEDY greedy steps. Prints one JSON object:
// {"prompt": [...], "logprobs": [log p(prompt[i + 1] | prompt[0..i]) for i < N_PROMPT - 1],
//  "greedy": [...], "margins": [top-1 minus top-2 logit at each greedy step]}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// log-softmax of `logits` at `token`, in double.
double LogProb(const float* logits, int n_vocab, int token) {
  double max = logits[0];
  for (int i = 1; i < n_vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return static_cast<double>(logits[token]) - max - std::log(sum);
}

void PrintArray(const char* name, const std::vector<double>& v, bool last) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.9g", i ? ", " : "", v[i]);
  std::printf("]%s\n", last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: reference_llamacpp BACKEND_DIR MODEL N_PROMPT N_GREEDY SEED\n");
    return 2;
  }
  const int n_prompt = std::atoi(argv[3]), n_greedy = std::atoi(argv[4]);
  llama_log_set(Quiet, nullptr);
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "reference_llamacpp: cannot load %s\n", argv[2]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_prompt + n_greedy + 16);
  cp.n_batch = cp.n_ctx;
  cp.n_ubatch = cp.n_ctx;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;

  std::mt19937 rng(static_cast<uint32_t>(std::atoi(argv[5])));
  std::vector<llama_token> prompt;
  if (llama_vocab_get_add_bos(vocab)) prompt.push_back(llama_vocab_bos(vocab));
  while (static_cast<int>(prompt.size()) < n_prompt) prompt.push_back(static_cast<llama_token>(rng() % static_cast<uint32_t>(n_vocab)));

  llama_batch batch = llama_batch_init(n_prompt, 0, 1);
  for (int i = 0; i < n_prompt; ++i) {
    batch.token[i] = prompt[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n_prompt;
  if (llama_decode(ctx, batch) != 0) return 1;
  std::vector<double> logprobs, greedy, margins;
  for (int i = 0; i + 1 < n_prompt; ++i) {
    logprobs.push_back(LogProb(llama_get_logits_ith(ctx, i), n_vocab, prompt[static_cast<size_t>(i + 1)]));
  }
  const float* logits = llama_get_logits_ith(ctx, n_prompt - 1);
  for (int step = 0; step < n_greedy; ++step) {
    int best = 0, second = -1;
    for (int t = 1; t < n_vocab; ++t) {
      if (logits[t] > logits[best]) {
        second = best;
        best = t;
      } else if (second < 0 || logits[t] > logits[second]) {
        second = t;
      }
    }
    greedy.push_back(best);
    margins.push_back(static_cast<double>(logits[best]) - static_cast<double>(logits[second]));
    llama_token token = best;
    if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) return 1;
    logits = llama_get_logits_ith(ctx, -1);
  }
  std::vector<double> prompt_d(prompt.begin(), prompt.end());
  std::printf("{\n");
  PrintArray("prompt", prompt_d, false);
  PrintArray("logprobs", logprobs, false);
  PrintArray("greedy", greedy, false);
  PrintArray("margins", margins, true);
  std::printf("}\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
