#include "lib/grammar/token_grammar.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <utility>

namespace llm42 {
namespace {

// Memory the cached masks of one grammar may hold.
constexpr size_t kCacheBytes = size_t{32} << 20;

}  // namespace

TokenGrammar::TokenGrammar(const Grammar& grammar, std::vector<std::string> token_bytes,
                           std::vector<int32_t> end_tokens)
    : automaton_(grammar), bytes_(std::move(token_bytes)), end_tokens_(std::move(end_tokens)) {
  std::sort(end_tokens_.begin(), end_tokens_.end());
  max_cached_ = std::max<size_t>(64, kCacheBytes / ((bytes_.size() + 63) / 64 * 8 + 1));
  intervals_ = automaton_.CodePointIntervals();
  bmp_interval_.resize(0x10000);
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    bmp_interval_[cp] = static_cast<uint16_t>(std::upper_bound(intervals_.begin(), intervals_.end(), cp) - intervals_.begin() - 1);
  }
  // The tokens as symbols, grouped.
  std::vector<std::pair<std::vector<uint32_t>, int32_t>> tokens;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty()) tokens.emplace_back(Symbols(bytes_[id]), static_cast<int32_t>(id));
  }
  std::sort(tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (symbols_.empty() || tokens[i].first != symbols_.back()) {
      const uint32_t shared =
          symbols_.empty() ? 0
                           : static_cast<uint32_t>(std::mismatch(symbols_.back().begin(), symbols_.back().end(),
                                                                 tokens[i].first.begin(), tokens[i].first.end())
                                                       .first -
                                                   symbols_.back().begin());
      symbols_.push_back(std::move(tokens[i].first));
      shared_.push_back(shared);
      first_.push_back(static_cast<uint32_t>(members_.size()));
    }
    members_.push_back(tokens[i].second);
  }
  first_.push_back(static_cast<uint32_t>(members_.size()));
}

