#ifndef LLM42_FUZZ_FUZZ_FILE_H_
#define LLM42_FUZZ_FUZZ_FILE_H_

// The loaders under test read files (they memory-map them): each input is written to one
// scratch file per process, in /dev/shm when it exists.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace llm42::fuzz {

inline const std::string& ScratchPath(const char* suffix) {
  static const std::string path = (std::filesystem::exists("/dev/shm") ? std::string("/dev/shm")
                                                                         : std::filesystem::temp_directory_path().string()) +
                                  "/llm42-fuzz-" + std::to_string(::getpid()) + suffix;
  return path;
}

inline const std::string& WriteScratch(const uint8_t* data, size_t size, const char* suffix) {
  const std::string& path = ScratchPath(suffix);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f != nullptr) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace llm42::fuzz

#endif  // LLM42_FUZZ_FUZZ_FILE_H_
