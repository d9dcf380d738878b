#include "lib/format/gguf_reader.h"

#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "gtest/gtest.h"
#include "lib/maker/gguf_writer.h"
#include "lib/model/model_config.h"
#include "lib/model/model_weights.h"
#include "lib/maker/model_maker.h"
#include "lib/maker/quantizer.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

std::string WriteBytes(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Raw little-endian builder for hand-made (and deliberately broken) files.
struct Raw {
  std::vector<uint8_t> b;
  template <typename T>
  Raw& Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Raw& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return Put<uint32_t>(0x46554747).Put<uint32_t>(version).Put(n_tensors).Put(n_kv);
  }
  // A tensor info: name, dims, ggml type, offset.
  Raw& Tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Str(name).Put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) Put(d);
    return Put(type).Put(offset);
  }
  Raw& Align(size_t a = 32) {
    b.resize((b.size() + a - 1) / a * a, 0);
    return *this;
  }
};

TEST(GgufReader, RoundTripsEveryValueTypeAndTensorType) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("u32", 4000000000u);
  w.AddInt32("i32", -7);
  w.AddFloat32("f32", 1.5f);
  w.AddBool("flag", true);
  w.AddStringArray("strings", {"a", "", "\xE2\x96\x81z"});
  w.AddFloat32Array("floats", {0.25f, -2.0f});
  w.AddInt32Array("ints", {1, -2, 3});
  GgufValue u8;
  u8.type = GgufType::kUint8;
  u8.int_value = 200;
  w.AddValue("u8", u8);
  GgufValue i64;
  i64.type = GgufType::kInt64;
  i64.int_value = -(int64_t{1} << 40);
  w.AddValue("i64", i64);
  GgufValue f64;
  f64.type = GgufType::kFloat64;
  f64.float_value = 0.1;
  w.AddValue("f64", f64);
  GgufValue nested;
  nested.type = GgufType::kArray;
  nested.array_type = GgufType::kArray;
  nested.nested_array.resize(2);
  for (auto& n : nested.nested_array) {
    n.type = GgufType::kArray;
    n.array_type = GgufType::kInt16;
    n.int_array = {5, -6};
  }
  w.AddValue("nested", nested);

  w.AddTensor("t.f32", GgmlType::kF32, {3, 2}, F32Bytes({1, 2, 3, 4, 5, 6}));
  std::vector<uint8_t> f16(8 * 2);
  for (int i = 0; i < 8; ++i) {
    const uint16_t h = Fp32ToFp16(static_cast<float>(i) * 0.5f);
    std::memcpy(f16.data() + 2 * i, &h, 2);
  }
  w.AddTensor("t.f16", GgmlType::kF16, {8}, f16);
  w.AddTensor("t.bf16", GgmlType::kBF16, {4}, std::vector<uint8_t>(8, 0x3F));
  std::vector<uint8_t> q8(2 * sizeof(BlockQ8_0), 1);
  w.AddTensor("t.q8_0", GgmlType::kQ8_0, {32, 2}, q8);
  const std::string path = WriteBytes("roundtrip.gguf", w.Serialize());

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(f.Find("u32")->uint_value, 4000000000u);
  EXPECT_EQ(*f.GetInt("i32"), -7);
  EXPECT_EQ(*f.GetFloat("f32"), 1.5);
  EXPECT_TRUE(f.GetBoolOr("flag", false));
  EXPECT_EQ(f.Find("strings")->string_array, (std::vector<std::string>{"a", "", "\xE2\x96\x81z"}));
  EXPECT_EQ(f.Find("floats")->float_array, (std::vector<double>{0.25, -2.0}));
  EXPECT_EQ(f.Find("ints")->int_array, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetInt("u8"), 200);
  EXPECT_EQ(*f.GetInt("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*f.GetFloat("f64"), 0.1);
  ASSERT_EQ(f.Find("nested")->nested_array.size(), 2u);
  EXPECT_EQ(f.Find("nested")->nested_array[1].int_array, (std::vector<int64_t>{5, -6}));

  ASSERT_EQ(f.tensors().size(), 4u);
  const GgufTensorInfo* t = f.FindTensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{3, 2}));
  float values[6];
  std::memcpy(values, t->data, sizeof values);
  EXPECT_EQ(values[5], 6.0f);
  EXPECT_EQ(f.FindTensor("t.f16")->n_bytes, 16u);
  EXPECT_EQ(f.FindTensor("t.bf16")->type, GgmlType::kBF16);
  EXPECT_EQ(f.FindTensor("t.q8_0")->n_bytes, 68u);
  for (const GgufTensorInfo& ti : f.tensors()) {
    EXPECT_EQ((ti.data - f.tensors()[0].data) % 32, 0) << ti.name << " is not aligned";
  }
}

