// llama.cpp's side of tools/bench-llamacpp.sh: llama-bench's pp N / tg N at depth D and
// llama-batched-bench's NPP,NTG,NPL shape, timed the way those two tools time them, on the
// llama.cpp library that the node-llama-cpp npm package ships prebuilt (its CPU variants chosen
// at run time for this CPU). Built by that script against the package's own llama.h; not part of
// llm42's build, so nothing of llama.cpp is linked into llm42.
//
//   bench_llamacpp BACKEND_DIR MODEL THREADS pp|tg N DEPTH REPS
//   bench_llamacpp BACKEND_DIR MODEL THREADS batched NPP NTG NPL
//
// Prints one line per test: "pp512 d0 <best t/s> <mean t/s>" (the best and mean of REPS timed
// runs after one untimed warm-up, as llama-bench, which prints the mean), or for batched
// llama-batched-bench's columns "NPP NTG NPL N_KV T_PP S_PP T_TG S_TG T S".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

std::mt19937 rng(42);

llama_token RandomToken(const llama_vocab* vocab) {
  return static_cast<llama_token>(rng() % static_cast<uint32_t>(llama_vocab_n_tokens(vocab)));
}

// Adds `n` tokens of sequence `seq` from position `pos0` to `batch`, the last one's logits asked
// for where `last_logits` (llama-batched-bench's prompts), every one's otherwise.
void Add(llama_batch& batch, const llama_vocab* vocab, int n, int pos0, int seq, bool last_logits) {
  for (int i = 0; i < n; ++i) {
    const int t = batch.n_tokens++;
    batch.token[t] = RandomToken(vocab);
    batch.pos[t] = pos0 + i;
    batch.n_seq_id[t] = 1;
    batch.seq_id[t][0] = seq;
    batch.logits[t] = !last_logits || i == n - 1;
  }
}

// Decodes `batch` n_batch tokens at a time (llama-batched-bench's decode_helper).
bool Decode(llama_context* ctx, const llama_batch& batch, int n_batch) {
  for (int i = 0; i < batch.n_tokens; i += n_batch) {
    const int n = std::min(n_batch, batch.n_tokens - i);
    llama_batch view = {n, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i,
                        batch.logits + i};
    if (llama_decode(ctx, view) != 0) {
      std::fprintf(stderr, "bench_llamacpp: llama_decode failed\n");
      return false;
    }
  }
  llama_synchronize(ctx);
  return true;
}

// llama-bench's test_prompt: `n` random tokens (the first the BOS where the vocabulary adds one)
// decoded n_batch at a time with llama_batch_get_one.
bool Prompt(llama_context* ctx, const llama_vocab* vocab, int n, int n_batch) {
  std::vector<llama_token> tokens(static_cast<size_t>(n_batch));
  for (int done = 0; done < n;) {
    const int m = std::min(n - done, n_batch);
    for (int i = 0; i < m; ++i) tokens[i] = RandomToken(vocab);
    if (done == 0 && llama_vocab_get_add_bos(vocab)) tokens[0] = llama_vocab_bos(vocab);
    if (llama_decode(ctx, llama_batch_get_one(tokens.data(), m)) != 0) return false;
    done += m;
  }
  llama_synchronize(ctx);
  return true;
}

// llama-bench's test_gen: `n` single-token decodes, each waited for.
bool Generate(llama_context* ctx, const llama_vocab* vocab, int n) {
  llama_token token = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : RandomToken(vocab);
  for (int i = 0; i < n; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) return false;
    llama_synchronize(ctx);
    token = RandomToken(vocab);
  }
  return true;
}

llama_context* MakeContext(llama_model* model, int threads, int n_ctx, int n_seq) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = 2048;  // llama-bench's and llama-batched-bench's defaults
  cp.n_ubatch = 512;
  cp.n_seq_max = static_cast<uint32_t>(n_seq);
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  return llama_init_from_model(model, cp);
}

