#include "lib/engine/session.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "absl/strings/str_format.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/engine/text_stream.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/gguf_reader.h"
#include "lib/model/hf_loader.h"
#include "lib/model/llama_model.h"
#include "lib/sampling/philox.h"
#include "lib/sampling/sampler.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/util/status.h"

namespace llm42 {

// Engine-side state of one request. See docs/deterministic-requests.md for the life of a
// deterministic one (dvr == true).
struct Sequence {
  Sequence(std::shared_ptr<Request> r, uint64_t arrival_order, SamplingParams params, bool dvr_on)
      : request(std::move(r)),
        arrival(arrival_order),
        tokens(request->prompt()),
        n_prompt(static_cast<int64_t>(tokens.size())),
        n_committed(n_prompt),
        sampling(params),
        dvr(dvr_on),
        text(request->options().stops),
        probe(text) {}

  std::shared_ptr<Request> request;
  uint64_t arrival;
  // The prompt, the committed tokens, then (deterministic requests only) unverified candidates.
  std::vector<int32_t> tokens;
  int64_t n_prompt;
  int64_t n_committed;     // prompt + committed tokens
  int64_t n_computed = 0;  // positions whose K/V are in the cache
  int32_t kv_seq = -1;     // KV-cache sequence while admitted
  SamplingParams sampling;
  bool dvr;            // decode-verify-rollback: candidates are committed only once verified
  bool ready = false;  // dvr: holds a full window (or an ending candidate) awaiting verification
  bool planned = false;  // in the batch being built (never a preemption victim then)
  TextStream text;     // committed text
  TextStream probe;    // dvr: committed text plus candidates, to spot a candidate stop string

