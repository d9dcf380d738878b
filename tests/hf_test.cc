// Hugging Face directories: safetensors validation, tokenizer files, and the same weights in
// GGUF and HF layout computing the same bits.
#include <numbers>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/engine/session.h"
#include "lib/kv/kv_cache.h"
#include "lib/format/gguf_reader.h"
#include "lib/model/model_file.h"
#include "lib/model/model_weights.h"
#include "lib/maker/model_maker.h"
#include "lib/format/safetensors.h"
#include "lib/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "proto/sentencepiece_model.pb.h"
#include "tests/model_fixture.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// config.json of a small model (for directories whose weights the test does not load).
json SmallConfig(const char* architecture, int64_t vocab_size) {
  return {{"architectures", {architecture}}, {"hidden_size", 64}, {"num_attention_heads", 4},
          {"num_hidden_layers", 1}, {"intermediate_size", 128}, {"max_position_embeddings", 128},
          {"vocab_size", vocab_size}};
}

// A safetensors file from (name, dtype, shape, bytes) entries, laid out in order.
struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string Safetensors(const std::vector<Entry>& entries, const json& extra = json::object()) {
  json header = extra;
  std::string data;
  for (const Entry& e : entries) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.bytes.size()}}};
    data += e.bytes;
  }
  const std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
  return out + h + data;
}

absl::StatusCode OpenCode(const std::string& bytes) {
  const std::string path = testing::TempPath("bad.safetensors");
  WriteFile(path, bytes);
  return SafetensorsFile::Open(path).status().code();
}

TEST(Safetensors, ReadsAValidFile) {
  const std::string path = testing::TempPath("ok.safetensors");
  WriteFile(path, Safetensors({{"a", "F32", {2, 2}, std::string(16, '\1')}, {"b", "BF16", {3}, std::string(6, '\2')}},
                              {{"__metadata__", {{"format", "pt"}}}}));
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const SafetensorsTensor* b = (*f)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, "BF16");
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(b->n_bytes, 6u);
  EXPECT_EQ(b->data[0], 2);
}

TEST(Safetensors, EveryMalformedHeaderIsAFormatError) {
  const absl::StatusCode kBad = absl::StatusCode::kDataLoss;
  EXPECT_EQ(OpenCode("short"), kBad);
  std::string huge(8, '\xFF');
  EXPECT_EQ(OpenCode(huge + "{}"), kBad);  // header length past the file
  std::string len(8, '\0');
  len[0] = 3;
  EXPECT_EQ(OpenCode(len + "[1]"), kBad);  // not an object
  len[0] = 5;
  EXPECT_EQ(OpenCode(len + "{\"a\":"), kBad);  // not JSON
  auto with = [](json entry, const std::string& data) {
    const std::string h = json{{"t", entry}}.dump();
    std::string out(8, '\0');
    out[0] = static_cast<char>(h.size());
    return out + h + data;
  };
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}, "1234")), kBad);  // past the end
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 4}}}, "1234")), kBad);  // size != shape
  EXPECT_EQ(OpenCode(with({{"dtype", "Q9"}, {"shape", {1}}, {"data_offsets", {0, 4}}}, "1234")), kBad);   // dtype
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}}, "1234")), kBad);  // shape
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 0}}}, "1234")), kBad);   // reversed
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {1}}}, "1234")), kBad);                            // no offsets
  EXPECT_EQ(OpenCode(with({{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}, "12345678")), kBad);  // trailing bytes
  EXPECT_EQ(OpenCode(Safetensors({{"a", "F32", {1}, "1234"}, {"b", "F32", {1}, "1234"}})), absl::StatusCode::kOk);
  // Overlap: two tensors on the same bytes.
  const std::string h = json{{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
                             {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}}.dump();
  std::string overlap(8, '\0');
  overlap[0] = static_cast<char>(h.size());
  EXPECT_EQ(OpenCode(overlap + h + "1234"), kBad);
}

// ---- A GGUF model exported to Hugging Face layout, as transformers would save it. ----

struct Variant {
  const char* preset;  // model_maker preset
  const char* hf_architecture;
  int shards;
};

// The inverse of GGUF's q/k row order: HF row s * hd/2 + i of a head is GGUF row 2i + s.
std::string UnpermuteRows(const uint8_t* data, size_t n_bytes, int64_t rows, int64_t heads) {
  std::string out(n_bytes, '\0');
  const size_t rb = n_bytes / static_cast<size_t>(rows);
  const int64_t hd = rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t s = 0; s < 2; ++s) {
        std::memcpy(out.data() + static_cast<size_t>(h * hd + s * half + i) * rb,
                    data + static_cast<size_t>(h * hd + 2 * i + s) * rb, rb);
      }
    }
  }
  return out;
}

