#include "lib/tokenizer/bpe_encoder.h"

#include <array>
#include <queue>

#include "lib/util/utf8.h"

namespace llm42 {
namespace {

std::string EncodeUtf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte;  // code point (< 0x200) -> byte, -1 when unmapped

  ByteMap() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      to_unicode[static_cast<size_t>(b)] = EncodeUtf8(c);
      to_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& Map() {
  static const ByteMap* map = new ByteMap();
  return *map;
}

struct Symbol {
  size_t start, len;  // in the mapped text
  int prev, next;     // neighbours in the list, -1 at the ends
};

struct Bigram {
  int32_t rank;
  int left;
  size_t len;  // combined length when queued; stale entries no longer match
  bool operator<(const Bigram& o) const {  // priority_queue pops the largest: invert
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Map().to_unicode[byte]; }

std::string UnicodeToBytes(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = std::min(Utf8SequenceLength(lead), text.size() - i);
    char32_t c = lead;
    if (n == 2) c = (static_cast<char32_t>(lead & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
    if (n <= 2 && c < 512 && Map().to_byte[c] >= 0) {
      out += static_cast<char>(Map().to_byte[c]);
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

void BpeEncode(const Vocab& vocab, std::string_view piece, BpeOptions options, std::vector<int32_t>* out) {
  std::string text;
  if (options.byte_level) {
    for (char ch : piece) text += ByteToUnicode(static_cast<uint8_t>(ch));
  } else {
    text = piece;
  }
  if (options.ignore_merges) {
    if (auto id = vocab.Find(text)) {
      out->push_back(*id);
      return;
    }
  }
  std::vector<Symbol> sym;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(Utf8SequenceLength(static_cast<unsigned char>(text[i])), text.size() - i);
    const int idx = static_cast<int>(sym.size());
    sym.push_back(Symbol{i, n, idx - 1, -1});
    if (idx > 0) sym[static_cast<size_t>(idx) - 1].next = idx;
    i += n;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left) {
    if (left < 0) return;
    const Symbol& a = sym[static_cast<size_t>(left)];
    if (a.next < 0) return;
    const Symbol& b = sym[static_cast<size_t>(a.next)];
    const int32_t rank = vocab.MergeRank(std::string_view(text).substr(a.start, a.len),
                                         std::string_view(text).substr(b.start, b.len));
    if (rank >= 0) queue.push(Bigram{rank, left, a.len + b.len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) try_add(i);
  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& a = sym[static_cast<size_t>(top.left)];
    if (a.len == 0 || a.next < 0) continue;
    Symbol& b = sym[static_cast<size_t>(a.next)];
    if (a.len + b.len != top.len) continue;  // one side has merged since
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = top.left;
    try_add(a.prev);
    try_add(top.left);
  }
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view str = std::string_view(text).substr(s.start, s.len);
    if (auto id = vocab.Find(str)) {
      out->push_back(*id);
      continue;
    }
    if (!options.byte_level) {  // unknown merge result: its bytes' <0xXX> tokens
      for (char ch : str) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        const auto b = static_cast<uint8_t>(ch);
        const char byte_token[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
        if (auto id = vocab.Find(byte_token)) out->push_back(*id);
      }
      continue;
    }
    for (size_t k = 0; k < str.size();) {  // unknown merge result: one token per code point
      const size_t n = std::min(Utf8SequenceLength(static_cast<unsigned char>(str[k])), str.size() - k);
      const auto id = vocab.Find(str.substr(k, n));
      if (id || vocab.unk() >= 0) out->push_back(id ? *id : vocab.unk());
      k += n;
    }
  }
}

}  // namespace llm42
