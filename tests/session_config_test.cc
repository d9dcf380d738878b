#include <fstream>

#include "gtest/gtest.h"
#include "lib/engine/options.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(SessionConfig, AppliesEveryFieldItSets) {
  SessionOptions o;
  o.threads = 3;
  ASSERT_TRUE(o.LoadConfig(Write("ok.textproto", R"pb(
    model_path: "m.gguf"
    max_batch_tokens: 128
    context_length: 1024
    backend: "cpu"
    kv_dtype: "bf16"
    kv_prefault: true
    determinism { mode: OFF window: 16 verify_group: 2 default_seed: 7 decode_path: FIXED }
  )pb")).ok());
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.kv_dtype, "bf16");
  EXPECT_TRUE(o.kv_prefault);
  EXPECT_EQ(o.determinism.decode_path, DecodePath::kFixed);
  EXPECT_EQ(o.model_path, "m.gguf");
  EXPECT_EQ(o.threads, 3);  // untouched
  EXPECT_EQ(o.max_batch_tokens, 128);
  EXPECT_EQ(o.context_length, 1024);
  EXPECT_EQ(o.determinism.mode, DeterminismMode::kOff);
  EXPECT_EQ(o.determinism.window, 16);
  EXPECT_EQ(o.determinism.verify_group, 2);
  EXPECT_EQ(o.determinism.default_seed, 7u);
}

TEST(SessionConfig, MalformedOrOutOfRangeIsAFormatErrorAndChangesNothing) {
  SessionOptions o;
  const absl::Status syntax = o.LoadConfig(Write("bad.textproto", "threads: \"two\""));
  EXPECT_EQ(syntax.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(syntax.message().find("line 1"), std::string::npos) << syntax;
  const absl::Status unknown = o.LoadConfig(Write("unknown.textproto", "no_such_field: 1"));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kDataLoss);
  const absl::Status range = o.LoadConfig(Write("range.textproto", "model_path: \"x\" max_batch_tokens: 0"));
  EXPECT_EQ(range.code(), absl::StatusCode::kDataLoss);
  const absl::Status kv = o.LoadConfig(Write("kv.textproto", "model_path: \"x\" kv_dtype: \"f8\""));
  EXPECT_EQ(kv.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(kv.message().find("kv_dtype"), std::string::npos) << kv;
  EXPECT_EQ(o.model_path, "");  // nothing applied
  EXPECT_EQ(o.LoadConfig(testing::TempPath("absent.textproto")).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llm42