std::string HfName(const std::string& gguf, const std::string& arch) {
  // Gemma's layer norms and Phi-3's fused tensors by their own names.
  static const std::map<std::string, std::string> kGemma = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
  static const std::map<std::string, std::string> kPhi3 = {{"attn_qkv.weight", "self_attn.qkv_proj.weight"},
                                                           {"ffn_up.weight", "mlp.gate_up_proj.weight"}};
  const std::map<std::string, std::string>* own = arch.starts_with("gemma") ? &kGemma : arch == "phi3" ? &kPhi3 : nullptr;
  if (own != nullptr && gguf.starts_with("blk.")) {
    const size_t dot = gguf.find('.', 4);
    if (auto it = own->find(gguf.substr(dot + 1)); it != own->end()) {
      return "model.layers." + gguf.substr(4, dot - 4) + "." + it->second;
    }
  }
  static const std::map<std::string, std::string> kNames = {
      {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}, {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"}, {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"}, {"attn_v.bias", "self_attn.v_proj.bias"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"}, {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"}};
  if (auto it = kNames.find(gguf); it != kNames.end()) return it->second;
  const size_t dot = gguf.find('.', 4);  // blk.N.rest
  return "model.layers." + gguf.substr(4, dot - 4) + "." + kNames.at(gguf.substr(dot + 1));
}

// Generates the variant's GGUF (GPT-2 vocabulary, bf16) and its HF directory once per build.
struct Exported {
  std::string gguf, dir;
};

