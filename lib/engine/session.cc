#include "lib/engine/session.h"

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
#include "lib/util/utf8.h"

namespace llm42 {
namespace {

constexpr size_t kMaxQueuedRequests = 4096;

uint64_t RandomSeed() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32 | rd()) ^ counter.fetch_add(0x9E3779B97F4A7C15);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const SessionOptions& options) {
  LLM42_RETURN_IF_ERROR(options.Validate());
  if (options.model_path.empty()) return InvalidArgument("no model path was set");
  if (options.backend == "cuda") {
    return UnsupportedError("backend 'cuda' is not available in this build of llm42");
  }
  if (options.backend != "auto" && options.backend != "cpu") {
    return InvalidArgument("unknown backend '", options.backend, "' (auto, cpu, cuda)");
  }
  if (options.determinism.mode == DeterminismMode::kBatchInvariant) {
    return UnsupportedError("determinism mode batch_invariant is not available in this version");
  }
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
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
  s->backend_ = std::make_unique<CpuBackend>(options.threads);
  s->cache_ = std::make_unique<KvCache>(c.n_layer, c.kv_dim(), 1, s->context_length_);
  Log(LogLevel::kInfo, "loaded ", options.model_path, ": ", c.n_layer, " layers, n_embd ",
      c.n_embd, ", vocab ", c.n_vocab, ", context ", s->context_length_);
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

absl::StatusOr<std::shared_ptr<Request>> Session::Submit(const RequestOptions& options,
                                                         void* handle) {
  if (!options.messages.empty()) {
    return UnsupportedError("chat messages need the model's chat template, which this version "
                            "does not render yet; send a prompt");
  }
  if (options.deterministic) {
    if (options_.determinism.mode == DeterminismMode::kOff) {
      return UnsupportedError("deterministic requests are refused: the session's determinism mode is off");
    }
    return UnsupportedError("deterministic requests are not available in this version");
  }
  std::vector<int32_t> prompt;
  if (options.has_prompt_tokens) {
    prompt = options.prompt_tokens;
    const Vocab& vocab = tokenizer_->vocab();
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (!vocab.IsValid(prompt[i])) {
        return InvalidArgument("prompt token #", i, " = ", prompt[i], " is outside the vocabulary (",
                               vocab.size(), " tokens)");
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
  const uint64_t seed = options.has_seed ? options.sampling.seed : RandomSeed();
  auto request = std::make_shared<Request>(options, std::move(prompt), seed);
  request->set_handle(handle);
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("the session is shutting down");
  if (queue_.size() >= kMaxQueuedRequests) {
    return absl::ResourceExhaustedError(absl::StrCat("the request queue is full (", kMaxQueuedRequests, ")"));
  }
  queue_.push_back(request);
  return request;
}

void Session::EngineLoop() {
  for (;;) {
    std::shared_ptr<Request> request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stopping_ || !s->queue_.empty(); },
          this));
      if (stopping_) break;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    Run(*request);
  }
  std::deque<std::shared_ptr<Request>> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(queue_);
  }
  for (auto& r : left) Finish(*r, FinishReason::kCancelled, absl::CancelledError("the session was destroyed"));
}

void Session::Finish(Request& request, FinishReason reason, absl::Status status) {
  request.Commit({}, {}, {}, true, reason, std::move(status));
  requests_finished_.fetch_add(1, std::memory_order_relaxed);
}

