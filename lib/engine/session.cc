#include "lib/engine/session.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_format.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/engine/text_stream.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/gguf_reader.h"
#include "lib/model/llama_model.h"
#include "lib/sampling/sampler.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/util/status.h"

namespace llm42 {

// Engine-side state of one request.
struct Sequence {
  Sequence(std::shared_ptr<Request> r, uint64_t arrival_order, SamplingParams params)
      : request(std::move(r)),
        arrival(arrival_order),
        tokens(request->prompt()),
        n_prompt(static_cast<int64_t>(tokens.size())),
        sampling(params),
        text(request->options().stops) {}

  std::shared_ptr<Request> request;
  uint64_t arrival;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t n_prompt;
  int64_t n_computed = 0;  // positions whose K/V are in the cache
  int32_t kv_seq = -1;     // KV-cache sequence while admitted
  SamplingParams sampling;
  TextStream text;

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

namespace {

constexpr size_t kMaxQueuedRequests = 4096;

uint64_t RandomSeed() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32 | rd()) ^ counter.fetch_add(0x9E3779B97F4A7C15);
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
}

}  // namespace

Session::Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const SessionOptions& options) {
  LLM42_RETURN_IF_ERROR(options.Validate());
  if (options.model_path.empty()) return InvalidArgument("no model path was set");
  if (options.backend == "cuda") {
    return UnsupportedError("backend 'cuda' is not available in this build of llm42");
  }
  if (options.backend != "auto" && options.backend != "cpu") {
    return InvalidArgument("unknown backend '", options.backend, "' (auto, cpu, cuda)");
  }
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  s->schedule_ = options.determinism.mode == DeterminismMode::kBatchInvariant ? Schedule::kFixed
                                                                              : Schedule::kFast;
  LLM42_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(options.model_path));
  s->file_ = std::move(file);
  LLM42_ASSIGN_OR_RETURN(s->tokenizer_, Tokenizer::FromGguf(*s->file_));
  LLM42_ASSIGN_OR_RETURN(s->model_, LlamaModel::Load(s->file_));
  const LlamaConfig& c = s->model_->config();
  if (c.n_vocab != s->tokenizer_->vocab().size()) {
    return FormatError(options.model_path, ": token_embd.weight has ", c.n_vocab,
                       " rows but the vocabulary has ", s->tokenizer_->vocab().size(), " tokens");
  }
  if (options.context_length > c.n_ctx_train) {
    return absl::OutOfRangeError(absl::StrCat("context length ", options.context_length,
                                              " exceeds the model's ", c.n_ctx_train));
  }
  s->context_length_ = options.context_length > 0
                           ? options.context_length
                           : static_cast<int32_t>(std::min<int64_t>(
                                 c.n_ctx_train, SessionOptions::kDefaultContextLength));
  // Default KV size: every running request at full context, within 40% of physical memory.
  const int64_t bytes_per_token = c.n_layer * 2 * c.kv_dim() * static_cast<int64_t>(sizeof(float));
  int64_t kv_tokens = options.kv_cache_tokens;
  if (kv_tokens == 0) {
    kv_tokens = std::min<int64_t>(int64_t{s->context_length_} * options.max_running_requests,
                                  PhysicalMemoryBytes() * 2 / 5 / bytes_per_token);
    kv_tokens = std::max<int64_t>(kv_tokens, s->context_length_);
  }
  const int64_t blocks = (kv_tokens + KvCache::kDefaultBlockSize - 1) / KvCache::kDefaultBlockSize;
  try {
    s->cache_ = std::make_unique<KvCache>(c.n_layer, c.kv_dim(), blocks);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate a KV cache of ", kv_tokens, " tokens"));
  }
  s->max_sequence_ = std::min<int64_t>(s->context_length_, s->cache_->capacity_tokens());
  s->backend_ = std::make_unique<CpuBackend>(options.threads);
  Log(LogLevel::kInfo, "loaded ", options.model_path, ": ", c.n_layer, " layers, n_embd ",
      c.n_embd, ", vocab ", c.n_vocab, ", context ", s->context_length_, ", KV cache ",
      s->cache_->capacity_tokens(), " tokens");
  s->engine_ = std::thread([p = s.get()] { p->EngineLoop(); });
  return s;
}