std::vector<uint32_t> TokenGrammar::Symbols(const std::string& bytes) const {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < bytes.size();) {
    // A whole, well-formed code point from i: its interval; else the byte at i, raw.
    Utf8Partial p;
    size_t j = i;
    Utf8Partial::Push r = Utf8Partial::Push::kPartial;
    while (j < bytes.size() && (r = p.Take(static_cast<uint8_t>(bytes[j]))) == Utf8Partial::Push::kPartial) ++j;
    if (j < bytes.size() && r == Utf8Partial::Push::kComplete) {
      out.push_back(static_cast<uint32_t>(IntervalOf(p.bits)));
      i = j + 1;
    } else {
      out.push_back(kRawByte | static_cast<uint8_t>(bytes[i]));
      ++i;
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const TokenGrammar>> TokenGrammar::Create(const Grammar& grammar,
                                                                         std::vector<std::string> token_bytes,
                                                                         std::vector<int32_t> end_tokens) {
  std::shared_ptr<const TokenGrammar> g(new TokenGrammar(grammar, std::move(token_bytes), std::move(end_tokens)));
  const GrammarState initial = g->automaton_.Initial();
  const std::shared_ptr<const Mask> first = g->Allowed(initial);
  const bool any = std::any_of(first->begin(), first->end(), [](uint64_t w) { return w != 0; });
  if (!any && !g->automaton_.CanEnd(initial)) {
    return absl::InvalidArgumentError("no token of the model's vocabulary can begin a sentence of the grammar");
  }
  return g;
}

size_t TokenGrammar::IntervalOf(uint32_t cp) const {
  if (cp < bmp_interval_.size()) return bmp_interval_[cp];
  return static_cast<size_t>(std::upper_bound(intervals_.begin(), intervals_.end(), cp) - intervals_.begin()) - 1;
}

int32_t TokenGrammar::Intern(GrammarState s) const {
  std::vector<int32_t> key = s.Key();
  auto [it, added] = state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (added) {
    states_.push_back(std::move(s));
    next_.resize(next_.size() + intervals_.size(), kUnknown);
  }
  return it->second;
}

int32_t TokenGrammar::NextInInterval(int32_t id, size_t interval) const {
  const size_t at = static_cast<size_t>(id) * intervals_.size() + interval;
  if (next_[at] != kUnknown) return next_[at];
  GrammarState out;
  const int32_t next = automaton_.AcceptCodePoint(states_[static_cast<size_t>(id)], intervals_[interval], &out)
                           ? Intern(std::move(out))
                           : kDead;
  next_[at] = next;  // (Intern may have grown the table: index it again)
  return next;
}

bool TokenGrammar::Next(const At& at, uint8_t byte, At* out) const {
  Utf8Partial p = at.utf8;
  switch (p.Take(byte)) {
    case Utf8Partial::Push::kRefused:
      return false;
    case Utf8Partial::Push::kComplete:
      out->id = NextInInterval(at.id, IntervalOf(p.bits));
      out->utf8 = Utf8Partial{};
      return out->id != kDead;
    case Utf8Partial::Push::kPartial:
      break;
  }
  // Some code point the bytes can begin steps on: one of the intervals their range meets.
  const uint32_t lo = p.lowest(), hi = p.highest();
  if (lo > hi) return false;
  for (size_t i = IntervalOf(lo), last = IntervalOf(hi); i <= last; ++i) {
    if (NextInInterval(at.id, i) != kDead) {
      *out = At{at.id, p};
      return true;
    }
  }
  return false;
}

bool TokenGrammar::NextSymbol(const At& at, uint32_t symbol, At* out) const {
  if (symbol & kRawByte) return Next(at, static_cast<uint8_t>(symbol), out);
  if (at.utf8.need != 0) return false;  // a whole code point where a begun one needs its next byte
  out->id = NextInInterval(at.id, symbol);
  out->utf8 = Utf8Partial{};
  return out->id != kDead;
}

TokenGrammar::Mask TokenGrammar::Compute(const GrammarState& s) const {
  Mask mask((bytes_.size() + 63) / 64, 0);
  MutexLock lock(&dfa_mu_);
  if (states_.size() > kMaxStates) {
    state_ids_.clear();
    states_.clear();
    next_.clear();
  }
  GrammarState whole = s;
  whole.utf8 = Utf8Partial{};
  std::vector<At> depth(1, At{Intern(std::move(whole)), s.utf8});
  size_t valid = 0;  // depth[0..valid] are the places after the current group's first symbols
  for (size_t g = 0; g < symbols_.size();) {
    const std::vector<uint32_t>& t = symbols_[g];
    if (depth.size() < t.size() + 1) depth.resize(t.size() + 1);
    size_t k = std::min<size_t>(shared_[g], valid);
    bool refused = false;
    for (; k < t.size(); ++k) {
      if (!NextSymbol(depth[k], t[k], &depth[k + 1])) {
        refused = true;
        break;
      }
    }
    if (!refused) {
      for (uint32_t m = first_[g]; m < first_[g + 1]; ++m) {
        const auto id = static_cast<size_t>(members_[m]);
        mask[id / 64] |= uint64_t{1} << (id % 64);
      }
      valid = t.size();
      ++g;
      continue;
    }
    // Every group that shares t's first k + 1 symbols is refused as well.
    valid = k;
    for (++g; g < symbols_.size() && shared_[g] > k; ++g) {
    }
  }
  return mask;
}

std::shared_ptr<const TokenGrammar::Mask> TokenGrammar::Allowed(const GrammarState& s) const {
  std::vector<int32_t> key = s.Key();
  {
    MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  auto mask = std::make_shared<const Mask>(Compute(s));
  MutexLock lock(&mu_);
  if (cache_.size() >= max_cached_) cache_.clear();
  cache_.emplace(std::move(key), mask);
  return mask;
}

bool TokenGrammar::IsEndToken(int32_t id) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), id);
}

bool TokenGrammar::MaskLogits(const GrammarState& s, bool allow_end, std::span<float> logits) const {
  const std::shared_ptr<const Mask> mask = Allowed(s);
  // The end tokens add no bytes, so the mask clears them: keep their logits where they may come.
  std::vector<std::pair<size_t, float>> ends;
  if (allow_end && automaton_.CanEnd(s)) {
    for (int32_t id : end_tokens_) {
      if (static_cast<size_t>(id) < logits.size()) ends.emplace_back(static_cast<size_t>(id), logits[static_cast<size_t>(id)]);
    }
  }
  const size_t n = std::min(logits.size(), bytes_.size());
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  bool any = !ends.empty();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = (*mask)[w];
    any |= bits != 0;
    float* row = logits.data() + w * 64;
    const size_t width = std::min<size_t>(64, n - w * 64);
    if (bits == 0) {
      std::fill_n(row, width, kNone);
      continue;
    }
    // The refused tokens of the word, lowest first.
    for (uint64_t refused = ~bits & (width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1); refused != 0;
         refused &= refused - 1) {
      row[std::countr_zero(refused)] = kNone;
    }
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -std::numeric_limits<float>::infinity();
  for (const auto& [id, logit] : ends) logits[id] = logit;
  return any;
}

bool TokenGrammar::Advance(const GrammarState& s, int32_t id, GrammarState* out) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size() || bytes_[static_cast<size_t>(id)].empty()) return false;
  GrammarState cur = s;
  for (char c : bytes_[static_cast<size_t>(id)]) {
    if (!automaton_.Step(cur, static_cast<uint8_t>(c), out)) return false;
    std::swap(cur, *out);
  }
  *out = std::move(cur);
  return true;
}

}  // namespace llm42
