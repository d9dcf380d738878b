#include "lib/engine/session.h"

#include "lib/chat/tool_call_grammar.h"

#include <algorithm>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "lib/util/version.h"
#include "lib/backend/backend_registry.h"
#include "lib/engine/receipt.h"
#include "lib/engine/row_controls.h"
#include "lib/engine/saved_conversation.h"
#include "lib/engine/testing_hooks.h"
#include "lib/model/fingerprint.h"
#include "lib/engine/text_stream.h"
#include "lib/kv/kv_cache.h"
#include "lib/kv/prefix_blocks.h"
#include "lib/format/gguf_reader.h"
#include "lib/model/model_file.h"
#include "lib/model/model_weights.h"
#include "lib/model/model_runner.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/util/status.h"

namespace llm42 {

namespace {

constexpr size_t kMaxQueuedRequests = 4096;

uint64_t RandomSeed() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32 | rd()) ^ counter.fetch_add(0x9E3779B97F4A7C15);
}

}  // namespace

Session::Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const SessionOptions& options, LoadProgress* progress) {
  // The share of the creation each stage ends at: uploading the layers' weights is most of it.
  auto reach = [progress](double fraction) { return progress ? progress->Reach(fraction) : absl::OkStatus(); };
  LLM42_RETURN_IF_ERROR(options.Validate());
  if (options.model_path.empty()) return InvalidArgument("no model path was set");
  std::unique_ptr<Session> s(new Session());
  s->options_ = options;
  s->schedule_ = options.determinism.mode == DeterminismMode::kBatchInvariant ? Schedule::kFixed
                                                                              : Schedule::kFast;
  LLM42_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, OpenModel(options.model_path));
  s->file_ = std::move(file);
  LLM42_RETURN_IF_ERROR(reach(0.05));
  LLM42_ASSIGN_OR_RETURN(s->tokenizer_, Tokenizer::FromGguf(*s->file_));
  s->grammars_ = std::make_unique<GrammarCache>(*s->tokenizer_);
  {
    const Vocab& v = s->tokenizer_->vocab();
    if (!options.chat_template.empty()) {  // the session's own, which must parse
      if (absl::StatusOr<jinja::Template> t = jinja::Template::Parse(options.chat_template); !t.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("the session's chat template: ", t.status().message()));
      }
    }
    s->chat_template_ = ChatTemplate::FromModel(options.chat_template.empty() ? v.chat_template() : options.chat_template,
                                             v.Find("<|im_start|>").has_value(), v.Find("<|start_header_id|>").has_value());
  }
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (options.vocab_only) {
    // Fingerprints work on a tokenizer-only session too; it has no schedule to replay under.
    s->receipts_ = std::make_shared<ReceiptContext>(s->file_, threads, ReceiptSetup{}, false);
    Log(LogLevel::kInfo, "opened the vocabulary of ", options.model_path, " (",
        s->tokenizer_->vocab().size(), " tokens, tokenizer only)");
    return s;
  }
  if (s->file_->tensors().empty()) {
    return FormatError(options.model_path, " has no weights (a vocabulary-only file?); open it "
                       "with vocab_only to tokenize");
  }
  LLM42_RETURN_IF_ERROR(reach(0.1));
  LLM42_ASSIGN_OR_RETURN(s->model_, ModelWeights::Load(s->file_));
  LLM42_RETURN_IF_ERROR(reach(0.15));
  const ModelConfig& c = s->model_->config();
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
  LLM42_ASSIGN_OR_RETURN(s->backend_, CreateBackend(options.backend, BackendOptions{options.threads, *ParseKvDtype(options.kv_dtype)}));
  LLM42_RETURN_IF_ERROR(reach(0.2));
  LLM42_ASSIGN_OR_RETURN(s->runner_, ModelRunner::Create(*s->model_, *s->backend_, s->context_length_,
                                                         [&](int64_t done, int64_t total) {
                                                           return reach(0.2 + 0.7 * static_cast<double>(done) /
                                                                                  static_cast<double>(total));
                                                         }));
  s->model_identity_ = IdentifyModel(*s->file_);
  // Default KV size: every running request at full context, within 40% of the memory the
  // backend has left once the weights are in.
  const int64_t bytes_per_token = s->runner_->kv_bytes_per_token();
  int64_t kv_tokens = options.kv_cache_tokens;
  if (kv_tokens == 0) {
    kv_tokens = std::min<int64_t>(int64_t{s->context_length_} * options.max_running_requests,
                                  s->backend_->available_memory_bytes() * 2 / 5 / bytes_per_token);
    kv_tokens = std::max<int64_t>(kv_tokens, s->context_length_);
  }
  // A KV cache larger than the backend's memory is refused before anything is allocated for it
  // (its block table alone would otherwise throw bad_alloc for absurd sizes).
  const int64_t available = s->backend_->available_memory_bytes();
  if (kv_tokens > available / bytes_per_token) {
    const double mib = static_cast<double>(kv_tokens) * static_cast<double>(bytes_per_token) / (1 << 20);
    return absl::ResourceExhaustedError(absl::StrCat("a KV cache of ", kv_tokens, " tokens needs ", mib, " MiB; ",
                                                     s->backend_->name(), " has ", available >> 20, " MiB"));
  }
  const int64_t blocks = (kv_tokens + KvCache::kDefaultBlockSize - 1) / KvCache::kDefaultBlockSize;
  const bool recurrent = c.n_recurrent() > 0;
  s->cache_ = std::make_unique<KvCache>(blocks, KvCache::kDefaultBlockSize, options.prefix_caching);
  if (absl::Status kv = s->runner_->AllocateKv(*s->cache_); !kv.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a KV cache of ", kv_tokens,
                                                     " tokens on ", s->backend_->name(), ": ", kv.message()));
  }
  if (options.kv_prefault) LLM42_RETURN_IF_ERROR(s->backend_->PrefaultKv());
  RecurrentSlots recurrent_slots;
  if (recurrent) {
    // The prefix cache's state snapshots: a quarter of the K/V's bytes (a snapshot of a large
    // model's state weighs as much as hundreds of positions' K/V), at least two per running
    // request, at most one per block.
    const int64_t slot_bytes = s->runner_->recurrent_shape(1).slot_floats() * 4;
    const int64_t snapshots =
        options.prefix_caching ? std::min(blocks, std::max<int64_t>(2 * options.max_running_requests,
                                                                    kv_tokens * bytes_per_token / 4 / slot_bytes))
                               : 0;
    s->cache_->EnableSnapshots(snapshots);
    recurrent_slots = RecurrentSlots(options.max_running_requests,
                                     std::min<int64_t>(options.max_batch_tokens, int64_t{options.determinism.verify_group} *
                                                                                     (options.determinism.window + 1)),
                                     snapshots);
    const RecurrentShape shape = s->runner_->recurrent_shape(recurrent_slots.n_slots());
    const int64_t bytes = shape.n_slots * shape.slot_floats() * 4;
    if (bytes > s->backend_->available_memory_bytes()) {
      return absl::ResourceExhaustedError(absl::StrCat("the recurrent state of ", shape.n_slots, " slots needs ", bytes >> 20,
                                                       " MiB; ", s->backend_->name(), " has ",
                                                       s->backend_->available_memory_bytes() >> 20, " MiB"));
    }
    LLM42_RETURN_IF_ERROR(s->runner_->AllocateRecurrent(recurrent_slots.n_slots()));
  }
  LLM42_RETURN_IF_ERROR(reach(0.95));
  // A model whose every layer reads a window of recent positions releases the blocks behind it
  // (Scheduler::ReleaseBehindWindows): a sequence then holds at most its window, a step's rows and
  // two partial blocks, and runs to the full context in a cache that holds that much.
  const int64_t window = c.common_window();
  const int64_t window_hold = window + std::max<int64_t>(options.max_batch_tokens, options.determinism.window + 1) +
                              2 * int64_t{KvCache::kDefaultBlockSize};
  s->max_sequence_ = window > 0 && s->cache_->capacity_tokens() >= window_hold
                         ? int64_t{s->context_length_}
                         : std::min<int64_t>(s->context_length_, s->cache_->capacity_tokens());
  {
    ReceiptSetup setup;
    setup.schedule_version = kFixedScheduleVersion;
    setup.backend = s->backend_->name();
    setup.device = s->backend_->device_name();
    setup.kv_dtype = KvDtypeName(s->backend_->kv_dtype());
    setup.max_sequence = s->max_sequence_;
    s->receipts_ = std::make_shared<ReceiptContext>(s->file_, threads, std::move(setup),
                                                    options.determinism.mode == DeterminismMode::kBatchInvariant);
  }
  EngineConfig config;
  config.limits = SchedulerLimits{options.max_batch_tokens, options.max_running_requests,
                                  options.determinism.verify_group, window};
  config.determinism = options.determinism;
  config.schedule = s->schedule_;
  config.max_sequence = s->max_sequence_;
  config.noise_salt = RandomSeed();
  config.device_draws = std::string_view(s->backend_->name()) != "cpu" ||
                        TestingHooks::DrawOnCpuBackend().load(std::memory_order_relaxed) != 0;
  Session* raw = s.get();
  config.parallel_for = [raw](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    raw->backend_->HostParallelFor(n, fn);
  };
  config.recurrent = recurrent_slots;
  s->recurrent_slots_ = recurrent_slots;
  config.copy_recurrent = [raw](int32_t from, int32_t to) { return raw->backend_->CopyRecurrent(from, to); };
  s->engine_ = std::make_unique<Engine>(
      config, *s->tokenizer_, *s->cache_,
      [raw](const ForwardBatch& batch) { return raw->runner_->ForwardView(*raw->cache_, batch); },
      s->stats_);
  Log(LogLevel::kInfo, "loaded ", options.model_path, " on ", s->backend_->name(), ": ", c.n_layer, " layers, n_embd ",
      c.n_embd, ", vocab ", c.n_vocab, ", context ", s->context_length_, ", KV cache ",
      s->cache_->capacity_tokens(), " tokens of ", s->backend_->kv_element_bytes() * 8, "-bit K/V");
  s->thread_ = std::thread([p = s.get()] { p->EngineLoop(); });
  return s;
}