  int64_t generated() const { return n_committed - n_prompt; }
  int64_t candidates() const { return static_cast<int64_t>(tokens.size()) - n_committed; }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
  // dvr: the committed prefix's K/V must (re)computed under fixed, and the token after it is
  // then committed directly: the first prefill, or the recompute after a preemption.
  bool fixed_prefill() const {
    return dvr && candidates() == 0 && (n_committed == n_prompt || n_computed < n_committed - 1);
  }
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
  LLM42_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, OpenModel(options.model_path));
  s->file_ = std::move(file);
  LLM42_ASSIGN_OR_RETURN(s->tokenizer_, Tokenizer::FromGguf(*s->file_));
  {
    const Vocab& v = s->tokenizer_->vocab();
    s->chat_template_ = ChatTemplate::Detect(v.chat_template(), v.Find("<|im_start|>").has_value(),
                                             v.Find("<|start_header_id|>").has_value());
  }
  if (options.vocab_only) {
    Log(LogLevel::kInfo, "opened the vocabulary of ", options.model_path, " (",
        s->tokenizer_->vocab().size(), " tokens, tokenizer only)");
    return s;
  }
  if (s->file_->tensors().empty()) {
    return FormatError(options.model_path, " has no weights (a vocabulary-only file?); open it "
                       "with vocab_only to tokenize");
  }
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

absl::StatusOr<std::string> Session::RenderChat(
    const std::vector<std::pair<std::string, std::string>>& messages) const {
  if (!chat_template_.ok()) return chat_template_.status();
  std::vector<ChatMessage> conv;
  for (const auto& [role, content] : messages) conv.push_back(ChatMessage{role, content});
  const Vocab& v = tokenizer_->vocab();
  return chat_template_->Render(conv, v.bos() >= 0 ? v.text(v.bos()) : std::string(),
                                v.eos() >= 0 ? v.text(v.eos()) : std::string());
}

int64_t Session::kv_cache_tokens() const { return cache_ ? cache_->capacity_tokens() : 0; }

absl::StatusOr<std::shared_ptr<Request>> Session::Submit(const RequestOptions& options,
                                                         void* handle) {
  if (model_ == nullptr) {
    return absl::FailedPreconditionError("this session is tokenizer-only (vocab_only): it "
                                         "cannot generate");
  }
  if (!options.messages.empty() && (options.has_prompt_text || options.has_prompt_tokens)) {
    return InvalidArgument("the request has both a prompt and chat messages; send one");
  }
  if (options.deterministic) {
    switch (options_.determinism.mode) {
      case DeterminismMode::kOff:
        return UnsupportedError(
            "deterministic requests are refused: the session's determinism mode is off");
      case DeterminismMode::kSelective: break;        // decode fast, verify under fixed
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
  } else if (!options.messages.empty()) {
    LLM42_ASSIGN_OR_RETURN(std::string text, RenderChat(options.messages));
    // The template writes BOS itself, as Hugging Face's apply_chat_template does.
    prompt = tokenizer_->Encode(text, /*add_special=*/false, /*parse_special=*/true);
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
  const bool dvr = options.deterministic && options_.determinism.mode == DeterminismMode::kSelective;
  incoming_.push_back(std::make_unique<Sequence>(request, next_arrival_++, sampling, dvr));
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
  // Unverified candidates are dropped; the committed prefix is recomputed on readmission.
  victim.tokens.resize(static_cast<size_t>(victim.n_committed));
  victim.ready = false;
  victim.probe = victim.text;
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

// Reserves cache room for `seq` up to `positions`, preempting the newest running requests not
// yet in this step's batch while the pool is short. False when `seq` itself had to go.
bool Session::ReserveOrPreempt(Sequence& seq, int64_t positions) {
  while (!cache_->Reserve(seq.kv_seq, positions)) {
    Sequence* victim = &seq;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (!(*it)->planned && it->get() != &seq) {
        victim = it->get();
        break;
      }
    }
    // Only requests older than `seq` or already planned remain: `seq` yields.
    if (victim != &seq && victim->arrival < seq.arrival) victim = &seq;
    Preempt(*victim);
    if (victim == &seq) return false;
  }
  return true;
}

namespace {

// Adds N(0, stddev) noise to fast-path logits (the fast_path_noise testing hook), keyed by the
// request and position so a run is repeatable.
void AddNoise(std::span<float> logits, double stddev, uint64_t key, int64_t position) {
  for (size_t i = 0; i < logits.size(); i += 2) {
    const double u1 = std::max(PhiloxUniform(key, static_cast<uint64_t>(position), static_cast<uint32_t>(i)), 1e-300);
    const double u2 = PhiloxUniform(key ^ 0x5bd1e995, static_cast<uint64_t>(position), static_cast<uint32_t>(i));
    const double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
    logits[i] += static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < logits.size()) logits[i + 1] += static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}

}  // namespace

FinishReason Session::EndsRequest(const Sequence& s, int32_t token, int64_t length,
                                  int64_t generated, bool stop_string) const {
  const RequestOptions& o = s.request->options();
  if (stop_string || (tokenizer_->vocab().IsEndOfGeneration(token) && !o.ignore_eos)) return FinishReason::kStop;
  if (generated >= o.max_tokens || length >= max_sequence_) return FinishReason::kLength;
  return FinishReason::kNone;
}

bool Session::CommitTokens(Sequence& s, std::span<const int32_t> tokens,
                           std::span<const float> logprobs) {
  s.tokens.resize(static_cast<size_t>(s.n_committed));
  std::string released;
  FinishReason reason = FinishReason::kNone;
  size_t n = 0;
  while (n < tokens.size() && reason == FinishReason::kNone) {
    const int32_t token = tokens[n++];
    s.tokens.push_back(token);
    ++s.n_committed;
    const bool stop_string = s.text.Push(tokenizer_->TokenBytes(token), &released);
    reason = EndsRequest(s, token, s.n_committed, s.generated(), stop_string);
    if (reason == FinishReason::kLength || (reason == FinishReason::kStop && !stop_string)) {
      s.text.Finish(&released);
    }
  }
  s.probe = s.text;
  tokens_generated_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  const bool done = reason != FinishReason::kNone;
  if (done) Release(s);  // before the request is seen finished, so its blocks are back in the pool
  s.request->Commit(tokens.first(n), logprobs.empty() ? logprobs : logprobs.first(n), released, done,
                    reason, absl::OkStatus());
  return done;
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

  // Plan the batch within max_batch_tokens: one verify group (up to G ready deterministic
  // requests, each its last committed token and candidates but the last, under fixed), then one
  // decode token per running request, then prefill chunks, in arrival order.
  enum class Kind { kVerify, kDecode, kPrefill };
  struct Entry {
    Sequence* seq;
    int64_t n;
    Kind kind;
  };
  std::vector<Entry> plan;
  int64_t budget = options_.max_batch_tokens;
  int32_t group = 0;
  for (size_t i = 0; i < running_.size() && group < options_.determinism.verify_group; ++i) {
    Sequence& s = *running_[i];
    if (!s.ready || (s.candidates() > budget && !plan.empty())) continue;
    plan.push_back({&s, s.candidates(), Kind::kVerify});
    s.planned = true;
    budget -= s.candidates();
    ++group;
  }
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.pending() != 1 || s.ready || s.fixed_prefill()) continue;
    if (!ReserveOrPreempt(s, s.n_computed + 1)) break;  // s (the newest unplanned) was preempted
    plan.push_back({&s, 1, Kind::kDecode});
    s.planned = true;
    --budget;
  }
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.ready || (s.pending() <= 1 && !s.fixed_prefill())) continue;
    int64_t n = std::min(s.pending(), budget);
    // A prefill takes what the pool can give without preempting anyone already planned; if
    // nothing is planned it may preempt newer requests to make progress.
    const int64_t can = cache_->reserved_positions(s.kv_seq) +
                        cache_->free_blocks() * cache_->block_size() - s.n_computed;
    if (can < n) n = plan.empty() ? n : std::max<int64_t>(0, can);
    if (n == 0) continue;
    if (!ReserveOrPreempt(s, s.n_computed + n)) break;
    plan.push_back({&s, n, Kind::kPrefill});
    s.planned = true;
    budget -= n;
  }
  blocks_in_use_.store(cache_->n_blocks() - cache_->free_blocks(), std::memory_order_relaxed);
  for (const Entry& e : plan) e.seq->planned = false;
  if (plan.empty()) return false;

  // Rows: a verify entry feeds positions [n_committed - 1, n_committed - 1 + n) and wants every
  // row's logits; others feed from n_computed and want the last row's when it completes the
  // sequence.
  std::vector<int32_t> tokens, positions, seqs, logit_rows;
  std::vector<Schedule> schedules;
  std::vector<size_t> first_logit(plan.size());
  for (size_t e = 0; e < plan.size(); ++e) {
    Sequence& s = *plan[e].seq;
    const int64_t begin = plan[e].kind == Kind::kVerify ? s.n_committed - 1 : s.n_computed;
    const Schedule sched = s.dvr ? (plan[e].kind == Kind::kDecode ? Schedule::kFast : Schedule::kFixed)
                                 : schedule_;
    if (s.dvr && plan[e].kind == Kind::kPrefill) {
      Check(s.fixed_prefill(), "a deterministic prefill runs only over the committed prefix");
    }
    first_logit[e] = logit_rows.size();
    for (int64_t j = 0; j < plan[e].n; ++j) {
      tokens.push_back(s.tokens[static_cast<size_t>(begin + j)]);
      positions.push_back(static_cast<int32_t>(begin + j));
      seqs.push_back(s.kv_seq);
      schedules.push_back(sched);
      if (plan[e].kind == Kind::kVerify) logit_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
    }
    if (plan[e].kind != Kind::kVerify && begin + plan[e].n == static_cast<int64_t>(s.tokens.size())) {
      logit_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
    }
  }
  const auto n_vocab = static_cast<size_t>(tokenizer_->vocab().size());
  logits_.resize(logit_rows.size() * n_vocab);
  model_->Forward(*backend_, *cache_,
                  ForwardBatch{tokens, positions, seqs, logit_rows, schedule_, schedules},
                  logits_.data());
  decode_steps_.fetch_add(1, std::memory_order_relaxed);

  std::vector<Sequence*> finished;
  const double noise = options_.determinism.fast_path_noise;
  for (size_t e = 0; e < plan.size(); ++e) {
    Sequence& s = *plan[e].seq;
    const RequestOptions& o = s.request->options();
    auto row = [&](size_t r) { return std::span<float>(logits_.data() + r * n_vocab, n_vocab); };
    if (plan[e].kind == Kind::kVerify) {
      if (VerifyWindow(s, [&](int64_t j) { return row(first_logit[e] + static_cast<size_t>(j)); })) {
        finished.push_back(&s);
      }
      continue;
    }
    const bool prefill = plan[e].kind == Kind::kPrefill || s.n_computed < s.n_prompt;
    s.n_computed += plan[e].n;
    if (prefill) {
      s.request->AddPrefill(plan[e].n);
      prefill_tokens_.fetch_add(plan[e].n, std::memory_order_relaxed);
    } else {
      s.request->AddDecodeStep();
    }
    if (s.n_computed != static_cast<int64_t>(s.tokens.size())) continue;  // mid-prompt chunk
    const std::span<float> logits = row(first_logit[e]);
    const auto position = static_cast<int64_t>(s.tokens.size());
    const bool fast_row = s.dvr ? !prefill : schedule_ == Schedule::kFast;
    if (fast_row && noise > 0) AddNoise(logits, noise, s.sampling.seed ^ s.arrival, position);
    const int32_t token = SampleToken(logits, s.sampling, position);
    if (s.dvr && !prefill) {
      // A candidate: held until verified.
      s.tokens.push_back(token);
      Check(s.candidates() <= options_.determinism.window, "a window holds at most W candidates");
      std::string ignored;
      const bool stop_string = s.probe.Push(tokenizer_->TokenBytes(token), &ignored);
      s.ready = s.candidates() >= options_.determinism.window ||
                EndsRequest(s, token, static_cast<int64_t>(s.tokens.size()),
                            s.generated() + s.candidates(), stop_string) != FinishReason::kNone;
      continue;
    }
    const float logprob = o.logprobs ? TokenLogprob(logits, token) : 0.0f;
    if (CommitTokens(s, std::span(&token, 1),
                     o.logprobs ? std::span<const float>(&logprob, 1) : std::span<const float>())) {
      finished.push_back(&s);
    }
  }
  for (Sequence* s : finished) {
    requests_finished_.fetch_add(1, std::memory_order_relaxed);
    running_.erase(std::find_if(running_.begin(), running_.end(),
                                [&](const std::unique_ptr<Sequence>& p) { return p.get() == s; }));
  }
  return true;
}

