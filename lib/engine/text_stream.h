#ifndef LLM42_ENGINE_TEXT_STREAM_H_
#define LLM42_ENGINE_TEXT_STREAM_H_

#include <string>
#include <string_view>
#include <vector>

#include "lib/util/utf8.h"

namespace llm42 {

// Turns a request's token bytes into the text it may show: whole UTF-8 characters only, and
// nothing that a stop string could still swallow. When a stop string completes, the text ends
// just before it.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends releasable text to *out; true when a stop string completed.
  bool Push(std::string_view bytes, std::string* out);
  // End of generation: releases everything held (an unfinished character as U+FFFD).
  void Finish(std::string* out);

 private:
  size_t HeldSuffixLength() const;

  std::vector<std::string> stops_;
  Utf8Decoder utf8_;
  std::string held_;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_TEXT_STREAM_H_