Session::~Session() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::string> Session::RenderChat(
    const std::vector<std::pair<std::string, std::string>>& messages, bool thinking) const {
  if (!chat_template_.ok()) return chat_template_.status();
  std::vector<ChatMessage> conv;
  for (const auto& [role, content] : messages) conv.push_back(ChatMessage{role, content});
  const Vocab& v = tokenizer_->vocab();
  return chat_template_->Render(conv, v.bos() >= 0 ? v.text(v.bos()) : std::string(),
                                v.eos() >= 0 ? v.text(v.eos()) : std::string(), thinking);
}

absl::StatusOr<std::string> Session::ApplyChatTemplate(std::string_view messages_json,
                                                       std::string_view options_json) const {
  const Vocab& v = tokenizer_->vocab();
  return ChatTemplate::Apply(chat_template_.ok() ? &*chat_template_ : nullptr, messages_json, options_json,
                             v.bos() >= 0 ? v.text(v.bos()) : std::string(), v.eos() >= 0 ? v.text(v.eos()) : std::string());
}

absl::StatusOr<std::string> Session::ParseChatOutput(std::string_view text) const {
  LLM42_ASSIGN_OR_RETURN(const ChatOutput out,
                         llm42::ParseChatOutput(chat_template_.ok() ? chat_template_->syntax : ChatSyntax::kPlain, text));
  return out.ToJson();
}