// DESIGN.md §3 step 5. Row j's logits (fixed schedule) predict position n_committed + j.
bool Session::VerifyWindow(Sequence& s, const std::function<std::span<float>(int64_t)>& row) {
  const RequestOptions& o = s.request->options();
  const int64_t n = s.candidates(), base = s.n_committed;
  std::vector<int32_t> commit;
  std::vector<float> logprobs;
  int64_t mismatch = -1;
  for (int64_t j = 0; j < n; ++j) {
    const std::span<float> logits = row(j);
    const int32_t predicted = SampleToken(logits, s.sampling, base + j);
    commit.push_back(predicted);
    if (o.logprobs) logprobs.push_back(TokenLogprob(logits, predicted));
    if (predicted != s.tokens[static_cast<size_t>(base + j)]) {
      mismatch = j;
      break;
    }
  }
  // Testing hook: force a rollback in a fraction of windows, at a position the replay agreed
  // with (the committed output must not change).
  const double inject = options_.determinism.mismatch_injection;
  if (mismatch < 0 && inject > 0 && n > 1 &&
      PhiloxUniform(s.sampling.seed ^ s.arrival, static_cast<uint64_t>(base), 7) < inject) {
    mismatch = static_cast<int64_t>(PhiloxUniform(s.sampling.seed, static_cast<uint64_t>(base), 8) *
                                    static_cast<double>(n - 1));
    commit.resize(static_cast<size_t>(mismatch + 1));
    if (o.logprobs) logprobs.resize(commit.size());
  }
  const int64_t discarded = mismatch < 0 ? 0 : n - mismatch - 1 + (commit.back() != s.tokens[static_cast<size_t>(base + mismatch)] ? 1 : 0);
  s.request->AddVerify(n, discarded);
  tokens_verified_.fetch_add(n, std::memory_order_relaxed);
  verify_passes_.fetch_add(1, std::memory_order_relaxed);
  if (discarded > 0) {
    rollbacks_.fetch_add(1, std::memory_order_relaxed);
    tokens_rolled_back_.fetch_add(discarded, std::memory_order_relaxed);
  }
  s.ready = false;
  const bool done = CommitTokens(s, commit, logprobs);
  if (!done) {
    // Everything before the last committed token now holds fixed-schedule K/V; the rest goes.
    s.n_computed = s.n_committed - 1;
    cache_->Truncate(s.kv_seq, s.n_computed);
    Check(s.candidates() == 0 && cache_->reserved_positions(s.kv_seq) ==
                                     cache_->BlocksFor(s.n_computed) * cache_->block_size(),
          "after a verify pass the cache holds exactly the committed prefix");
  }
  return done;
}