Session::~Session() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (engine_.joinable()) engine_.join();
}

int64_t Session::kv_cache_tokens() const { return cache_->capacity_tokens(); }

absl::StatusOr<std::shared_ptr<Request>> Session::Submit(const RequestOptions& options,
                                                         void* handle) {
  if (!options.messages.empty()) {
    return UnsupportedError("chat messages need the model's chat template, which this version "
                            "does not render yet; send a prompt");
  }
  if (options.deterministic) {
    switch (options_.determinism.mode) {
      case DeterminismMode::kOff:
        return UnsupportedError(
            "deterministic requests are refused: the session's determinism mode is off");
      case DeterminismMode::kSelective:
        return UnsupportedError("deterministic requests in selective mode are not available in "
                                "this version; use mode batch_invariant");
      case DeterminismMode::kBatchInvariant: break;  // every pass is fixed: nothing to verify
    }
  }
  std::vector<int32_t> prompt;
  if (options.has_prompt_tokens) {
    prompt = options.prompt_tokens;
    const Vocab& vocab = tokenizer_->vocab();
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (!vocab.IsValid(prompt[i])) {
        return InvalidArgument("prompt token #", i, " = ", prompt[i],
                               " is outside the vocabulary (", vocab.size(), " tokens)");
      }
    }
  } else if (options.has_prompt_text) {
    prompt = tokenizer_->Encode(options.prompt_text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (prompt.empty()) return InvalidArgument("the request has no prompt");
  if (static_cast<int64_t>(prompt.size()) >= context_length_) {
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", prompt.size(),
                                              " tokens, which leaves no room in the context of ",
                                              context_length_, " tokens"));
  }
  if (static_cast<int64_t>(prompt.size()) >= cache_->capacity_tokens()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the prompt has ", prompt.size(), " tokens; the whole KV cache holds ",
        cache_->capacity_tokens()));
  }
  const uint64_t seed = options.has_seed        ? options.sampling.seed
                        : options.deterministic ? options_.determinism.default_seed
                                                : RandomSeed();
  SamplingParams sampling = options.sampling;
  sampling.seed = seed;
  auto request = std::make_shared<Request>(options, std::move(prompt), seed);
  request->set_handle(handle);
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("the session is shutting down");
  if (incoming_.size() >= kMaxQueuedRequests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request queue is full (", kMaxQueuedRequests, ")"));
  }
  incoming_.push_back(std::make_unique<Sequence>(request, next_arrival_++, sampling));
  return request;
}

void Session::EngineLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (running_.empty() && waiting_.empty()) {
        mu_.Await(absl::Condition(
            +[](Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->stopping_ || !s->incoming_.empty();
            },
            this));
      }
      if (stopping_) break;
      for (auto& seq : incoming_) waiting_.push_back(std::move(seq));
      incoming_.clear();
    }
    Step();
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& seq : incoming_) waiting_.push_back(std::move(seq));
    incoming_.clear();
  }
  for (auto& seq : running_) waiting_.push_back(std::move(seq));
  for (auto& seq : waiting_) {
    Finish(*seq, FinishReason::kCancelled, absl::CancelledError("the session was destroyed"));
  }
  running_.clear();
  waiting_.clear();
}

void Session::Release(Sequence& seq) {
  if (seq.kv_seq >= 0) {
    cache_->Free(seq.kv_seq);
    seq.kv_seq = -1;
  }
  seq.n_computed = 0;
  blocks_in_use_.store(cache_->n_blocks() - cache_->free_blocks(), std::memory_order_relaxed);
}

