#include "lib/engine/grammar_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/tokenizer/tokenizer.h"

namespace llm42 {

absl::StatusOr<std::shared_ptr<const TokenGrammar>> GrammarCache::Get(const RequestOptions::OutputGrammar& g) {
  MutexLock lock(&mu_);
  const std::string key = absl::StrCat(static_cast<int32_t>(g.kind), ":", g.source);
  // The grammar moves to the end of the recent ones.
  auto keep = [&](const std::shared_ptr<const TokenGrammar>& g) {
    recent_.erase(std::remove(recent_.begin(), recent_.end(), g), recent_.end());
    recent_.push_back(g);
    if (recent_.size() > kKeep) recent_.erase(recent_.begin());
  };
  auto it = grammars_.find(key);
  if (it != grammars_.end()) {
    if (std::shared_ptr<const TokenGrammar> live = it->second.lock()) {
      keep(live);
      return live;
    }
    grammars_.erase(it);
  }
  if (token_bytes_.empty()) {
    const Vocab& vocab = tokenizer_.vocab();
    token_bytes_.reserve(static_cast<size_t>(vocab.size()));
    for (int32_t id = 0; id < vocab.size(); ++id) {
      token_bytes_.push_back(tokenizer_.TokenBytes(id));
      if (vocab.IsEndOfGeneration(id)) end_tokens_.push_back(id);
    }
  }
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> compiled =
      TokenGrammar::Create(*g.grammar, token_bytes_, end_tokens_);
  if (!compiled.ok()) return compiled.status();
  // Drop entries of grammars no request holds any more.
  for (auto e = grammars_.begin(); e != grammars_.end();) e = e->second.expired() ? grammars_.erase(e) : std::next(e);
  grammars_[key] = *compiled;
  keep(*compiled);
  return compiled;
}

}  // namespace llm42
