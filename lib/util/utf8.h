#ifndef LLM42_UTIL_UTF8_H_
#define LLM42_UTIL_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace llm42 {

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Length of the UTF-8 sequence a lead byte announces (1 for invalid lead bytes, so callers
// always make progress).
size_t Utf8SequenceLength(unsigned char lead);

// The longest prefix of valid UTF-8 `text` that is at most `max_bytes` long and ends on a
// character boundary (a message cut to fit a caller's buffer).
size_t Utf8PrefixLength(std::string_view text, size_t max_bytes);

// Turns a byte stream into valid UTF-8 incrementally: complete characters pass through, a
// trailing incomplete character is held until the bytes that finish it arrive, and bytes that
// can never form a character become U+FFFD. Used wherever token bytes become user-visible text.
class Utf8Decoder {
 public:
  // Appends the valid text that `bytes` completes to `out`.
  void Append(std::string_view bytes, std::string* out);
  // Flushes a held incomplete character as U+FFFD.
  void Finish(std::string* out);
  bool HasPending() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

// Sanitizes a whole byte string at once (same rules as Utf8Decoder).
std::string ToValidUtf8(std::string_view bytes);

}  // namespace llm42

#endif  // LLM42_UTIL_UTF8_H_
