#include "lib/tokenizer/spm_encoder.h"

#include <queue>

namespace llm42 {
namespace {

struct Symbol {
  int prev;
  int next;
  const char* text;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

// Lead-byte length as llama.cpp's unicode_len_utf8 computes it (the text is valid UTF-8 here,
// so the rules agree with a strict decoder).
size_t CharLength(unsigned char c) {
  static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

}  // namespace

void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out) {
  std::vector<Symbol> symbols;
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = std::min(text.size() - offs, CharLength(static_cast<unsigned char>(text[offs])));
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{index - 1, offs + len == text.size() ? -1 : index + 1, text.data() + offs, len});
    offs += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view piece(symbols[static_cast<size_t>(left)].text,
                                 symbols[static_cast<size_t>(left)].n + symbols[static_cast<size_t>(right)].n);
    if (auto id = vocab.Find(piece)) queue.push(Bigram{left, right, vocab.score(*id), piece.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(b.left)];
    Symbol& right = symbols[static_cast<size_t>(b.right)];
    // Stale entry: one side was merged away or grew since the bigram was queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    if (auto id = vocab.Find(std::string_view(s.text, s.n))) {
      out->push_back(*id);
      continue;
    }
    // Merged symbols are always vocabulary tokens, so only single characters get here.
    for (size_t j = 0; j < s.n; ++j) {
      const int32_t byte_token = vocab.ByteToken(static_cast<uint8_t>(s.text[j]));
      if (byte_token >= 0) out->push_back(byte_token);
    }
  }
}

}  // namespace llm42
