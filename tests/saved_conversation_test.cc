// The saved-conversation file format alone: a round trip keeps every field; every truncation,
// every flipped byte and files whose fields contradict each other are DataLoss, never a crash
// (the suite runs under ASan, which would catch a read past the buffer).
#include "lib/engine/saved_conversation.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "lib/util/stable_hash.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

SavedConversation Sample() {
  SavedConversation c;
  c.model.metadata = {{"llama.block_count", 0x42}, {"llama.attention.layer_norm_rms_epsilon", 0x43}};
  c.model.tensors = 0x1234567890abcdefull;
  c.llm42_version = "0.1.0";
  c.schedule_version = 2;
  c.backend = "cpu";
  c.kv_dtype = "f16";
  c.block_size = 4;
  c.n_layers = 2;
  c.kv_dim = 3;
  c.kv_element_bytes = 2;
  for (int i = 0; i < 10; ++i) c.tokens.push_back(100 + i);
  c.messages = {{"user", "Hi"}, {"assistant", "Hello"}};
  c.block_fixed = {1, 0};
  c.kv_block_bytes = 40;  // format 3: the block's real size (its layers' widths differ)
  c.kv.resize(2 * c.block_bytes());
  for (size_t i = 0; i < c.kv.size(); ++i) c.kv[i] = static_cast<uint8_t>(i * 7);
  c.state = {1.5f, -2.0f, 0.25f};  // a recurrent model's state after the last block
  return c;
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(SavedConversationFile, RoundTripKeepsEveryField) {
  const std::string path = testing::TempPath("round_trip.llm42");
  const SavedConversation c = Sample();
  ASSERT_TRUE(WriteSavedConversation(path, c).ok());
  auto r = ReadSavedConversation(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r == c);
  SavedConversation other = c;  // control: the comparison sees one K/V byte
  other.kv.back() ^= 1;
  EXPECT_FALSE(*r == other);
  std::filesystem::remove(path);
}

// A file of format 2 (before recurrent states and blocks of mixed widths) still loads: the same
// fields, its blocks n_layers * 2 * block_size * kv_dim elements. Made from a format-3 file of the
// same conversation by hand: the magic's digit, kv_block_bytes and the empty state's length
// removed, the checksum recomputed.
TEST(SavedConversationFile, FormatTwoStillLoads) {
  const std::string path = testing::TempPath("format2.llm42");
  SavedConversation c = Sample();
  c.kv_block_bytes = 0;
  c.state.clear();
  c.kv.resize(2 * c.block_bytes());
  ASSERT_TRUE(WriteSavedConversation(path, c).ok());
  std::string b = Bytes(path);
  ASSERT_EQ(b.substr(0, 8), "LLM42CV3");
  b[7] = '2';
  const std::string tokens_start = std::string("\x0a\0\0\0\0\0\0\0\x64\0\0\0", 12);  // u64 10, then token 100
  const size_t at = b.find(tokens_start);
  ASSERT_NE(at, std::string::npos);
  b.erase(at - 8, 8);                 // kv_block_bytes
  b.erase(b.size() - 16, 16);         // the state's length (0) and the old checksum
  const uint64_t h = StableHash().Mix(b.data(), b.size()).value();  // the format's checksum
  b.append(reinterpret_cast<const char*>(&h), sizeof h);
  Write(path, b);
  auto r = ReadSavedConversation(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r == c);
  std::filesystem::remove(path);
}

// Found by saved_conversation_fuzzer: an empty token list made the reader memcpy into a null
// vector (undefined behaviour, reported by UBSan).
TEST(SavedConversationFile, AnEmptyConversationRoundTrips) {
  const std::string path = testing::TempPath("empty.llm42");
  SavedConversation c = Sample();
  c.tokens.clear();
  c.messages.clear();
  c.block_fixed.clear();
  c.kv.clear();
  c.state.clear();  // a state is the one after the last block: none without blocks
  ASSERT_TRUE(WriteSavedConversation(path, c).ok());
  auto r = ReadSavedConversation(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r == c);
  std::filesystem::remove(path);
}

TEST(SavedConversationFile, EveryTruncationAndEveryFlippedByteIsDataLoss) {
  const std::string path = testing::TempPath("damaged.llm42"), bad = testing::TempPath("damaged_bad.llm42");
  ASSERT_TRUE(WriteSavedConversation(path, Sample()).ok());
  const std::string good = Bytes(path);
  for (size_t n = 0; n < good.size(); ++n) {
    Write(bad, good.substr(0, n));
    ASSERT_EQ(ReadSavedConversation(bad).status().code(), absl::StatusCode::kDataLoss) << "length " << n;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x01);
    Write(bad, flipped);
    ASSERT_EQ(ReadSavedConversation(bad).status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  EXPECT_EQ(ReadSavedConversation(testing::TempPath("absent.llm42")).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

// Intact checksums over contradicting fields: refused by the size checks, not trusted.
TEST(SavedConversationFile, ContradictingFieldsAreDataLoss) {
  const std::string path = testing::TempPath("contradicting.llm42");
  auto refused = [&](const SavedConversation& c) {
    EXPECT_TRUE(WriteSavedConversation(path, c).ok());
    return ReadSavedConversation(path).status().code() == absl::StatusCode::kDataLoss;
  };
  SavedConversation c = Sample();
  c.kv.pop_back();  // K/V not a whole number of blocks
  EXPECT_TRUE(refused(c));
  c = Sample();
  c.block_fixed.push_back(1);  // more blocks than K/V
  EXPECT_TRUE(refused(c));
  c = Sample();
  c.tokens.resize(5);  // blocks beyond the tokens
  EXPECT_TRUE(refused(c));
  c = Sample();
  c.n_layers = int64_t{1} << 40;  // a block size that would overflow
  EXPECT_TRUE(refused(c));
  c = Sample();
  c.block_size = 0;
  EXPECT_TRUE(refused(c));
  EXPECT_FALSE(refused(Sample()));  // control: the intact sample is accepted
  std::filesystem::remove(path);
}

// A file of format 1 named its model by the tensors alone: it cannot be checked against a
// model's metadata, so it is refused as such (not as damage, and not accepted).
TEST(SavedConversationFile, FormatOneIsRefusedAsUncheckable) {
  const std::string path = testing::TempPath("format_one.llm42");
  ASSERT_TRUE(WriteSavedConversation(path, Sample()).ok());
  std::string bytes = Bytes(path);
  bytes[7] = '1';
  Write(path, bytes);
  const absl::Status st = ReadSavedConversation(path).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("format 1"), std::string::npos) << st;
  std::filesystem::remove(path);
}

TEST(SavedConversationSetup, NamesTheFirstMetadataKeyThatDiffers) {
  const SavedConversation saved = Sample();
  EXPECT_TRUE(CheckSameSetup(saved, saved, "f").ok());
  SavedConversation here = saved;
  here.model.metadata[1].second ^= 1;
  absl::Status st = CheckSameSetup(saved, here, "f");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("another model: metadata key 'llama.attention.layer_norm_rms_epsilon' has another value"), std::string::npos) << st;
  here = saved;
  here.model.metadata.pop_back();
  st = CheckSameSetup(saved, here, "f");
  EXPECT_NE(st.message().find("'llama.attention.layer_norm_rms_epsilon' is absent here"), std::string::npos) << st;
  here = saved;
  here.model.metadata.emplace_back("llama.rope.freq_base", 7);
  st = CheckSameSetup(saved, here, "f");
  EXPECT_NE(st.message().find("'llama.rope.freq_base' of this model is absent from the saved one"), std::string::npos) << st;
  here = saved;
  here.model.tensors ^= 1;
  st = CheckSameSetup(saved, here, "f");
  EXPECT_NE(st.message().find("another model: its tensors differ"), std::string::npos) << st;
}

}  // namespace
}  // namespace llm42