Exported Export(const Variant& v) {
  const std::string vocab = testing::SharedPath("vocab/ggml-vocab-gpt-2.gguf");
  const Exported out{testing::TempPath(std::string(v.preset) + "-gpt2.gguf"), testing::TempPath(std::string(v.preset) + "-hf")};
  if (fs::exists(out.dir + "/config.json")) return out;
  const std::string tmp = out.dir + "." + std::to_string(::getpid());
  fs::create_directories(tmp);
  const ModelPreset* preset = nullptr;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == v.preset) preset = &p;
  }
  EXPECT_NE(preset, nullptr);
  const std::string gguf_tmp = tmp + "/model.gguf";
  EXPECT_TRUE(MakeModel(*preset, GgmlType::kBF16, vocab, 7, gguf_tmp).ok());
  auto file = GgufFile::Open(gguf_tmp);
  EXPECT_TRUE(file.ok()) << file.status();

  json config = {{"architectures", {v.hf_architecture}}, {"hidden_size", preset->n_embd},
                 {"num_hidden_layers", preset->n_layer}, {"intermediate_size", preset->n_ff},
                 {"num_attention_heads", preset->n_head}, {"num_key_value_heads", preset->n_head_kv},
                 {"max_position_embeddings", preset->n_ctx}, {"vocab_size", 50257},
                 {"rms_norm_eps", 1e-5}, {"rope_theta", preset->llama3_rope ? 500000.0 : 10000.0},
                 {"bos_token_id", 50256}, {"eos_token_id", 50256}, {"tie_word_embeddings", false},
                 {"torch_dtype", "bfloat16"}};
  if (std::string(v.hf_architecture) == "MistralForCausalLM") config["sliding_window"] = 4096;
  if (preset->head_dim > 0) config["head_dim"] = preset->head_dim;
  if (preset->sliding_window > 0) config["sliding_window"] = preset->sliding_window;
  const std::string arch = preset->architecture;
  if (arch == "gemma2") {
    for (const auto& [key, value] : preset->keys) config[key] = value;  // the softcaps, by their GGUF and HF name
    config["tie_word_embeddings"] = true;
  }
  if (arch == "gemma3") {
    config["rope_theta"] = 1000000.0;
    config["rope_local_base_freq"] = 10000.0;
    config["tie_word_embeddings"] = true;
  }
  if (arch == "phi3") {  // the factors model_maker wrote as tensors, as Phi-3.5's config lists them
    nlohmann::json scaling = {{"type", "longrope"}};
    for (const auto& [tensor, key] : {std::pair{"rope_factors_short.weight", "short_factor"}, {"rope_factors_long.weight", "long_factor"}}) {
      const GgufTensorInfo* t = (*file)->FindTensor(tensor);
      EXPECT_NE(t, nullptr);
      std::vector<float> f(static_cast<size_t>(t->dims[0]));
      std::memcpy(f.data(), t->data, f.size() * sizeof(float));
      scaling[key] = f;
    }
    config["rope_scaling"] = scaling;
    config["original_max_position_embeddings"] = 64;
  }
  if (preset->llama3_rope) {  // the values model_maker's rope_freqs.weight was computed with
    config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  }
  WriteFile(tmp + "/config.json", config.dump(2));
  fs::copy_file(testing::SharedPath("vocab/gpt2-hf/vocab.json"), tmp + "/vocab.json");
  fs::copy_file(testing::SharedPath("vocab/gpt2-hf/merges.txt"), tmp + "/merges.txt");

  std::vector<std::vector<Entry>> shards(static_cast<size_t>(v.shards));
  json weight_map = json::object();
  size_t i = 0;
  const bool llama = std::string(v.hf_architecture).starts_with("Llama") || std::string(v.hf_architecture).starts_with("Mistral");
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    if (t.name == "rope_freqs.weight" || t.name.starts_with("rope_factors_")) continue;  // config.json's rope_scaling
    std::string bytes(reinterpret_cast<const char*>(t.data), t.n_bytes);
    if (arch.starts_with("gemma") && t.name.ends_with("norm.weight")) {  // HF's Gemma norms hold weight - 1
      for (size_t i = 0; i < t.n_bytes / 4; ++i) {
        float w;
        std::memcpy(&w, bytes.data() + 4 * i, 4);
        w -= 1.0f;  // exact: the weights lie in [0.5, 1.5]
        std::memcpy(bytes.data() + 4 * i, &w, 4);
      }
    }
    Entry e{HfName(t.name, arch), t.type == GgmlType::kF32 ? "F32" : "BF16", {t.dims.rbegin(), t.dims.rend()}, bytes};
    const bool q = t.name.find("attn_q.") != std::string::npos, k = t.name.find("attn_k.") != std::string::npos;
    if (llama && (q || k)) e.bytes = UnpermuteRows(t.data, t.n_bytes, e.shape[0], q ? preset->n_head : preset->n_head_kv);
    const size_t shard = i++ % shards.size();
    const std::string shard_name = shards.size() == 1 ? "model.safetensors"
                                                      : absl::StrCat("model-0000", shard + 1, "-of-0000", shards.size(), ".safetensors");
    weight_map[e.name] = shard_name;
    shards[shard].push_back(std::move(e));
  }
  for (size_t s = 0; s < shards.size(); ++s) {
    WriteFile(tmp + "/" + weight_map[shards[s][0].name].get<std::string>(), Safetensors(shards[s]));
  }
  if (shards.size() > 1) WriteFile(tmp + "/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  file->reset();
  testing::PublishFile(gguf_tmp, out.gguf);
  std::error_code ec;
  fs::rename(tmp, out.dir, ec);  // a parallel test process may have won the race
  if (ec) fs::remove_all(tmp);
  return out;
}