absl::StatusOr<std::string> Session::ToolCallGrammar(std::string_view tools_json, std::string_view tool_choice,
                                                     bool parallel) const {
  LLM42_ASSIGN_OR_RETURN(ToolChoice choice, ParseToolChoice(tool_choice));
  choice.parallel = parallel;
  return llm42::ToolCallGrammar(chat_template_.ok() ? chat_template_->syntax : ChatSyntax::kPlain, tools_json, choice);
}

int64_t Session::kv_bytes_per_token() const { return runner_->kv_bytes_per_token(); }

int64_t Session::kv_cache_tokens() const { return cache_ ? cache_->capacity_tokens() : 0; }

absl::StatusOr<std::shared_ptr<Request>> Session::Submit(const RequestOptions& options,
                                                         void* handle) {
  if (model_ == nullptr) {
    return absl::FailedPreconditionError("this session is tokenizer-only (vocab_only): it "
                                         "cannot generate");
  }
  LLM42_RETURN_IF_ERROR(options.Validate());
  if (!options.messages.empty() && (options.has_prompt_text || options.has_prompt_tokens)) {
    return InvalidArgument("the request has both a prompt and chat messages; send one");
  }
  const RequestOptions::Parent* parent = options.parent ? &*options.parent : nullptr;
  if (parent != nullptr && parent->session != this) {
    return InvalidArgument("the parent request belongs to another session");
  }
  if (parent != nullptr && !options.messages.empty() && parent->messages.empty()) {
    return InvalidArgument("chat messages continue only a request that was itself a chat");
  }
  // A chat continuation renders the whole conversation (the prefix cache finds what it shares
  // with the parent's tokens); the request keeps it, for its own continuations.
  RequestOptions effective = options;
  if (parent != nullptr && !options.messages.empty()) {
    effective.messages = parent->messages;
    effective.messages.insert(effective.messages.end(), options.messages.begin(), options.messages.end());
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
    LLM42_RETURN_IF_ERROR(tokenizer_->vocab().CheckIds(prompt));
  } else if (options.has_prompt_text) {
    // A continuation's text follows its history: no BOS.
    prompt = tokenizer_->Encode(options.prompt_text, /*add_special=*/parent == nullptr, /*parse_special=*/true);
  } else if (!effective.messages.empty()) {
    LLM42_ASSIGN_OR_RETURN(std::string text, RenderChat(effective.messages, effective.thinking));
    // The template writes BOS itself, as Hugging Face's apply_chat_template does.
    prompt = tokenizer_->Encode(text, /*add_special=*/false, /*parse_special=*/true);
  }
  if (parent != nullptr && options.messages.empty()) prompt.insert(prompt.begin(), parent->tokens.begin(), parent->tokens.end());
  if (prompt.empty()) return InvalidArgument("the request has no prompt");
  if (static_cast<int64_t>(prompt.size()) >= context_length_) {
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", prompt.size(),
                                              " tokens, which leaves no room in the context of ",
                                              context_length_, " tokens"));
  }
  if (static_cast<int64_t>(prompt.size()) >= max_sequence_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the prompt has ", prompt.size(), " tokens; the whole KV cache holds ",
        cache_->capacity_tokens()));
  }
  const uint64_t seed = options.has_seed        ? options.sampling.seed
                        : options.deterministic ? options_.determinism.default_seed
                                                : RandomSeed();
  for (const auto& [token, bias] : options.controls.bias) {
    if (!tokenizer_->vocab().IsValid(token)) {
      return absl::OutOfRangeError(absl::StrCat("logit bias for token ", token, ", outside the vocabulary of ",
                                                tokenizer_->vocab().size(), " tokens"));
    }
  }
  std::unique_ptr<GrammarTrace> grammar;
  if (options.output_grammar) {
    LLM42_ASSIGN_OR_RETURN(std::shared_ptr<const TokenGrammar> compiled, grammars_->Get(*options.output_grammar));
    grammar = std::make_unique<GrammarTrace>(std::move(compiled));
  }
  SamplingParams sampling = options.sampling;
  sampling.seed = seed;
  effective.parent.reset();
  auto request = std::make_shared<Request>(std::move(effective), std::move(prompt), seed);
  request->set_handle(handle);
  request->set_owner(this);
  request->set_receipts(receipts_);
  const bool dvr = options.deterministic && options_.determinism.mode == DeterminismMode::kSelective;
  auto seq = std::make_unique<Sequence>(request, 0, sampling, dvr, engine_->initial_window());
  seq->fixed_kv = dvr || schedule_ == Schedule::kFixed;
  seq->grammar = std::move(grammar);
  {
    // Controls that leave nothing to draw at the first output position are known now.
    std::vector<LogitEdit> edits;
    std::vector<uint64_t> allowed;
    const auto n_vocab = static_cast<int64_t>(tokenizer_->vocab().size());
    if (const RowLeft left = RowControls(*seq, seq->n_prompt, n_vocab, &edits, &allowed); left != RowLeft::kTokens) {
      return NothingToDraw(*seq, seq->n_prompt, left);
    }
  }
  MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("the session is shutting down");
  if (incoming_.size() >= kMaxQueuedRequests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request queue is full (", kMaxQueuedRequests, ")"));
  }
  seq->arrival = next_arrival_++;
  incoming_.push_back(std::move(seq));
  return request;
}

