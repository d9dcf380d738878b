// The backend plug-in loader (lib/backend/backend_plugin.h) against plug-ins built for the test
// (fake_backend_plugin.cc): this llm42's, served through the registry as "cuda" with the CPU
// backend inside; another version's, refused with both versions named; a missing file and a
// library that is no plug-in, refused with the reason. The plug-ins' directories come from CMake.
#include "lib/backend/backend_plugin.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/backend_registry.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/util/logging.h"
#include "llm42/llm42.h"

namespace llm42 {
namespace {

std::filesystem::path Plugin(const char* dir) { return std::filesystem::path(dir) / BackendPluginFileName("cuda"); }

std::mutex g_log_mu;
std::vector<std::string> g_log;

// The plug-in's copy of the engine, given the CPU backend's work: the bits of the built-in one
// (the same code, reached through another library's copy and across its boundary), and its log
// line arrives through the host's sink. Fails when the loader does not pass its logger
// (BackendPluginHost::log unset: the line goes to the plug-in's own stderr sink).
TEST(BackendPlugin, ThisVersionsPluginLoadsAndItsBackendComputes) {
  SetLogSink([](void*, int32_t, const char* m) { std::lock_guard<std::mutex> l(g_log_mu); g_log.push_back(m); },
             nullptr);
  SetLogLevel(static_cast<int32_t>(LogLevel::kInfo));
  absl::StatusOr<const BackendEntry*> entry = LoadBackendPlugin(Plugin(LLM42_GOOD_PLUGIN_DIR));
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_STREQ((*entry)->name, "cuda");
  ASSERT_TRUE((*entry)->usable().ok());
  absl::StatusOr<std::unique_ptr<Backend>> backend = (*entry)->create(BackendOptions{.threads = 2});
  SetLogSink(nullptr, nullptr);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int64_t m = 3, n = 64;
  std::vector<float> x(m * n), w(n), y(m * n), want(m * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.37f - 2.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + static_cast<float>(i) * 0.01f;
  ASSERT_TRUE((*backend)->RmsNorm(x.data(), w.data(), m, n, 1e-5f, y.data(), Schedule::kFixed).ok());
  ASSERT_TRUE(CpuBackend(2).RmsNorm(x.data(), w.data(), m, n, 1e-5f, want.data(), Schedule::kFixed).ok());
  EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)));
  bool logged = false;
  for (const std::string& line : g_log) logged |= line == "fake plug-in: a CPU backend of 2 threads";
  EXPECT_TRUE(logged) << "the plug-in's log line did not reach the host's sink";
  // Loaded once: the same entry again.
  absl::StatusOr<const BackendEntry*> again = LoadBackendPlugin(Plugin(LLM42_GOOD_PLUGIN_DIR));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *entry);
}

TEST(BackendPlugin, AnotherVersionsPluginIsRefusedNamingBoth) {
  absl::StatusOr<const BackendEntry*> entry = LoadBackendPlugin(Plugin(LLM42_OLD_PLUGIN_DIR));
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().code(), absl::StatusCode::kUnimplemented);  // LLM42_UNSUPPORTED
  const std::string message(entry.status().message());
  EXPECT_NE(message.find("from llm42 0.0.0-other"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("this libllm42 is ") + LLM42_VERSION_STRING), std::string::npos) << message;
}

TEST(BackendPlugin, MissingFilesAndOtherLibrariesAreRefusedWithTheReason) {
  absl::StatusOr<const BackendEntry*> missing = LoadBackendPlugin(Plugin(LLM42_TEST_TMP_DIR "/no-such-dir"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(missing.status().message().find("no backend plug-in at"), std::string::npos) << missing.status();
  absl::StatusOr<const BackendEntry*> other = LoadBackendPlugin(LLM42_NOT_A_PLUGIN);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is not an llm42 backend plug-in"), std::string::npos) << other.status();
}

// "cuda" through the registry. Without CUDA compiled in (the self-contained builds, which
// tools/test-bundled.sh tests): the plug-in in $LLM42_PLUGIN_DIR serves it, and "auto" picks it
// (it says it is usable). With CUDA compiled in: the built-in backend answers and the plug-in is
// never used, whatever $LLM42_PLUGIN_DIR says.
TEST(BackendPlugin, TheRegistryServesCudaFromThePluginOnlyWhereNotBuiltIn) {
  const bool built_in = RegisteredBackends().front().name == std::string_view("cuda");
  setenv("LLM42_PLUGIN_DIR", LLM42_GOOD_PLUGIN_DIR, 1);
  absl::StatusOr<const BackendEntry*> cuda = ResolveBackend("cuda");
  absl::StatusOr<const BackendEntry*> automatic = ResolveBackend("auto");
  unsetenv("LLM42_PLUGIN_DIR");
  const BackendEntry* plugin = *LoadBackendPlugin(Plugin(LLM42_GOOD_PLUGIN_DIR));
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  if (built_in) {
    EXPECT_TRUE(!cuda.ok() || *cuda == &RegisteredBackends().front()) << "cuda resolved to something else";
    EXPECT_NE(*automatic, plugin);
  } else {
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_EQ(*cuda, plugin);
    EXPECT_EQ(*automatic, plugin);
  }
}

}  // namespace
}  // namespace llm42