std::vector<float> Logits(const std::string& path, Schedule schedule, const std::vector<int32_t>& prompt) {
  auto file = OpenModel(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  auto model = ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file).value()));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const ModelConfig& c = (*model)->config();
  CpuBackend be(2);
  KvCache cache(8);
  auto runner = testing::MakeRunner(**model, be, cache);
  const int32_t seq = cache.Create();
  const auto n = static_cast<int32_t>(prompt.size());
  EXPECT_TRUE(cache.Reserve(seq, n));
  std::vector<int32_t> positions, seqs(prompt.size(), seq), rows;
  for (int32_t p = 0; p < n; ++p) {
    positions.push_back(p);
    rows.push_back(p);
  }
  std::vector<float> logits(static_cast<size_t>(n * c.n_vocab));
  EXPECT_TRUE(runner->Forward(cache, ForwardBatch{prompt, positions, seqs, rows, schedule}, logits.data()).ok());
  return logits;
}

// llama.cpp's test-tokenizer-0 vectors for the vocabulary at `base`, through `tok`.
void ExpectVectors(const Tokenizer& tok, const std::string& base) {
  const std::vector<testing::VocabVector> vectors = testing::ReadVocabVectors(base);
  EXPECT_GE(vectors.size(), 40u);
  for (const testing::VocabVector& v : vectors) {
    EXPECT_EQ(tok.Encode(v.text, false, false), v.ids) << v.text;
  }
}

class HfModel : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (!fs::exists(testing::SharedPath("vocab/gpt2-hf/vocab.json")) ||
        !fs::exists(testing::SharedPath("vocab/ggml-vocab-gpt-2.gguf"))) {
      GTEST_SKIP() << "../shared/vocab (GPT-2 vocabulary in GGUF and HF layout) is missing";
    }
    exported_ = Export(GetParam());
  }
  Exported exported_;
};

TEST_P(HfModel, SameWeightsInGgufAndHfLayoutGiveIdenticalLogits) {
  const std::vector<int32_t> prompt = {50256, 464, 3290, 318, 257, 1332, 13, 1026, 373, 845, 6029, 11};
  for (Schedule s : {Schedule::kFixed, Schedule::kFast}) {
    const std::vector<float> gguf = Logits(exported_.gguf, s, prompt);
    const std::vector<float> hf = Logits(exported_.dir, s, prompt);
    ASSERT_EQ(gguf.size(), hf.size());
    ASSERT_FALSE(gguf.empty());
    EXPECT_EQ(std::memcmp(gguf.data(), hf.data(), gguf.size() * sizeof(float)), 0)
        << "schedule " << (s == Schedule::kFixed ? "fixed" : "fast");
  }
}