struct Malformed {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string message;  // a fragment the error must contain
};

std::vector<Malformed> MalformedFiles() {
  std::vector<Malformed> m;
  m.push_back({"empty", {}, "truncated"});
  m.push_back({"bad_magic", Raw().Put<uint32_t>(0x464C457F).Put<uint32_t>(3).Put<uint64_t>(0).Put<uint64_t>(0).b, "bad magic"});
  m.push_back({"version_1", Raw().Header(0, 0, 1).b, "unsupported GGUF version 1"});
  m.push_back({"version_4", Raw().Header(0, 0, 4).b, "unsupported GGUF version 4"});
  m.push_back({"truncated_header", Raw().Put<uint32_t>(0x46554747).Put<uint32_t>(3).Put<uint32_t>(0).b, "truncated"});
  m.push_back({"huge_kv_count", Raw().Header(0, uint64_t{1} << 62).b, "metadata count"});
  m.push_back({"huge_tensor_count", Raw().Header(~uint64_t{0}, 0).b, "tensor count"});
  m.push_back({"huge_string", Raw().Header(0, 1).Put<uint64_t>(uint64_t{1} << 60).Align(64).b, "runs past the end"});
  m.push_back({"truncated_value", Raw().Header(0, 1).Str("k").Put<uint32_t>(4).Put<uint16_t>(1).b, "truncated"});
  m.push_back({"unknown_value_type", Raw().Header(0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0).b, "unknown value type 13"});
  m.push_back({"huge_array", Raw().Header(0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(4).Put<uint64_t>(uint64_t{1} << 61).b, "cannot fit"});
  m.push_back({"unknown_array_type", Raw().Header(0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(77).Put<uint64_t>(1).b, "unknown array element type"});
  {
    Raw r;
    r.Header(0, 1).Str("k").Put<uint32_t>(9);
    for (int i = 0; i < 6; ++i) r.Put<uint32_t>(9).Put<uint64_t>(1);  // arrays of arrays of ...
    m.push_back({"deep_arrays", r.b, "nested too deeply"});
  }
  m.push_back({"bad_bool", Raw().Header(0, 1).Str("k").Put<uint32_t>(7).Put<uint8_t>(2).b, "neither 0 nor 1"});
  m.push_back({"duplicate_key", Raw().Header(0, 2).Str("k").Put<uint32_t>(4).Put<uint32_t>(1).Str("k").Put<uint32_t>(4).Put<uint32_t>(2).b, "duplicate metadata key"});
  m.push_back({"bad_alignment", Raw().Header(0, 1).Str("general.alignment").Put<uint32_t>(4).Put<uint32_t>(3).b, "power of two"});
  m.push_back({"zero_dims", Raw().Header(1, 0).Tensor("t", {}, 0, 0).Align().Put<float>(0).b, "0 dimensions"});
  m.push_back({"five_dims", Raw().Header(1, 0).Tensor("t", {1, 1, 1, 1, 1}, 0, 0).b, "5 dimensions"});
  m.push_back({"zero_dim", Raw().Header(1, 0).Tensor("t", {4, 0}, 0, 0).b, "invalid dimension 0"});
  m.push_back({"overflowing_dims", Raw().Header(1, 0).Tensor("t", {uint64_t{1} << 39, uint64_t{1} << 39}, 0, 0).b, "overflows"});
  m.push_back({"unknown_tensor_type", Raw().Header(1, 0).Tensor("t", {4}, 99, 0).b, "unknown ggml type 99"});
  m.push_back({"block_mismatch", Raw().Header(1, 0).Tensor("t", {30}, 8, 0).b, "block size"});
  // A k-quant row that ends inside a 256-weight super-block.
  m.push_back({"truncated_super_block", Raw().Header(1, 0).Tensor("t", {300, 2}, 12, 0).b, "block size"});
  m.push_back({"key_not_utf8", Raw().Header(0, 1).Str("general.\xff\xfe").Put<uint32_t>(4).Put<uint32_t>(1).b,
               "metadata key #0 is not valid UTF-8"});
  m.push_back({"tensor_name_not_utf8", Raw().Header(1, 0).Tensor("blk.\xc3", {4}, 0, 0).b, "tensor name #0 is not valid UTF-8"});
  m.push_back({"misaligned_offset", Raw().Header(1, 0).Tensor("t", {4}, 0, 4).b, "not aligned"});
  m.push_back({"duplicate_tensor", Raw().Header(2, 0).Tensor("t", {4}, 0, 0).Tensor("t", {4}, 0, 32).b, "duplicate tensor"});
  m.push_back({"tensor_past_end", Raw().Header(1, 0).Tensor("t", {64}, 0, 0).Align().Put<float>(1).b, "outside the file"});
  m.push_back({"tensor_offset_huge", Raw().Header(1, 0).Tensor("t", {4}, 0, ~uint64_t{0} - 31).Align().Put<float>(1).b, "outside the file"});
  return m;
}

TEST(GgufReader, RejectsMalformedFilesWithFormatErrors) {
  const std::vector<Malformed> cases = MalformedFiles();
  ASSERT_GE(cases.size(), 12u);
  for (const Malformed& c : cases) {
    auto file = GgufFile::Open(WriteBytes("bad_" + c.name + ".gguf", c.bytes));
    ASSERT_FALSE(file.ok()) << c.name << " was accepted";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << c.name << ": " << file.status();
    EXPECT_NE(file.status().message().find(c.message), std::string::npos)
        << c.name << ": message '" << file.status().message() << "' lacks '" << c.message << "'";
  }
}

TEST(GgufReader, MissingFileIsNotFound) {
  auto file = GgufFile::Open(testing::TempPath("does-not-exist.gguf"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
}

// A minimal well-formed llama GGUF with one layer, so config and tensor checks can be broken
// one at a time.
GgufWriter TinyLlama(bool drop_block_count, int64_t q_rows) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 16);
  w.AddUint32("llama.embedding_length", 8);
  if (!drop_block_count) w.AddUint32("llama.block_count", 1);
  w.AddUint32("llama.feed_forward_length", 8);
  w.AddUint32("llama.attention.head_count", 2);
  auto vec = [](int64_t n) { return F32Bytes(std::vector<float>(static_cast<size_t>(n), 0.5f)); };
  w.AddTensor("token_embd.weight", GgmlType::kF32, {8, 4}, vec(32));
  w.AddTensor("output_norm.weight", GgmlType::kF32, {8}, vec(8));
  w.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {8}, vec(8));
  w.AddTensor("blk.0.ffn_norm.weight", GgmlType::kF32, {8}, vec(8));
  w.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {8, q_rows}, vec(8 * q_rows));
  for (const char* n : {"attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
    w.AddTensor(absl::StrCat("blk.0.", n, ".weight"), GgmlType::kF32, {8, 8}, vec(64));
  }
  return w;
}

absl::Status LoadModel(const GgufWriter& w, const std::string& name) {
  auto file = GgufFile::Open(WriteBytes(name, w.Serialize()));
  if (!file.ok()) return file.status();
  return ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file).value())).status();
}

