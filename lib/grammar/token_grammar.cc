#include "lib/grammar/token_grammar.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "lib/numerics/logit_edit.h"

namespace llm42 {
namespace {

// Memory the cached masks of one grammar may hold.
constexpr size_t kCacheBytes = size_t{16} << 20;

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
  for (size_t d = 0; d < kSkipLevels; ++d) {
    skip_[d].resize(symbols_.size());
    for (size_t g = symbols_.size(); g-- > 0;) {
      const bool next_apart = g + 1 >= symbols_.size() || shared_[g + 1] <= d;
      skip_[d][g] = static_cast<uint32_t>(next_apart ? g + 1 : skip_[d][g + 1]);
    }
  }
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
    bool left = false;
    for (const auto& stack : s.stacks) left |= !stack.empty() && stack.back() == automaton_.sentinel();
    left_.push_back(left);
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

void TokenGrammar::Walk(int32_t start, const Utf8Partial& utf8, Mask* accepted,
                        std::vector<std::pair<uint32_t, uint32_t>>* leaving) const {
  std::vector<At> depth(1, At{start, utf8});
  std::vector<uint32_t> left;  // depths of the current prefix where a stack has left the top
  size_t valid = 0;            // depth[0..valid] are the places after the current group's first symbols
  // Inside a code point, only groups that begin with its continuation bytes can go on: a range.
  size_t g = 0, end = symbols_.size();
  if (utf8.need != 0) {
    auto first_symbol = [](const std::vector<uint32_t>& t, uint32_t v) { return t.front() < v; };
    g = static_cast<size_t>(std::lower_bound(symbols_.begin(), symbols_.end(), kRawByte | 0x80u, first_symbol) -
                            symbols_.begin());
    end = static_cast<size_t>(std::lower_bound(symbols_.begin(), symbols_.end(), kRawByte | 0xC0u, first_symbol) -
                              symbols_.begin());
  }
  auto leaves = [&](size_t g, size_t k) {  // group g, refused at symbol k: where it may go on beneath
    for (uint32_t j : left) {
      if (j <= k) leaving->emplace_back(static_cast<uint32_t>(g), j);
    }
  };
  while (g < end) {
    const std::vector<uint32_t>& t = symbols_[g];
    if (depth.size() < t.size() + 1) depth.resize(t.size() + 1);
    size_t k = std::min<size_t>(shared_[g], valid);
    while (!left.empty() && left.back() > k) left.pop_back();
    bool refused = false;
    for (; k < t.size(); ++k) {
      if (!NextSymbol(depth[k], t[k], &depth[k + 1])) {
        refused = true;
        break;
      }
      if (leaving != nullptr && depth[k + 1].utf8.need == 0 && left_[static_cast<size_t>(depth[k + 1].id)]) {
        left.push_back(static_cast<uint32_t>(k + 1));
      }
    }
    if (!refused) {
      for (uint32_t m = first_[g]; m < first_[g + 1]; ++m) {
        const auto id = static_cast<size_t>(members_[m]);
        (*accepted)[id / 64] |= uint64_t{1} << (id % 64);
      }
      valid = t.size();
      ++g;
      continue;
    }
    // Every group that shares t's first k + 1 symbols is refused there as well.
    valid = k;
    const bool any_left = leaving != nullptr && !left.empty();
    if (any_left) leaves(g, k);
    if (!any_left && k < kSkipLevels) {
      g = std::min<size_t>(skip_[k][g], end);
      continue;
    }
    for (++g; g < end && shared_[g] > k; ++g) {
      if (any_left) leaves(g, k);
    }
  }
}

std::shared_ptr<const TokenGrammar::FrameTable> TokenGrammar::Table(std::vector<int32_t> top,
                                                                    const Utf8Partial& utf8) const {
  GrammarState start;
  start.stacks.push_back({automaton_.sentinel()});
  start.stacks[0].insert(start.stacks[0].end(), top.begin(), top.end());
  top.insert(top.end(), {utf8.need, static_cast<int32_t>(utf8.bits), utf8.length});  // the key
  auto it = tables_.find(top);
  if (it != tables_.end()) return it->second;
  if (tables_.size() >= kMaxTables) tables_.clear();
  auto table = std::make_shared<FrameTable>();
  table->accepted.assign((bytes_.size() + 63) / 64, 0);
  Walk(Intern(std::move(start)), utf8, &table->accepted, &table->leaving);
  auto suffix = [&](const std::pair<uint32_t, uint32_t>& e) {
    return std::span<const uint32_t>(symbols_[e.first]).subspan(e.second);
  };
  std::sort(table->leaving.begin(), table->leaving.end(), [&](const auto& a, const auto& b) {
    const auto x = suffix(a), y = suffix(b);
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  });
  table->leaving_shared.resize(table->leaving.size());
  for (size_t i = 1; i < table->leaving.size(); ++i) {
    const auto x = suffix(table->leaving[i - 1]), y = suffix(table->leaving[i]);
    table->leaving_shared[i] = static_cast<uint32_t>(std::mismatch(x.begin(), x.end(), y.begin(), y.end()).first - x.begin());
  }
  tables_.emplace(std::move(top), table);
  return table;
}

TokenGrammar::Mask TokenGrammar::Compute(const GrammarState& s) const {
  Mask mask((bytes_.size() + 63) / 64, 0);
  MutexLock lock(&dfa_mu_);
  if (states_.size() > kMaxStates) {
    state_ids_.clear();
    states_.clear();
    left_.clear();
    next_.clear();
  }
  for (const std::vector<int32_t>& stack : s.stacks) {
    if (stack.empty()) continue;  // a whole sentence: no bytes follow on this stack
    const size_t split = stack.size() > kTableFrames ? stack.size() - kTableFrames : 0;
    const std::shared_ptr<const FrameTable> table =
        Table(std::vector<int32_t>(stack.begin() + static_cast<std::ptrdiff_t>(split), stack.end()), s.utf8);
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= table->accepted[w];
    if (split == 0 || table->leaving.empty()) continue;  // leaving the whole stack: nothing follows
    const int32_t beneath = Intern(
        automaton_.Resume(std::vector<int32_t>(stack.begin(), stack.begin() + static_cast<std::ptrdiff_t>(split))));
    // The leaving groups' rest from beneath: a walk over their sorted suffixes, as Walk's.
    std::vector<At> depth(1, At{beneath, Utf8Partial{}});
    size_t valid = 0;
    const auto& leaving = table->leaving;
    for (size_t e = 0; e < leaving.size();) {
      const auto [g, k] = leaving[e];
      const std::span<const uint32_t> rest = std::span<const uint32_t>(symbols_[g]).subspan(k);
      if (depth.size() < rest.size() + 1) depth.resize(rest.size() + 1);
      size_t i = std::min<size_t>(table->leaving_shared[e], valid);
      bool refused = false;
      for (; i < rest.size(); ++i) {
        if (!NextSymbol(depth[i], rest[i], &depth[i + 1])) {
          refused = true;
          break;
        }
      }
      if (!refused) {
        for (uint32_t m = first_[g]; m < first_[g + 1]; ++m) {
          const auto id = static_cast<size_t>(members_[m]);
          mask[id / 64] |= uint64_t{1} << (id % 64);
        }
        valid = rest.size();
        ++e;
        continue;
      }
      valid = i;
      for (++e; e < leaving.size() && table->leaving_shared[e] > i; ++e) {
      }
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

bool TokenGrammar::AllowedInRow(const GrammarState& s, bool allow_end, int64_t n_logits, Mask* out) const {
  const std::shared_ptr<const Mask> mask = Allowed(s);
  const auto words = static_cast<size_t>((n_logits + 63) / 64);
  out->assign(words, 0);
  // Tokens past the grammar's vocabulary never come.
  const size_t n = std::min(static_cast<size_t>(n_logits), bytes_.size());
  bool any = false;
  for (size_t w = 0; w * 64 < n; ++w) {
    const size_t width = std::min<size_t>(64, n - w * 64);
    (*out)[w] = (*mask)[w] & (width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1);
    any |= (*out)[w] != 0;
  }
  // The end tokens add no bytes, so Allowed leaves them out: they come where the grammar can end.
  if (allow_end && automaton_.CanEnd(s)) {
    for (int32_t id : end_tokens_) {
      if (id >= 0 && id < n_logits) {
        (*out)[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
        any = true;
      }
    }
  }
  return any;
}

bool TokenGrammar::MaskLogits(const GrammarState& s, bool allow_end, std::span<float> logits) const {
  thread_local Mask allowed;
  const bool any = AllowedInRow(s, allow_end, static_cast<int64_t>(logits.size()), &allowed);
  ApplyAllowed(allowed.data(), static_cast<int64_t>(logits.size()), logits.data());
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