void Session::Run(Request& request) {
  const RequestOptions& o = request.options();
  const std::vector<int32_t>& prompt = request.prompt();
  const int32_t n_vocab = tokenizer_->vocab().size();
  const int32_t eos = tokenizer_->vocab().eos();
  auto stopping = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  auto cancelled = [&] { return request.cancel_requested() || stopping(); };
  if (cancelled()) return Finish(request, FinishReason::kCancelled, absl::CancelledError("cancelled"));

  const int32_t slot = cache_->Allocate();
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<int32_t> positions, slots;

  // Prefill in chunks; logits only for the prompt's last position.
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t begin = 0; begin < n_prompt; begin += options_.max_batch_tokens) {
    if (cancelled()) {
      cache_->Release(slot);
      return Finish(request, FinishReason::kCancelled, absl::CancelledError("cancelled"));
    }
    const int32_t end = std::min(n_prompt, begin + options_.max_batch_tokens);
    positions.resize(static_cast<size_t>(end - begin));
    for (int32_t p = begin; p < end; ++p) positions[static_cast<size_t>(p - begin)] = p;
    slots.assign(positions.size(), slot);
    const int32_t last = end - begin - 1;
    const bool final_chunk = end == n_prompt;
    model_->Forward(*backend_, *cache_,
                    ForwardBatch{std::span(prompt).subspan(static_cast<size_t>(begin), positions.size()),
                                 positions, slots,
                                 final_chunk ? std::span<const int32_t>(&last, 1) : std::span<const int32_t>()},
                    logits.data());
    request.AddPrefill(end - begin);
    prefill_tokens_.fetch_add(end - begin, std::memory_order_relaxed);
  }

  SamplingParams sampling = o.sampling;
  sampling.seed = request.seed();
  TextStream text(o.stops);
  int32_t generated = 0;
  int32_t position = n_prompt;  // where the next token goes
  for (;;) {
    if (cancelled()) {
      std::string rest;
      text.Finish(&rest);
      request.Commit({}, {}, rest, true, FinishReason::kCancelled, absl::CancelledError("cancelled"));
      requests_finished_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    const int32_t token = SampleToken(logits, sampling, position);
    const float logprob = o.logprobs ? TokenLogprob(logits, token) : 0.0f;
    ++generated;
    tokens_generated_.fetch_add(1, std::memory_order_relaxed);
    std::string released;
    const bool stop_string = text.Push(tokenizer_->TokenBytes(token), &released);
    FinishReason reason = FinishReason::kNone;
    if (stop_string || (token == eos && !o.ignore_eos)) {
      reason = FinishReason::kStop;
    } else if (generated >= o.max_tokens || position + 1 >= context_length_) {
      reason = FinishReason::kLength;
    }
    if (reason != FinishReason::kNone && !stop_string) text.Finish(&released);
    const bool done = reason != FinishReason::kNone;
    request.Commit(std::span(&token, 1), o.logprobs ? std::span<const float>(&logprob, 1) : std::span<const float>(),
                   released, done, reason, absl::OkStatus());
    if (done) {
      requests_finished_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    const int32_t row = 0;
    model_->Forward(*backend_, *cache_,
                    ForwardBatch{std::span(&token, 1), std::span(&position, 1), std::span(&slot, 1),
                                 std::span(&row, 1)},
                    logits.data());
    request.AddDecodeStep();
    decode_steps_.fetch_add(1, std::memory_order_relaxed);
    ++position;
  }
  cache_->Release(slot);
}

int64_t Session::stat(SessionStat which) const {
  switch (which) {
    case SessionStat::kRequestsFinished: return requests_finished_.load();
    case SessionStat::kTokensGenerated: return tokens_generated_.load();
    case SessionStat::kPrefillTokens: return prefill_tokens_.load();
    case SessionStat::kDecodeSteps: return decode_steps_.load();
    case SessionStat::kTokensVerified:
    case SessionStat::kVerifyPasses:
    case SessionStat::kRollbacks:
    case SessionStat::kTokensRolledBack:
    case SessionStat::kPreemptions: return 0;
  }
  return 0;
}

std::string Session::StatsJson() const {
  return absl::StrFormat(
      "{\"requests_finished\":%d,\"tokens_generated\":%d,\"tokens_verified\":0,"
      "\"verify_passes\":0,\"rollbacks\":0,\"tokens_rolled_back\":0,\"prefill_tokens\":%d,"
      "\"decode_steps\":%d,\"preemptions\":0}",
      stat(SessionStat::kRequestsFinished), stat(SessionStat::kTokensGenerated),
      stat(SessionStat::kPrefillTokens), stat(SessionStat::kDecodeSteps));
}

}  // namespace llm42