TEST(ModelWeightsLoad, AcceptsAWellFormedModel) {
  EXPECT_TRUE(LoadModel(TinyLlama(false, 8), "tiny_ok.gguf").ok());
}

TEST(ModelWeightsLoad, MissingRequiredKeyIsAFormatError) {
  const absl::Status s = LoadModel(TinyLlama(true, 8), "tiny_no_blocks.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("llama.block_count"), std::string::npos) << s;
}

TEST(ModelWeightsLoad, WrongTensorShapeNamesTheTensor) {
  const absl::Status s = LoadModel(TinyLlama(false, 7), "tiny_bad_q.gguf");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("tensor blk.0.attn_q.weight: expected 8x8, got 8x7"), std::string::npos) << s;
}

// Every weight in q4_k (or mxfp4), one layer of 256-wide rows: a damaged block (an infinite f16
// scale; MXFP4's E8M0 NaN, 0xFF) is a FORMAT_ERROR naming the tensor and the block, where it would
// otherwise turn outputs to NaN.
TEST(ModelWeightsLoad, DamagedBlockScalesNameTheTensor) {
  for (const GgmlType type : {GgmlType::kQ4_K, GgmlType::kMXFP4}) {
  for (bool damaged : {false, true}) {
    GgufWriter w;
    w.AddString("general.architecture", "llama");
    w.AddUint32("llama.context_length", 16);
    w.AddUint32("llama.embedding_length", 256);
    w.AddUint32("llama.block_count", 1);
    w.AddUint32("llama.feed_forward_length", 256);
    w.AddUint32("llama.attention.head_count", 2);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1, 1);
    auto matrix = [&](const std::string& name, int64_t rows) {
      std::vector<float> v(static_cast<size_t>(256 * rows));
      for (float& x : v) x = dist(rng);
      std::vector<uint8_t> bytes = Quantize(v, type);
      if (damaged && name == "blk.0.attn_k.weight") {  // block 1
        if (type == GgmlType::kMXFP4) {
          bytes[sizeof(BlockMXFP4) + offsetof(BlockMXFP4, e)] = 0xFF;
        } else {
          const uint16_t inf = 0x7C00;
          std::memcpy(bytes.data() + sizeof(BlockQ4_K) + offsetof(BlockQ4_K, d), &inf, 2);
        }
      }
      w.AddTensor(name, type, {256, rows}, bytes);
    };
    matrix("token_embd.weight", 4);
    w.AddTensor("output_norm.weight", GgmlType::kF32, {256}, F32Bytes(std::vector<float>(256, 1.0f)));
    w.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {256}, F32Bytes(std::vector<float>(256, 1.0f)));
    w.AddTensor("blk.0.ffn_norm.weight", GgmlType::kF32, {256}, F32Bytes(std::vector<float>(256, 1.0f)));
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      matrix(absl::StrCat("blk.0.", n, ".weight"), 256);
    }
    const std::string name = GetGgmlTypeInfo(static_cast<uint32_t>(type))->name;
    const absl::Status s = LoadModel(w, name + (damaged ? "_damaged.gguf" : "_ok.gguf"));
    if (!damaged) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("blk.0.attn_k.weight: block 1 of"), std::string::npos) << s;
  }
  }
}