// Sensitivity control for the test above: in Llama's HF layout the q rows really are in another
// order than GGUF's, so identical logits mean the loader permuted them back.
TEST(HfLlama, QueryRowsDifferBetweenLayouts) {
  if (!fs::exists(testing::SharedPath("vocab/gpt2-hf/vocab.json"))) GTEST_SKIP() << "../shared/vocab is missing";
  const Exported exported_ = Export(Variant{"tiny-llama3", "LlamaForCausalLM", 2});
  auto gguf = GgufFile::Open(exported_.gguf);
  ASSERT_TRUE(gguf.ok());
  const GgufTensorInfo* q = (*gguf)->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  bool found = false;
  for (const auto& entry : fs::directory_iterator(exported_.dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    auto st = SafetensorsFile::Open(entry.path().string());
    ASSERT_TRUE(st.ok());
    if (const SafetensorsTensor* t = (*st)->Find("model.layers.0.self_attn.q_proj.weight")) {
      found = true;
      ASSERT_EQ(t->n_bytes, q->n_bytes);
      EXPECT_NE(std::memcmp(t->data, q->data, q->n_bytes), 0);
    }
  }
  EXPECT_TRUE(found);
}

TEST_P(HfModel, ConfigAndTokenizerMatchTheGguf) {
  auto hf = OpenModel(exported_.dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  auto gguf = GgufFile::Open(exported_.gguf);
  ASSERT_TRUE(gguf.ok());
  auto hc = ModelConfig::FromGguf(**hf);
  auto gc = ModelConfig::FromGguf(**gguf);
  ASSERT_TRUE(hc.ok() && gc.ok());
  EXPECT_EQ(hc->architecture, gc->architecture);
  EXPECT_EQ(hc->n_rot, gc->n_rot);
  EXPECT_EQ(hc->head_dim, gc->head_dim);
  EXPECT_EQ(hc->sliding_window, gc->sliding_window);
  EXPECT_EQ(hc->layer_sliding, gc->layer_sliding);
  EXPECT_EQ(hc->attn_softcap, gc->attn_softcap);
  EXPECT_EQ(hc->final_softcap, gc->final_softcap);
  EXPECT_EQ(hc->rope_attn_factor, gc->rope_attn_factor);
  EXPECT_EQ(hc->rope_original_context, gc->rope_original_context);
  EXPECT_EQ(hc->rope_freq_base, gc->rope_freq_base);
  EXPECT_EQ(hc->rope_neox, gc->rope_neox);
  auto hf_tok = Tokenizer::FromGguf(**hf);
  auto gguf_tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(hf_tok.ok() && gguf_tok.ok()) << hf_tok.status();
  EXPECT_EQ((*hf_tok)->vocab().size(), (*gguf_tok)->vocab().size());
  EXPECT_EQ((*hf_tok)->vocab().eos(), 50256);
  // llama.cpp's GPT-2 vectors, through vocab.json + merges.txt.
  ExpectVectors(**hf_tok, testing::SharedPath("vocab/ggml-vocab-gpt-2.gguf"));
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfModel,
                         ::testing::Values(Variant{"tiny-llama3", "LlamaForCausalLM", 2},
                                           Variant{"tiny", "MistralForCausalLM", 1},
                                           Variant{"tiny-qwen2", "Qwen2ForCausalLM", 1},
                                           Variant{"tiny-qwen3", "Qwen3ForCausalLM", 1},
                                           Variant{"tiny-gemma2", "Gemma2ForCausalLM", 1},
                                           Variant{"tiny-gemma3", "Gemma3ForCausalLM", 2},
                                           Variant{"tiny-phi", "Phi3ForCausalLM", 1}),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.hf_architecture);
                         });

// The tokenizer keys of a vocabulary GGUF (null where absent), kept alive by `file`.
struct VocabKeys {
  std::unique_ptr<GgufFile> file;
  const GgufValue *tokens = nullptr, *scores = nullptr, *types = nullptr, *merges = nullptr;
};
VocabKeys ReadVocabKeys(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return {};
  VocabKeys v;
  v.file = std::move(gguf).value();
  v.tokens = v.file->Find("tokenizer.ggml.tokens");
  v.scores = v.file->Find("tokenizer.ggml.scores");
  v.types = v.file->Find("tokenizer.ggml.token_type");
  v.merges = v.file->Find("tokenizer.ggml.merges");
  return v;
}

// tokenizer.json with Llama 3's pre-tokenizer, built from the llama-bpe GGUF's tokens and
// merges, opened as a tokenizer-only directory: llama.cpp's llama-bpe vectors must come out.
TEST(HfTokenizerJson, Llama3VectorsThroughTokenizerJson) {
  LLM42_SHARED_OR_SKIP(vocab_path, "vocab/ggml-vocab-llama-bpe.gguf");
  const VocabKeys keys = ReadVocabKeys(vocab_path);
  const GgufValue *tokens = keys.tokens, *types = keys.types, *merges = keys.merges;
  ASSERT_TRUE(tokens && types && merges);
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens->string_array.size(); ++i) {
    if (types->int_array[i] == 3) {
      added.push_back({{"id", i}, {"content", tokens->string_array[i]}, {"special", true}});
    } else {
      vocab[tokens->string_array[i]] = i;
    }
  }
  const json tok = {
      {"added_tokens", added},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges->string_array}}}};
  const fs::path dir = testing::TempPath("llama3-tokenizer-hf");
  fs::create_directories(dir);
  WriteFile(dir / "tokenizer.json", tok.dump());
  WriteFile(dir / "tokenizer_config.json", json{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}.dump());
  WriteFile(dir / "config.json", SmallConfig("LlamaForCausalLM", 128256).dump());
  auto file = OpenModel(dir.string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->tensors().empty());
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab().pre(), "llama-bpe");
  EXPECT_EQ((*t)->vocab().bos(), 128000);
  EXPECT_EQ((*t)->vocab().eos(), 128009);
  EXPECT_EQ((*t)->Encode("Hello world", true, true), (std::vector<int32_t>{128000, 9906, 1917}));
  ExpectVectors(**t, vocab_path);
}