// pp or tg at `depth`, as llama-bench: the context made for depth + n tokens, one warm-up run,
// then `reps` runs, each from a cleared KV cache refilled to `depth` outside the timing.
int PpTg(llama_model* model, int threads, bool pp, int n, int depth, int reps) {
  const llama_vocab* vocab = llama_model_get_vocab(model);
  llama_context* ctx = MakeContext(model, threads, depth + n, 1);
  if (ctx == nullptr) return 1;
  const int n_batch = static_cast<int>(llama_n_batch(ctx));
  std::vector<double> tps;
  for (int rep = -1; rep < reps; ++rep) {
    llama_memory_clear(llama_get_memory(ctx), false);
    if (depth > 0 && !Prompt(ctx, vocab, depth, n_batch)) return 1;
    const double t0 = Now();
    if (!(pp ? Prompt(ctx, vocab, n, n_batch) : Generate(ctx, vocab, n))) return 1;
    if (rep >= 0) tps.push_back(n / (Now() - t0));
  }
  double mean = 0;
  for (double v : tps) mean += v / static_cast<double>(tps.size());
  std::printf("%s%d d%d %.2f %.2f\n", pp ? "pp" : "tg", n, depth, *std::max_element(tps.begin(), tps.end()), mean);
  llama_free(ctx);
  return 0;
}

// llama-batched-bench for one NPL: NPL prompts of NPP tokens in one batch, then NTG steps of one
// token per sequence; no shared prompt, a KV cache per sequence (its defaults).
int Batched(llama_model* model, int threads, int npp, int ntg, int npl) {
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_kv = npl * (npp + ntg);
  llama_context* ctx = MakeContext(model, threads, n_kv, npl);
  if (ctx == nullptr) return 1;
  const int n_batch = static_cast<int>(llama_n_batch(ctx));
  llama_batch batch = llama_batch_init(std::max(npl * npp, 16), 0, 1);
  batch.n_tokens = 0;
  Add(batch, vocab, 16, 0, 0, false);  // warm up
  if (!Decode(ctx, batch, n_batch)) return 1;
  llama_memory_clear(llama_get_memory(ctx), false);
  batch.n_tokens = 0;
  for (int s = 0; s < npl; ++s) Add(batch, vocab, npp, 0, s, true);
  const double t0 = Now();
  if (!Decode(ctx, batch, n_batch)) return 1;
  const double t1 = Now();
  for (int i = 0; i < ntg; ++i) {
    batch.n_tokens = 0;
    for (int s = 0; s < npl; ++s) Add(batch, vocab, 1, npp + i, s, false);
    if (!Decode(ctx, batch, n_batch)) return 1;
  }
  const double t2 = Now(), t_pp = t1 - t0, t_tg = t2 - t1;
  std::printf("%d %d %d %d %.3f %.2f %.3f %.2f %.3f %.2f\n", npp, ntg, npl, n_kv, t_pp, npl * npp / t_pp, t_tg,
              npl * ntg / t_tg, t_pp + t_tg, npl * (npp + ntg) / (t_pp + t_tg));
  llama_batch_free(batch);
  llama_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr,
                 "usage: bench_llamacpp BACKEND_DIR MODEL THREADS pp|tg N DEPTH REPS\n"
                 "       bench_llamacpp BACKEND_DIR MODEL THREADS batched NPP NTG NPL\n");
    return 2;
  }
  llama_log_set(Quiet, nullptr);
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "bench_llamacpp: cannot load %s\n", argv[2]);
    return 1;
  }
  const int threads = std::atoi(argv[3]), a = std::atoi(argv[5]), b = std::atoi(argv[6]), c = std::atoi(argv[7]);
  const std::string test = argv[4];
  int rc = 2;
  if (test == "pp" || test == "tg") rc = PpTg(model, threads, test == "pp", a, b, c);
  if (test == "batched") rc = Batched(model, threads, a, b, c);
  llama_model_free(model);
  return rc;
}
