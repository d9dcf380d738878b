#ifndef LLM42_ENGINE_GRAMMAR_CACHE_H_
#define LLM42_ENGINE_GRAMMAR_CACHE_H_

// A session's output grammars compiled against its vocabulary (token_grammar.h), shared by every
// request with the same grammar or schema text, so that their masks are computed once. Kept
// while a request uses them, and the kKeep most recently used besides (a schema a program sends
// request after request keeps its masks and tables; each grammar's are bounded, token_grammar.h).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "lib/engine/options.h"
#include "lib/grammar/token_grammar.h"
#include "lib/util/mutex.h"

namespace llm42 {

class Tokenizer;

class GrammarCache {
 public:
  explicit GrammarCache(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // INVALID_ARGUMENT when no token of the vocabulary can begin the grammar's output. Thread-safe.
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> Get(const RequestOptions::OutputGrammar& g);

 private:
  const Tokenizer& tokenizer_;
  Mutex mu_;
  std::vector<std::string> token_bytes_ ABSL_GUARDED_BY(mu_);  // per id, filled on first use
  std::vector<int32_t> end_tokens_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::weak_ptr<const TokenGrammar>> grammars_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kKeep = 4;
  std::vector<std::shared_ptr<const TokenGrammar>> recent_ ABSL_GUARDED_BY(mu_);  // most recent last
};

}  // namespace llm42

#endif  // LLM42_ENGINE_GRAMMAR_CACHE_H_