// tokenizer.model (SentencePiece's ModelProto, as Llama 2 and Mistral ship it), serialized from
// the llama-spm GGUF's pieces: llama.cpp's llama-spm vectors must come out.
TEST(HfTokenizerModel, SentencePieceVectorsThroughTokenizerModel) {
  LLM42_SHARED_OR_SKIP(vocab_path, "vocab/ggml-vocab-llama-spm.gguf");
  const VocabKeys keys = ReadVocabKeys(vocab_path);
  const GgufValue *tokens = keys.tokens, *scores = keys.scores, *types = keys.types;
  ASSERT_TRUE(tokens && scores && types);
  sentencepiece::ModelProto model;
  model.mutable_trainer_spec()->set_model_type(sentencepiece::TrainerSpec::BPE);
  for (size_t i = 0; i < tokens->string_array.size(); ++i) {
    auto* piece = model.add_pieces();
    piece->set_piece(tokens->string_array[i]);
    piece->set_score(static_cast<float>(scores->float_array[i]));
    piece->set_type(static_cast<sentencepiece::ModelProto::SentencePiece::Type>(types->int_array[i]));
  }
  const fs::path dir = testing::TempPath("spm-tokenizer-hf");
  fs::create_directories(dir);
  WriteFile(dir / "tokenizer.model", model.SerializeAsString());
  WriteFile(dir / "tokenizer_config.json", json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}.dump());
  WriteFile(dir / "config.json", SmallConfig("MistralForCausalLM", 32000).dump());
  auto file = OpenModel(dir.string());
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab().model(), "llama");
  EXPECT_EQ((*t)->vocab().bos(), 1);
  EXPECT_EQ((*t)->Encode("Hello world", true, true).front(), 1);
  ExpectVectors(**t, vocab_path);
  // A Unigram model is refused, naming the type.
  model.mutable_trainer_spec()->set_model_type(sentencepiece::TrainerSpec::UNIGRAM);
  WriteFile(dir / "tokenizer.model", model.SerializeAsString());
  EXPECT_THAT(std::string(OpenModel(dir.string()).status().message()), ::testing::HasSubstr("UNIGRAM"));
}

