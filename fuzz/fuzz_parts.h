#ifndef LLM42_FUZZ_FUZZ_PARTS_H_
#define LLM42_FUZZ_FUZZ_PARTS_H_

// One input as several: parts separated by kPartSeparator (in the dictionaries), so that one
// byte string can stand for a directory of files or a template and its messages.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm42::fuzz {

inline constexpr std::string_view kPartSeparator = "\n--8<--\n";

inline std::vector<std::string> SplitParts(const uint8_t* data, size_t size, size_t max_parts) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t begin = 0;
  while (parts.size() + 1 < max_parts) {
    const size_t end = in.find(kPartSeparator, begin);
    if (end == std::string_view::npos) break;
    parts.emplace_back(in.substr(begin, end - begin));
    begin = end + kPartSeparator.size();
  }
  parts.emplace_back(in.substr(begin));
  parts.resize(max_parts);
  return parts;
}

}  // namespace llm42::fuzz

#endif  // LLM42_FUZZ_FUZZ_PARTS_H_