// A generated model of `preset` (f32), made once (test processes run in parallel: written
// privately, then renamed into place).
std::string EditSource(const std::string& preset_name) {
  const std::string vocab = testing::SharedPath("models/stories260K.gguf");
  const ModelPreset* preset = nullptr;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == preset_name) preset = &p;
  }
  const std::string made = testing::TempPath(preset_name + "-edit-source.gguf");
  if (!std::filesystem::exists(made)) {
    const std::string partial = made + "." + std::to_string(::getpid());
    EXPECT_TRUE(MakeModel(*preset, GgmlType::kF32, vocab, 1, partial).ok());
    testing::PublishFile(partial, made);
  }
  return made;
}

// A generated model of `preset` rewritten: without tensor `drop`, with integer key `key` set to
// (or added as) `value` (where key is not empty); the load's status.
absl::Status LoadEdited(const std::string& preset_name, const std::string& drop, const std::string& key, int64_t value) {
  auto file = GgufFile::Open(EditSource(preset_name));
  EXPECT_TRUE(file.ok()) << file.status();
  GgufWriter w;
  for (const auto& [k, v] : (*file)->metadata()) {
    if (k != key) w.AddValue(k, v);
  }
  if (!key.empty()) w.AddUint32(key, static_cast<uint32_t>(value));
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    if (t.name != drop) w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  return LoadModel(w, preset_name + "-edited.gguf");
}

// The preset's edit source with tensor `name`'s dims and bytes changed by `edit`, loaded as `out`.
absl::Status LoadWithTensorEdited(const std::string& preset_name, const std::string& name, const std::string& out,
                                  const std::function<void(std::vector<int64_t>&, std::vector<uint8_t>&)>& edit) {
  auto file = GgufFile::Open(EditSource(preset_name));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return file.status();
  GgufWriter w;
  for (const auto& [k, v] : (*file)->metadata()) w.AddValue(k, v);
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    std::vector<int64_t> dims = t.dims;
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (t.name == name) edit(dims, bytes);
    w.AddTensor(t.name, t.type, dims, bytes);
  }
  return LoadModel(w, out);
}