// tokenizer.json as Hugging Face ports a SentencePiece BPE model (Llama 2's, Mistral's, Gemma's:
// byte-fallback BPE, the merges its converter derives from the pieces' scores), with no
// tokenizer.model beside it, built from the llama-spm GGUF's pieces as transformers' converter
// does (every split of a piece into two pieces, ordered by the piece's score): llama.cpp's
// llama-spm vectors must come out. Then Gemma's normalizer (spaces replaced, nothing prepended):
// no space marker before the first word.
TEST(HfTokenizerJson, SentencePieceVectorsThroughByteFallbackBpe) {
  LLM42_SHARED_OR_SKIP(vocab_path, "vocab/ggml-vocab-llama-spm.gguf");
  const VocabKeys keys = ReadVocabKeys(vocab_path);
  const GgufValue *tokens = keys.tokens, *scores = keys.scores, *types = keys.types;
  ASSERT_TRUE(tokens && scores && types);
  const std::vector<std::string>& pieces = tokens->string_array;
  std::map<std::string, size_t> id;
  for (size_t i = 0; i < pieces.size(); ++i) id.emplace(pieces[i], i);
  struct Merge {
    size_t left, right;
    double score;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::vector<Merge> local;
    const std::string& p = pieces[i];
    for (size_t cut = 1; cut < p.size(); ++cut) {
      if ((static_cast<unsigned char>(p[cut]) & 0xC0) == 0x80) continue;  // inside a character
      auto l = id.find(p.substr(0, cut)), r = id.find(p.substr(cut));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, scores->float_array[i]});
    }
    std::sort(local.begin(), local.end(),
              [](const Merge& a, const Merge& b) { return std::tie(a.left, a.right) < std::tie(b.left, b.right); });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json vocab = json::object(), merge_list = json::array(), added = json::array();
  for (size_t i = 0; i < pieces.size(); ++i) {
    vocab[pieces[i]] = i;
    if (types->int_array[i] == 3 || types->int_array[i] == 2) {
      added.push_back({{"id", i}, {"content", pieces[i]}, {"special", true}});
    }
  }
  for (const Merge& m : merges) merge_list.push_back({pieces[m.left], pieces[m.right]});
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  json tok = {{"added_tokens", added},
              {"normalizer",
               {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace}}}},
              {"pre_tokenizer", nullptr},
              {"model",
               {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"vocab", vocab}, {"merges", merge_list}}}};
  const fs::path dir = testing::TempPath("spm-tokenizer-json");
  fs::remove_all(dir);
  fs::create_directories(dir);
  WriteFile(dir / "tokenizer.json", tok.dump());
  WriteFile(dir / "tokenizer_config.json", json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}.dump());
  WriteFile(dir / "config.json", SmallConfig("LlamaForCausalLM", 32000).dump());
  auto open = [&]() -> std::unique_ptr<Tokenizer> {
    auto file = OpenModel(dir.string());
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return nullptr;
    auto t = Tokenizer::FromGguf(**file);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(t).value() : nullptr;
  };
  auto t = open();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab().model(), "llama");
  EXPECT_EQ(t->vocab().bos(), 1);
  ExpectVectors(*t, vocab_path);
  // Gemma's normalizer: the first word gets no marker.
  tok["normalizer"] = replace;
  WriteFile(dir / "tokenizer.json", tok.dump());
  t = open();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("Hello world", false, true),
            (std::vector<int32_t>{static_cast<int32_t>(id.at("Hello")), static_cast<int32_t>(id.at("\u2581world"))}));
  // A normalizer that does something else, and a pre-tokenizer that splits, are refused by name.
  tok["normalizer"] = {{"type", "NFKC"}};
  WriteFile(dir / "tokenizer.json", tok.dump());
  EXPECT_THAT(std::string(OpenModel(dir.string()).status().message()), ::testing::HasSubstr("NFKC"));
  tok["normalizer"] = replace;
  tok["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"split", true}};
  WriteFile(dir / "tokenizer.json", tok.dump());
  EXPECT_EQ(OpenModel(dir.string()).status().code(), absl::StatusCode::kUnimplemented);
}