void Session::EngineLoop() {
  std::deque<std::function<void()>> tasks;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (engine_->idle()) {
        mu_.Await(absl::Condition(
            +[](Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->stopping_ || !s->incoming_.empty() || !s->tasks_.empty();
            },
            this));
      }
      if (stopping_) break;
      for (auto& seq : incoming_) engine_->Enqueue(std::move(seq));
      incoming_.clear();
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    tasks.clear();
    engine_->Step();
  }
  {
    MutexLock lock(&mu_);
    for (auto& seq : incoming_) engine_->Enqueue(std::move(seq));
    incoming_.clear();
  }
  engine_->FinishAll(FinishReason::kCancelled, absl::CancelledError("the session was destroyed"));
  // Tasks queued before the stop still run (the cache and backend live until the thread ends),
  // so that no caller of RunOnEngine waits forever.
  MutexLock lock(&mu_);
  for (auto& task : tasks_) task();
  tasks_.clear();
}

absl::Status Session::RunOnEngine(std::function<absl::Status()> task) {
  struct Done {
    Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto d = std::make_shared<Done>();
  {
    MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the session is shutting down");
    tasks_.push_back([d, task = std::move(task)] {
      absl::Status st = task();
      MutexLock lock(&d->mu);
      d->status = std::move(st);
      d->done = true;
    });
  }
  MutexLock lock(&d->mu);
  d->mu.Await(absl::Condition(&d->done));
  return d->status;
}

SavedConversation Session::Setup() const {
  SavedConversation c;
  c.model = model_identity_;
  c.llm42_version = std::string(kLibraryVersion);
  c.schedule_version = kFixedScheduleVersion;
  c.backend = backend_->name();
  c.kv_dtype = KvDtypeName(backend_->kv_dtype());
  c.block_size = cache_->block_size();
  c.n_layers = model_->config().n_kv_layers();
  c.kv_dim = model_->config().max_kv_dim();  // the widest layer's: the model's identity covers the others
  c.kv_element_bytes = static_cast<int64_t>(backend_->kv_element_bytes());
  c.kv_block_bytes = runner_->kv_bytes_per_token() * cache_->block_size();  // the widths as they are
  return c;
}

absl::StatusOr<ReceiptCheck> Session::VerifyReceipt(std::string_view bytes) {
  LLM42_ASSIGN_OR_RETURN(Receipt receipt, ParseReceipt(bytes));
  if (model_ == nullptr) {
    return absl::FailedPreconditionError("this session is tokenizer-only (vocab_only): it cannot replay a receipt");
  }
  ReceiptCheck setup = CompareSetup(receipt, receipts_->Setup());
  if (setup.outcome != ReceiptCheck::Outcome::kReproduced) return setup;
  // The replay runs under the receipt's limit on positions (ReplayOptions); it must fit this
  // session's, or the replay would be cut short where the original was not.
  const int64_t reached = receipt.prompt_tokens_size() + receipt.output_tokens_size();
  if (reached > max_sequence_) {
    return absl::OutOfRangeError(absl::StrCat(
        "the receipt's sequence reaches ", reached, " positions; this session holds at most ", max_sequence_,
        " (context length ", context_length_, ", KV cache ", cache_->capacity_tokens(),
        " tokens): replay it in a session with a context of at least ", reached));
  }
  LLM42_ASSIGN_OR_RETURN(RequestOptions replay_options, ReplayOptions(receipt));
  LLM42_ASSIGN_OR_RETURN(std::shared_ptr<Request> replay, Submit(replay_options, nullptr));
  replay->Wait(-1);
  LLM42_RETURN_IF_ERROR(replay->status());
  return CompareOutput(receipt, replay->output_tokens(), replay->logprobs(), replay->finish_reason());
}

absl::Status Session::SaveConversation(const Request& r, const std::string& path) {
  if (r.owner() != this) return absl::InvalidArgumentError("the request belongs to another session");
  LLM42_ASSIGN_OR_RETURN(RequestOptions::Parent parent, r.AsParent());
  SavedConversation c = Setup();
  c.tokens = std::move(parent.tokens);
  c.messages = std::move(parent.messages);
  LLM42_RETURN_IF_ERROR(RunOnEngine([&]() -> absl::Status {
    // A model with recurrent layers: their state after the last block saved too.
    const RecurrentSlots& slots = recurrent_slots_;
    LLM42_ASSIGN_OR_RETURN(PrefixBlocks blocks,
                           CopyCachedPrefixOut(
                               *cache_, c.tokens, c.block_bytes(),
                               [&](int32_t id, std::span<uint8_t> out) { return backend_->ReadKvBlock(id, out); },
                               [&](int32_t snapshot) {
                                 c.state.resize(static_cast<size_t>(runner_->recurrent_shape(1).slot_floats()));
                                 return backend_->ReadRecurrent(slots.snapshot(snapshot), c.state);
                               }));
    c.block_fixed = std::move(blocks.fixed);
    c.kv = std::move(blocks.kv);
    return absl::OkStatus();
  }));
  return WriteSavedConversation(path, c);
}

absl::StatusOr<RequestOptions::Parent> Session::LoadConversation(const std::string& path) {
  LLM42_ASSIGN_OR_RETURN(SavedConversation c, ReadSavedConversation(path));
  LLM42_RETURN_IF_ERROR(CheckSameSetup(c, Setup(), path));
  const Vocab& vocab = tokenizer_->vocab();
  for (int32_t t : c.tokens) {
    if (!vocab.IsValid(t)) return absl::DataLossError(absl::StrCat(path, " holds token ", t, ", outside the vocabulary"));
  }
  LLM42_RETURN_IF_ERROR(RunOnEngine([&]() -> absl::Status {
    PrefixBlocks blocks{std::move(c.block_fixed), std::move(c.kv)};
    if (!c.state.empty() && static_cast<int64_t>(c.state.size()) != runner_->recurrent_shape(1).slot_floats()) {
      return absl::DataLossError(absl::StrCat(path, " holds a recurrent state of ", c.state.size(), " values, not this model's ",
                                              runner_->recurrent_shape(1).slot_floats()));
    }
    SnapshotFn write_state;
    if (!c.state.empty()) {
      write_state = [&](int32_t snapshot) {
        return backend_->WriteRecurrent(recurrent_slots_.snapshot(snapshot), c.state);
      };
    }
    const absl::Status st =
        CopyPrefixIn(*cache_, c.tokens, c.block_bytes(), blocks,
                     [&](int32_t id, std::span<const uint8_t> in) { return backend_->WriteKvBlock(id, in); }, write_state);
    if (absl::IsResourceExhausted(st)) {
      return absl::ResourceExhaustedError(absl::StrCat("the KV cache cannot hold the saved positions of ", path, ": ",
                                                       st.message()));
    }
    return st;
  }));
  return RequestOptions::Parent{this, std::move(c.tokens), std::move(c.messages)};
}

int64_t Session::stat(Stat which) const { return stats_.Get(which); }

std::string Session::StatsJson() const { return stats_.Json(kv_cache_tokens()); }

}  // namespace llm42
