#include "lib/util/utf8.h"

namespace llm42 {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Classifies the prefix of `s` at `i`: returns the length of a complete valid character,
// 0 if the bytes are a valid but incomplete prefix that runs to the end of `s`, or -1 if the
// byte at `i` cannot start a valid character given what follows.
int ClassifyAt(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return -1;
  }
  return len;
}

}  // namespace

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

size_t Utf8PrefixLength(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // text[n] continues a character
  return n;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const int n = ClassifyAt(text, i);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

void Utf8Decoder::Append(std::string_view bytes, std::string* out) {
  pending_.append(bytes);
  size_t i = 0;
  while (i < pending_.size()) {
    const int n = ClassifyAt(pending_, i);
    if (n == 0) break;  // incomplete tail: wait for more bytes
    if (n < 0) {
      out->append(kReplacement);
      ++i;
    } else {
      out->append(pending_, i, static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    }
  }
  pending_.erase(0, i);
}

void Utf8Decoder::Finish(std::string* out) {
  if (!pending_.empty()) out->append(kReplacement);
  pending_.clear();
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  Utf8Decoder decoder;
  decoder.Append(bytes, &out);
  decoder.Finish(&out);
  return out;
}

}  // namespace llm42
