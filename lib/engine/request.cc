#include "lib/engine/request.h"

#include <algorithm>

#include "lib/util/utf8.h"

namespace llm42 {

Request::Request(RequestOptions options, std::vector<int32_t> prompt, uint64_t seed)
    : options_(std::move(options)), prompt_(std::move(prompt)), seed_(seed) {
  MutexLock lock(&mu_);
  counts_[static_cast<size_t>(Stat::kTimeToFirstTokenUs)] = -1;
}

absl::Status Request::ReadTokens(int32_t* out, size_t capacity, size_t* n, int32_t timeout_ms) {
  MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || tokens_read_ < tokens_.size();
  };
  mu_.AwaitMs(absl::Condition(&ready), timeout_ms);
  const size_t available = tokens_.size() - tokens_read_;
  if (available == 0) {
    *n = 0;
    return finished_ ? absl::OkStatus() : absl::DeadlineExceededError("no new tokens before the timeout");
  }
  const size_t count = std::min(available, capacity);
  if (count == 0) {
    *n = available;
    return absl::OutOfRangeError("buffer capacity is 0");
  }
  std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(tokens_read_), count, out);
  tokens_read_ += count;
  *n = count;
  return absl::OkStatus();
}

absl::Status Request::ReadText(char* out, size_t capacity, size_t* n, int32_t timeout_ms) {
  MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || text_read_ < text_.size();
  };
  mu_.AwaitMs(absl::Condition(&ready), timeout_ms);
  const size_t available = text_.size() - text_read_;
  if (available == 0) {
    *n = 0;
    return finished_ ? absl::OkStatus() : absl::DeadlineExceededError("no new text before the timeout");
  }
  // Largest prefix that fits and ends on a character boundary.
  size_t count = 0;
  while (count < available) {
    const size_t len = Utf8SequenceLength(static_cast<unsigned char>(text_[text_read_ + count]));
    if (count + len > capacity) break;
    count += len;
  }
  if (count == 0) {
    *n = available;
    return absl::OutOfRangeError("buffer too small for the next character");
  }
  std::copy_n(text_.begin() + static_cast<std::ptrdiff_t>(text_read_), count, out);
  text_read_ += count;
  *n = count;
  return absl::OkStatus();
}

bool Request::Wait(int32_t timeout_ms) {
  MutexLock lock(&mu_);
  return mu_.AwaitMs(absl::Condition(&finished_), timeout_ms);
}

void Request::DetachCallback() {
  MutexLock lock(&callback_mu_);
  callback_enabled_ = false;
}

bool Request::finished() const {
  MutexLock lock(&mu_);
  return finished_;
}

absl::Status Request::status() const {
  MutexLock lock(&mu_);
  return status_;
}

FinishReason Request::finish_reason() const {
  MutexLock lock(&mu_);
  return reason_;
}

std::vector<int32_t> Request::output_tokens() const {
  MutexLock lock(&mu_);
  return tokens_;
}

std::string Request::output_text() const {
  MutexLock lock(&mu_);
  return text_;
}

std::vector<float> Request::logprobs() const {
  MutexLock lock(&mu_);
  return logprobs_;
}

std::vector<TopLogprob> Request::top_logprobs() const {
  MutexLock lock(&mu_);
  return top_logprobs_;
}

std::vector<float> Request::prompt_logprobs() const {
  MutexLock lock(&mu_);
  return prompt_logprobs_;
}

void Request::AddPromptLogprobs(std::span<const float> values) {
  MutexLock lock(&mu_);
  prompt_logprobs_.insert(prompt_logprobs_.end(), values.begin(), values.end());
}

int64_t Request::stat(Stat which) const {
  MutexLock lock(&mu_);
  if (which == Stat::kTokensGenerated) return static_cast<int64_t>(tokens_.size());
  return IsRequestStat(which) ? counts_[static_cast<size_t>(which)] : 0;
}

void Request::Count(Stat which, int64_t n) {
  MutexLock lock(&mu_);
  counts_[static_cast<size_t>(which)] += n;
}

absl::StatusOr<RequestOptions::Parent> Request::AsParent() const {
  MutexLock lock(&mu_);
  if (!finished_) return absl::FailedPreconditionError("only a finished request can be continued");
  RequestOptions::Parent p;
  p.session = owner_;
  p.tokens = prompt_;
  p.tokens.insert(p.tokens.end(), tokens_.begin(), tokens_.end());
  if (!options_.messages.empty()) {
    p.messages = options_.messages;
    p.messages.emplace_back("assistant", text_);
  }
  return p;
}

void Request::Commit(std::span<const int32_t> tokens, std::span<const float> logprobs,
                     std::span<const TopLogprob> top, const std::string& text, bool finished, FinishReason reason,
                     absl::Status status) {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    int64_t& ttft_us = counts_[static_cast<size_t>(Stat::kTimeToFirstTokenUs)];
    if (!tokens.empty() && ttft_us < 0) ttft_us = absl::ToInt64Microseconds(absl::Now() - created_);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    logprobs_.insert(logprobs_.end(), logprobs.begin(), logprobs.end());
    top_logprobs_.insert(top_logprobs_.end(), top.begin(), top.end());
    text_ += text;
  }
  // The callback runs before `finished` is published, so that when Wait returns every
  // callback has been delivered.
  if (options_.callback != nullptr && (!tokens.empty() || !text.empty() || finished)) {
    MutexLock lock(&callback_mu_);
    if (callback_enabled_) {
      options_.callback(options_.callback_user_data, handle_, tokens.data(), tokens.size(),
                        text.data(), text.size(), finished ? 1 : 0);
    }
  }
  std::vector<std::pair<std::shared_ptr<Watcher>, uint64_t>> watchers;
  {
    MutexLock lock(&mu_);
    if (finished) {
      finished_ = true;
      reason_ = reason;
      status_ = std::move(status);
    }
    if (!tokens.empty() || !text.empty() || finished) watchers = watchers_;
  }
  for (const auto& [watcher, tag] : watchers) watcher->Notify(tag);
}

void Request::Watch(std::shared_ptr<Watcher> watcher, uint64_t tag) {
  bool news = false;
  {
    MutexLock lock(&mu_);
    auto it = std::find_if(watchers_.begin(), watchers_.end(), [&](const auto& w) { return w.first == watcher; });
    if (it != watchers_.end()) {
      it->second = tag;
    } else {
      watchers_.emplace_back(watcher, tag);
    }
    news = finished_ || tokens_read_ < tokens_.size() || text_read_ < text_.size();
  }
  if (news) watcher->Notify(tag);
}

void Request::Unwatch(const Watcher* watcher) {
  MutexLock lock(&mu_);
  std::erase_if(watchers_, [&](const auto& w) { return watcher == nullptr || w.first.get() == watcher; });
}

}  // namespace llm42