int64_t Session::kv_blocks_in_use() const { return blocks_in_use_.load(); }

void Session::Check(bool ok, const char* invariant) {
  if (ok) return;
  invariant_violations_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kError, "engine invariant violated: ", invariant);
}

int64_t Session::stat(SessionStat which) const {
  switch (which) {
    case SessionStat::kRequestsFinished: return requests_finished_.load();
    case SessionStat::kTokensGenerated: return tokens_generated_.load();
    case SessionStat::kPrefillTokens: return prefill_tokens_.load();
    case SessionStat::kDecodeSteps: return decode_steps_.load();
    case SessionStat::kPreemptions: return preemptions_.load();
    case SessionStat::kTokensVerified: return tokens_verified_.load();
    case SessionStat::kVerifyPasses: return verify_passes_.load();
    case SessionStat::kRollbacks: return rollbacks_.load();
    case SessionStat::kTokensRolledBack: return tokens_rolled_back_.load();
  }
  return 0;
}

std::string Session::StatsJson() const {
  return absl::StrFormat(
      "{\"requests_finished\":%d,\"tokens_generated\":%d,\"tokens_verified\":%d,"
      "\"verify_passes\":%d,\"rollbacks\":%d,\"tokens_rolled_back\":%d,\"prefill_tokens\":%d,"
      "\"decode_steps\":%d,\"preemptions\":%d,\"kv_blocks_in_use\":%d,\"kv_cache_tokens\":%d}",
      stat(SessionStat::kRequestsFinished), stat(SessionStat::kTokensGenerated),
      stat(SessionStat::kTokensVerified), stat(SessionStat::kVerifyPasses),
      stat(SessionStat::kRollbacks), stat(SessionStat::kTokensRolledBack),
      stat(SessionStat::kPrefillTokens), stat(SessionStat::kDecodeSteps),
      stat(SessionStat::kPreemptions), kv_blocks_in_use(), kv_cache_tokens());
}

}  // namespace llm42
