#include "lib/engine/text_stream.h"

#include <algorithm>

namespace llm42 {

bool TextStream::Push(std::string_view bytes, std::string* out) {
  utf8_.Append(bytes, &held_);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out->append(held_, 0, first);
    held_.clear();
    return true;
  }
  const size_t keep = HeldSuffixLength();
  out->append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

void TextStream::Finish(std::string* out) {
  utf8_.Finish(&held_);
  out->append(held_);
  held_.clear();
}

// Longest suffix of held_ that begins some stop string (and is shorter than it).
size_t TextStream::HeldSuffixLength() const {
  size_t best = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > best; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        best = n;
        break;
      }
    }
  }
  return best;
}

}  // namespace llm42