void Session::Finish(Sequence& seq, FinishReason reason, absl::Status status) {
  std::string rest;
  seq.text.Finish(&rest);
  Release(seq);
  seq.request->Commit({}, {}, rest, true, reason, std::move(status));
  requests_finished_.fetch_add(1, std::memory_order_relaxed);
}

void Session::Admit() {
  while (!waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < options_.max_running_requests) {
    Sequence& next = *waiting_.front();
    // Admit only what the cache can start on: its first chunk must fit in the free blocks.
    const int64_t first = std::min<int64_t>(next.pending(), options_.max_batch_tokens);
    if (cache_->BlocksFor(first) > cache_->free_blocks() && !running_.empty()) break;
    next.kv_seq = cache_->Create();
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Session::Preempt(Sequence& victim) {
  Release(victim);
  victim.request->AddPreemption();
  preemptions_.fetch_add(1, std::memory_order_relaxed);
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Sequence>& s) { return s.get() == &victim; });
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const std::unique_ptr<Sequence>& s) {
    return s->arrival > owned->arrival;
  });
  waiting_.insert(pos, std::move(owned));
}

// Reserves cache room for `seq` up to `positions`, preempting newer running requests while
// the pool is short. False when `seq` itself had to be preempted.
bool Session::ReserveOrPreempt(Sequence& seq, int64_t positions) {
  while (!cache_->Reserve(seq.kv_seq, positions)) {
    Sequence& newest = *running_.back();
    Preempt(newest);
    if (&newest == &seq) return false;
  }
  return true;
}

bool Session::Step() {
  // Cancellations first: they free cache for everyone else.
  for (size_t i = 0; i < running_.size();) {
    if (running_[i]->request->cancel_requested()) {
      Finish(*running_[i], FinishReason::kCancelled, absl::CancelledError("cancelled"));
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->request->cancel_requested()) {
      Finish(**it, FinishReason::kCancelled, absl::CancelledError("cancelled"));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  Admit();
  if (running_.empty()) return false;

  // Plan the batch: decodes (one token each) first, then prefill chunks in arrival order, within
  // max_batch_tokens. Each entry is (sequence, tokens this step).
  struct Entry {
    Sequence* seq;
    int64_t n;
  };
  std::vector<Entry> plan;
  int64_t budget = options_.max_batch_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.pending() != 1) continue;
    if (!ReserveOrPreempt(s, s.n_computed + 1)) break;  // s (the newest) was preempted
    plan.push_back({&s, 1});
    --budget;
  }
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.pending() <= 1) continue;
    int64_t n = std::min(s.pending(), budget);
    // A prefill takes what the pool can give without preempting anyone already planned; if
    // nothing is planned it may preempt newer requests to make progress.
    const int64_t can = cache_->reserved_positions(s.kv_seq) +
                        cache_->free_blocks() * cache_->block_size() - s.n_computed;
    if (can < n) n = plan.empty() ? n : std::max<int64_t>(0, can);
    if (n == 0) continue;
    if (!ReserveOrPreempt(s, s.n_computed + n)) break;
    plan.push_back({&s, n});
    budget -= n;
  }
  blocks_in_use_.store(cache_->n_blocks() - cache_->free_blocks(), std::memory_order_relaxed);
  if (plan.empty()) return false;

  std::vector<int32_t> tokens, positions, seqs, logit_rows;
  std::vector<Sequence*> logit_owner;
  for (const Entry& e : plan) {
    for (int64_t j = 0; j < e.n; ++j) {
      const int64_t p = e.seq->n_computed + j;
      tokens.push_back(e.seq->tokens[static_cast<size_t>(p)]);
      positions.push_back(static_cast<int32_t>(p));
      seqs.push_back(e.seq->kv_seq);
    }
    if (e.seq->n_computed + e.n == static_cast<int64_t>(e.seq->tokens.size())) {
      logit_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
      logit_owner.push_back(e.seq);
    }
  }
  const auto n_vocab = static_cast<size_t>(tokenizer_->vocab().size());
  logits_.resize(logit_rows.size() * n_vocab);
  model_->Forward(*backend_, *cache_,
                  ForwardBatch{tokens, positions, seqs, logit_rows, schedule_}, logits_.data());

  for (const Entry& e : plan) {
    const bool prefill = e.seq->n_computed < e.seq->n_prompt || e.n > 1;
    e.seq->n_computed += e.n;
    if (prefill) {
      e.seq->request->AddPrefill(e.n);
      prefill_tokens_.fetch_add(e.n, std::memory_order_relaxed);
    } else {
      e.seq->request->AddDecodeStep();
    }
  }
  decode_steps_.fetch_add(1, std::memory_order_relaxed);

  const int32_t eos = tokenizer_->vocab().eos();
  std::vector<Sequence*> finished;
  for (size_t r = 0; r < logit_owner.size(); ++r) {
    Sequence& s = *logit_owner[r];
    const RequestOptions& o = s.request->options();
    const std::span<const float> row(logits_.data() + r * n_vocab, n_vocab);
    const auto position = static_cast<int64_t>(s.tokens.size());
    const int32_t token = SampleToken(row, s.sampling, position);
    const float logprob = o.logprobs ? TokenLogprob(row, token) : 0.0f;
    s.tokens.push_back(token);
    tokens_generated_.fetch_add(1, std::memory_order_relaxed);
    std::string released;
    const bool stop_string = s.text.Push(tokenizer_->TokenBytes(token), &released);
    FinishReason reason = FinishReason::kNone;
    if (stop_string || (token == eos && !o.ignore_eos)) {
      reason = FinishReason::kStop;
    } else if (s.generated() >= o.max_tokens || position + 1 >= max_sequence_) {
      reason = FinishReason::kLength;
    }
    if (reason != FinishReason::kNone && !stop_string) s.text.Finish(&released);
    const bool done = reason != FinishReason::kNone;
    if (done) {
      Release(s);  // before the request is seen finished, so its blocks are back in the pool
      finished.push_back(&s);
    }
    s.request->Commit(std::span(&token, 1),
                      o.logprobs ? std::span<const float>(&logprob, 1) : std::span<const float>(),
                      released, done, reason, absl::OkStatus());
  }
  for (Sequence* s : finished) {
    requests_finished_.fetch_add(1, std::memory_order_relaxed);
    running_.erase(std::find_if(running_.begin(), running_.end(),
                                [&](const std::unique_ptr<Sequence>& p) { return p.get() == s; }));
  }
  return true;
}