// Chat through a session: a Hugging Face directory whose tokenizer_config.json carries Qwen
// 2.5's chat template; the request's prompt must be the tokens of the Jinja rendering.
TEST(HfChat, MessagesAreRenderedWithTheModelsTemplate) {
  LLM42_SHARED_OR_SKIP(qwen_template, "templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  if (!fs::exists(testing::SharedPath("vocab/gpt2-hf/vocab.json"))) GTEST_SKIP() << "../shared/vocab is missing";
  const Exported exported = Export(Variant{"tiny-qwen2", "Qwen2ForCausalLM", 1});
  const fs::path dir = testing::TempPath("qwen-chat-hf");
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "vocab.json", "merges.txt", "model.safetensors"}) {
    fs::create_symlink(fs::absolute(fs::path(exported.dir) / f), dir / f);
  }
  WriteFile(dir / "tokenizer_config.json", json{{"chat_template", testing::ReadFile(qwen_template)}}.dump());
  SessionOptions o;
  o.model_path = dir.string();
  o.threads = 1;
  auto session = Session::Create(o);
  ASSERT_TRUE(session.ok()) << session.status();
  RequestOptions r;
  r.messages = {{"system", "Be brief."}, {"user", "Hi there"}};
  r.max_tokens = 4;
  r.deterministic = true;
  auto request = (*session)->Submit(r, nullptr);
  ASSERT_TRUE(request.ok()) << request.status();
  // What Qwen's template renders for this conversation (checked against Jinja itself in
  // chat_template_test).
  const std::string rendered =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ((*request)->prompt(), (*session)->tokenizer().Encode(rendered, false, true));
  (*request)->Wait(-1);
  EXPECT_EQ((*request)->status().code(), absl::StatusCode::kOk);
  r.prompt_text = "x";
  r.has_prompt_text = true;
  EXPECT_EQ((*session)->Submit(r, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HfDirectory, RefusesWhatItCannotLoad) {
  const fs::path dir = testing::TempPath("refuse-hf");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto code = [&] { return OpenModel(dir.string()).status(); };
  EXPECT_EQ(code().code(), absl::StatusCode::kNotFound);  // no config.json
  WriteFile(dir / "config.json", "{not json");
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);
  json config = {{"architectures", {"GPT2LMHeadModel"}}};
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("GPT2LMHeadModel"));
  config = SmallConfig("LlamaForCausalLM", 10);
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("yarn"));
  config.erase("rope_scaling");
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);  // no tokenizer
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("tokenizer"));
  WriteFile(dir / "tokenizer.json", json{{"model", {{"type", "Unigram"}}}}.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kUnimplemented);
  fs::remove(dir / "tokenizer.json");
  WriteFile(dir / "vocab.json", json{{"a", 0}, {"b", 1}}.dump());
  WriteFile(dir / "merges.txt", "#version: 0.2\na b\n");
  WriteFile(dir / "model.safetensors", Safetensors({{"model.norm.weight", "I64", {8}, std::string(64, '\0')}}));
  EXPECT_EQ(code().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("I64"));
  WriteFile(dir / "model.safetensors", Safetensors({{"model.norm.weight", "F32", {2, 2, 2}, std::string(32, '\0')}}));
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);  // three dimensions
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("3 dimensions"));
  WriteFile(dir / "model.safetensors", Safetensors({{"model.layers.0.self_attn.q_proj.weight", "F32", {6, 1}, std::string(24, '\0')}}));
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);  // 6 query rows are not whole heads of 4 heads
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("heads"));
  fs::remove(dir / "model.safetensors");
  // Sharded: a shard the index names is missing; a shard outside the directory.
  WriteFile(dir / "model.safetensors.index.json", json{{"weight_map", {{"model.norm.weight", "model-00002-of-00002.safetensors"}}}}.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(code().message()), ::testing::HasSubstr("model-00002-of-00002.safetensors"));
  WriteFile(dir / "model.safetensors.index.json", json{{"weight_map", {{"model.norm.weight", "../elsewhere.safetensors"}}}}.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);
  WriteFile(dir / "model.safetensors.index.json", json{{"weight_map", 3}}.dump());
  EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss);
  fs::remove(dir / "model.safetensors.index.json");
  // A config field of another JSON type than the one read (found by hf_fuzzer: it threw
  // nlohmann's type_error through OpenModel and terminated the process).
  for (const char* field : {"tie_word_embeddings", "hidden_size", "rms_norm_eps"}) {
    json bad = config;
    bad[field] = std::string(field) == "tie_word_embeddings" ? json(1) : json("not a number");
    WriteFile(dir / "config.json", bad.dump());
    EXPECT_EQ(code().code(), absl::StatusCode::kDataLoss) << field << ": " << code();
  }
}

// The Llama 3.1 frequency divisors as transformers' _compute_llama3_parameters derives them:
// new inv_freq per band, divisor = old / new.
TEST(RopeScaling, Llama3FactorsMatchTransformersFormula) {
  const double base = 500000, factor = 8, low = 1, high = 4, original = 8192;
  const std::vector<float> got = Llama3RopeFactors(128, base, factor, low, high, original);
  ASSERT_EQ(got.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    const double inv_freq = std::pow(base, -2.0 * i / 128);
    const double wavelen = 2 * std::numbers::pi / inv_freq;
    double scaled = inv_freq;
    if (wavelen > original / low) {
      scaled = inv_freq / factor;
    } else if (wavelen >= original / high) {
      const double smooth = (original / wavelen - low) / (high - low);
      scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    EXPECT_NEAR(got[static_cast<size_t>(i)], inv_freq / scaled, 1e-5) << i;
  }
  EXPECT_EQ(got.front(), 1.0f);
  EXPECT_EQ(got.back(), 8.0f);
}

}  // namespace
}  // namespace llm42