// The new architectures' bad files (issue 40): each a FORMAT_ERROR naming the tensor or key.
TEST(ModelWeightsLoad, ArchitecturesRefuseFilesMissingWhatTheyNeed) {
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  ASSERT_TRUE(LoadEdited("tiny-gemma2", "", "", 0).ok());  // the control: unedited, it loads
  struct Case {
    const char *preset, *drop, *key;
    int64_t value;
    const char* message;
  };
  for (const Case& c : {Case{"tiny-gemma2", "blk.2.post_ffw_norm.weight", "", 0, "missing tensor 'blk.2.post_ffw_norm.weight'"},
                        Case{"tiny-gemma3", "blk.0.attn_k_norm.weight", "", 0, "missing tensor 'blk.0.attn_k_norm.weight'"},
                        // Four KV heads where the fused rows hold eight: 256 + 2 * 128 rows expected.
                        Case{"tiny-phi", "", "phi3.attention.head_count_kv", 4, "tensor blk.0.attn_qkv.weight: expected 256x512, got 256x768"},
                        Case{"tiny-gemma2", "", "gemma2.attention.sliding_window", 0, "gemma2.attention.sliding_window' = 0 is out of range"},
                        Case{"tiny-gemma3", "", "gemma3.attention.sliding_window", 4096, "gemma3.attention.sliding_window' = 4096 is out of range"},
                        // Gemma 4 (issue 56): more layers sharing K/V than leave two storing it;
                        // sharing that reads a layer of the other kind; per-layer embeddings of
                        // another width than the tensors'; a sliding pattern that is no array of
                        // a flag per layer; a KV head count that does not divide the heads.
                        Case{"tiny-gemma4", "", "gemma4.attention.shared_kv_layers", 6, "gemma4.attention.shared_kv_layers' = 6 is out of range"},
                        Case{"tiny-gemma4", "", "gemma4.attention.shared_kv_layers", 2, "layer 4 shares the keys and values of layer 2, a layer of another kind"},
                        Case{"tiny-gemma4", "", "gemma4.embedding_length_per_layer_input", 32, "per_layer_token_embd.weight: expected 192x512, got 384x512"},
                        Case{"tiny-gemma4", "", "gemma4.attention.sliding_window_pattern", 1, "gemma4.attention.sliding_window_pattern' holds 0 values where the model has 6 layers"},
                        Case{"tiny-gemma4", "", "gemma4.attention.head_count_kv", 3, "head count 4 is not a multiple of KV head count 3"},
                        Case{"tiny-gemma4", "blk.2.attn_k_norm.weight", "", 0, "missing tensor 'blk.2.attn_k_norm.weight'"},
                        Case{"tiny-gemma4", "rope_freqs.weight", "", 0, "missing tensor 'rope_freqs.weight'"},
                        // Qwen3.5 (issue 56): a DeltaNet state size that does not match its heads,
                        // a convolution width of 0, a full-attention interval of 0, a recurrent
                        // layer's tensor missing, a convolution of another width than its tensor's.
                        Case{"tiny-qwen35", "", "qwen35.ssm.inner_size", 200, "qwen35.ssm.inner_size' = 200 is not the DeltaNet state of 8 value heads"},
                        Case{"tiny-qwen35", "", "qwen35.ssm.conv_kernel", 0, "qwen35.ssm.conv_kernel' = 0 is out of range"},
                        Case{"tiny-qwen35", "", "qwen35.full_attention_interval", 0, "qwen35.full_attention_interval' = 0 is out of range"},
                        Case{"tiny-qwen35", "blk.1.ssm_a", "", 0, "missing tensor 'blk.1.ssm_a'"},
                        Case{"tiny-qwen35", "", "qwen35.ssm.conv_kernel", 3, "tensor blk.0.ssm_conv1d.weight: expected 3x512, got 4x512"},
                        Case{"tiny-qwen35", "", "qwen35.ssm.time_step_rank", 6, "is not the DeltaNet state of 6 value heads"},
                        // Experts (issue 57): a count of 0 where the family has experts, more used
                        // than there are, a router of another width than the count, an expert
                        // tensor missing, experts of another width than the key's.
                        Case{"tiny-qwen3moe", "", "qwen3moe.expert_count", 0, "qwen3moe.expert_count' = 0 is out of range (1..512)"},
                        Case{"tiny-qwen3moe", "", "qwen3moe.expert_used_count", 9, "qwen3moe.expert_used_count' = 9 is out of range (1..8)"},
                        Case{"tiny-qwen3moe", "", "qwen3moe.expert_count", 6, "tensor blk.0.ffn_gate_inp.weight: expected 256x6, got 256x8"},
                        Case{"tiny-qwen3moe", "blk.3.ffn_down_exps.weight", "", 0, "missing tensor 'blk.3.ffn_down_exps.weight'"},
                        Case{"tiny-qwen3moe", "", "qwen3moe.expert_feed_forward_length", 512, "tensor blk.0.ffn_gate_exps.weight: expected 256x512x8, got 256x256x8"},
                        Case{"tiny-qwen35moe", "blk.2.ffn_up_shexp.weight", "", 0, "missing tensor 'blk.2.ffn_up_shexp.weight'"},
                        Case{"tiny-gemma4moe", "blk.4.pre_ffw_norm_2.weight", "", 0, "missing tensor 'blk.4.pre_ffw_norm_2.weight'"},
                        Case{"tiny-gemma4moe", "blk.0.ffn_gate_inp.scale", "", 0, "missing tensor 'blk.0.ffn_gate_inp.scale'"},
                        // gpt-oss: its sinks, its attention output's bias, its router's and
                        // experts' biases missing; no sliding window.
                        Case{"tiny-gptoss", "blk.1.attn_sinks.weight", "", 0, "missing tensor 'blk.1.attn_sinks.weight'"},
                        Case{"tiny-gptoss", "blk.0.attn_output.bias", "", 0, "missing tensor 'blk.0.attn_output.bias'"},
                        Case{"tiny-gptoss", "blk.2.ffn_gate_inp.bias", "", 0, "missing tensor 'blk.2.ffn_gate_inp.bias'"},
                        Case{"tiny-gptoss", "blk.3.ffn_down_exps.bias", "", 0, "missing tensor 'blk.3.ffn_down_exps.bias'"},
                        Case{"tiny-gptoss", "", "gpt-oss.attention.sliding_window", 0, "gpt-oss.attention.sliding_window' = 0 is out of range"},
                        Case{"tiny-gptoss", "", "gpt-oss.attention.sliding_window_pattern", 0, "gpt-oss.attention.sliding_window_pattern' = 0 is out of range"}}) {
    const absl::Status s = LoadEdited(c.preset, c.drop, c.key, c.value);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.preset << " " << c.drop << c.key << ": " << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s;
  }
}