int64_t Session::kv_blocks_in_use() const { return blocks_in_use_.load(); }

int64_t Session::stat(SessionStat which) const {
  switch (which) {
    case SessionStat::kRequestsFinished: return requests_finished_.load();
    case SessionStat::kTokensGenerated: return tokens_generated_.load();
    case SessionStat::kPrefillTokens: return prefill_tokens_.load();
    case SessionStat::kDecodeSteps: return decode_steps_.load();
    case SessionStat::kPreemptions: return preemptions_.load();
    case SessionStat::kTokensVerified:
    case SessionStat::kVerifyPasses:
    case SessionStat::kRollbacks:
    case SessionStat::kTokensRolledBack: return 0;
  }
  return 0;
}

std::string Session::StatsJson() const {
  return absl::StrFormat(
      "{\"requests_finished\":%d,\"tokens_generated\":%d,\"tokens_verified\":0,"
      "\"verify_passes\":0,\"rollbacks\":0,\"tokens_rolled_back\":0,\"prefill_tokens\":%d,"
      "\"decode_steps\":%d,\"preemptions\":%d,\"kv_blocks_in_use\":%d,\"kv_cache_tokens\":%d}",
      stat(SessionStat::kRequestsFinished), stat(SessionStat::kTokensGenerated),
      stat(SessionStat::kPrefillTokens), stat(SessionStat::kDecodeSteps),
      stat(SessionStat::kPreemptions), kv_blocks_in_use(), kv_cache_tokens());
}

}  // namespace llm42
