#ifndef LLM42_TESTS_TEST_UTIL_H_
#define LLM42_TESTS_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm42::testing {

// ThreadSanitizer slows the engine's arithmetic about tenfold; the load tests run a smaller load
// under it (tools/tsan.sh) so that each stays well under a minute on a busy 2-core machine. The
// thread interleavings they exercise are the same; the ASan suite runs the full load.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// A request's committed tokens and their logprobs, equal only when every bit is (the
// determinism suites' notion of "the same output").
struct TokensAndLogprobs {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool operator==(const TokensAndLogprobs& o) const {
    return tokens == o.tokens && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

// The shared reference material (models, llama.cpp outputs, tokenizer vectors): $LLM42_SHARED_DIR,
// else ../shared beside the source tree (the build passes its location in).
inline std::string SharedPath(const std::string& relative) {
  const char* env = std::getenv("LLM42_SHARED_DIR");
  const std::string root = env != nullptr ? env : LLM42_SHARED_DIR;
  return root + "/" + relative;
}

// llama.cpp's source tree where tools/bench-llamacpp.sh and tools/make-llamacpp-references.sh
// build it (LLM42_LLAMACPP_CACHE, else the project's cache under $HOME), or "" where no home is
// known: its models/ (tokenizer vectors, chat templates) are assets outside the repository, which
// tests skip without, saying so.
inline std::string LlamaCppSourceDir() {
  std::string cache;
  if (const char* c = std::getenv("LLM42_LLAMACPP_CACHE")) {
    cache = c;
  } else if (const char* home = std::getenv("HOME")) {
    cache = std::string(home) + "/.cache/llm42/node-llama-cpp-3.22.1";
  }
  return cache.empty() ? std::string() : cache + "/node_modules/node-llama-cpp/llama/llama.cpp";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One of llama.cpp's test-tokenizer-0 vectors: inputs separated by "\n__ggml_vocab_test__\n"
// in BASE.inp, expected ids one line per input in BASE.out.
struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::vector<VocabVector> ReadVocabVectors(const std::string& base) {
  std::string inp = ReadFile(base + ".inp");
  const std::string out = ReadFile(base + ".out");
  const std::string delim = "\n__ggml_vocab_test__\n";
  std::vector<VocabVector> v;
  for (size_t pos; (pos = inp.find(delim)) != std::string::npos; inp.erase(0, pos + delim.size())) {
    v.push_back(VocabVector{inp.substr(0, pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line) && i < v.size(); ++i) {
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v[i].ids.push_back(id);
  }
  return v;
}

// A path in the test's scratch folder (LLM42_TEST_TMP_DIR in the environment overrides the
// build's, for binaries run away from their build tree).
inline std::string TempPath(const std::string& name) {
  const char* env = std::getenv("LLM42_TEST_TMP_DIR");
  const std::string dir = env != nullptr ? env : std::string(LLM42_TEST_TMP_DIR);
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// Moves a file a test process wrote privately (`partial`) to the shared name `out`, for files that
// parallel test processes make alike (every model maker is seeded). When another process got
// there first, its copy is kept and `partial` removed: Windows refuses to replace a file that
// another process has open, which a model being read always is.
inline void PublishFile(const std::string& partial, const std::string& out) {
  std::error_code ec;
  std::filesystem::rename(partial, out, ec);
  if (!ec) return;
  ASSERT_TRUE(std::filesystem::exists(out)) << "cannot move " << partial << " to " << out << ": " << ec.message();
  std::filesystem::remove(partial, ec);
}

// The backend engine-level tests run on: $LLM42_TEST_BACKEND ("cuda" in the device script,
// tests/gpu/run_device_checks.sh), else the CPU, the reference.
inline std::string TestBackend() {
  const char* env = std::getenv("LLM42_TEST_BACKEND");
  return env != nullptr && *env != '\0' ? env : "cpu";
}

}  // namespace llm42::testing

// Skips the test (with a message saying what is missing) when a shared asset is absent.
#define LLM42_SHARED_OR_SKIP(var, relative)                                              \
  const std::string var = ::llm42::testing::SharedPath(relative);                        \
  if (!std::filesystem::exists(var)) {                                                   \
    GTEST_SKIP() << "shared asset " << var                                               \
                 << " is missing; place the project's shared/ folder beside the repo";   \
  }

#endif  // LLM42_TESTS_TEST_UTIL_H_