// An expert tensor whose third dimension disagrees with the expert count (its bytes the same:
// 4 experts of twice the rows): a FORMAT_ERROR naming it, not experts read out of their rows.
TEST(ModelWeightsLoad, ExpertTensorsOfAnotherCountAreRefused) {
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  ASSERT_TRUE(LoadEdited("tiny-qwen3moe", "", "", 0).ok());  // the control: unedited, it loads
  const absl::Status s = LoadWithTensorEdited("tiny-qwen3moe", "blk.1.ffn_up_exps.weight", "tiny-qwen3moe-4-experts.gguf",
                                              [](std::vector<int64_t>& dims, std::vector<uint8_t>&) {
                                                dims = {dims[0], dims[1] * 2, dims[2] / 2};
                                              });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("tensor blk.1.ffn_up_exps.weight: expected 256x256x8, got 256x512x4"), std::string::npos) << s;
}

// A sink that is not a finite logit (gpt-oss): a FORMAT_ERROR naming the tensor, not NaN outputs.
TEST(ModelWeightsLoad, SinksThatAreNotFiniteAreRefused) {
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  ASSERT_TRUE(LoadEdited("tiny-gptoss", "", "", 0).ok());  // the control: unedited, it loads
  const absl::Status s = LoadWithTensorEdited("tiny-gptoss", "blk.2.attn_sinks.weight", "tiny-gptoss-nan-sink.gguf",
                                              [](std::vector<int64_t>&, std::vector<uint8_t>& bytes) {
                                                const float nan = std::numeric_limits<float>::quiet_NaN();
                                                std::memcpy(bytes.data() + 3 * sizeof(float), &nan, sizeof(float));
                                              });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("blk.2.attn_sinks.weight' holds nan"), std::string::npos) << s;
}

// Experts in a family whose data declares none (ArchitectureData::experts): refused by name, not
// misread as a dense model.
TEST(ModelWeightsLoad, ExpertsWhereTheFamilyHasNoneAreUnsupported) {
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  const absl::Status s = LoadEdited("tiny-qwen3", "", "qwen3.expert_count", 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("qwen3.expert_count"), std::string::npos) << s;
}

TEST(ModelWeightsLoad, OtherArchitecturesAreUnsupported) {
  GgufWriter w;
  w.AddString("general.architecture", "mamba");
  auto file = GgufFile::Open(WriteBytes("mamba.gguf", w.Serialize()));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ModelConfig::FromGguf(**file).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace llm42
