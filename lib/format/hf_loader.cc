#include "lib/format/hf_loader.h"

#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/format/rope_factors.h"
#include "lib/format/safetensors.h"
#include "lib/format/vocab_spec.h"
#include "lib/util/platform.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/status.h"
#include "nlohmann/json.hpp"
#include "proto/sentencepiece_model.pb.h"

namespace llm42 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// The pre-tokenizer regexes of Llama 3 and Qwen 2 as their tokenizer.json files spell them.
constexpr char kLlama3Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kQwen2Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// What the GgufFile keeps alive: the mapped shards and the permuted copies.
struct Storage {
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::deque<std::vector<uint8_t>> owned;
};

absl::StatusOr<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", platform::PathUtf8(path)));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<json> ReadJson(const fs::path& path) {
  LLM42_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return FormatError(platform::PathUtf8(path), " is not a JSON object");
  return j;
}

GgufValue Uint(int64_t v) {
  GgufValue g;
  g.type = GgufType::kUint32;
  g.int_value = v;
  g.uint_value = static_cast<uint64_t>(v);
  return g;
}
GgufValue Float(double v) {
  GgufValue g;
  g.type = GgufType::kFloat32;
  g.float_value = v;
  return g;
}
GgufValue Bool(bool v) {
  GgufValue g;
  g.type = GgufType::kBool;
  g.bool_value = v;
  g.int_value = v;
  return g;
}
GgufValue String(std::string v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.string_value = std::move(v);
  return g;
}
GgufValue Strings(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.array_type = GgufType::kString;
  g.string_array = std::move(v);
  return g;
}

// A config.json integer field (required unless a fallback is given).
absl::StatusOr<int64_t> Int(const json& c, const char* key, std::optional<int64_t> fallback = {}) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    return FormatError("config.json: missing '", key, "'");
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (int64_t{1} << 31)) {
    return FormatError("config.json: '", key, "' = ", it->dump(), " is not a positive integer");
  }
  return it->get<int64_t>();
}

absl::StatusOr<double> Number(const json& c, const char* key, double fallback) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_number()) return FormatError("config.json: '", key, "' = ", it->dump(), " is not a number");
  return it->get<double>();
}

// A tokenizer_config.json special token: a string or {"content": ...}.
std::string TokenContent(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

absl::Status AddConfig(const json& c, std::span<const HfFamily* const> families, Metadata* md,
                       const HfFamily** family, int64_t* n_vocab, bool* tied) {
  const json& archs = c.value("architectures", json::array());
  const std::string name = archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>() : "";
  std::string known;
  *family = nullptr;
  for (const HfFamily* f : families) {
    for (std::string_view cls : f->classes) {
      if (cls == name) *family = f;
      known.append(known.empty() ? "" : ", ").append(cls);
    }
  }
  if (*family == nullptr) {
    return UnsupportedError("config.json: architecture '", name.empty() ? c.value("model_type", "?") : name,
                            "' is not supported (", known, ")");
  }
  const std::string a = std::string((*family)->arch) + ".";
  LLM42_ASSIGN_OR_RETURN(const int64_t n_embd, Int(c, "hidden_size"));
  LLM42_ASSIGN_OR_RETURN(const int64_t n_head, Int(c, "num_attention_heads"));
  LLM42_ASSIGN_OR_RETURN(const int64_t n_head_kv, Int(c, "num_key_value_heads", n_head));
  LLM42_ASSIGN_OR_RETURN(const int64_t head_dim, Int(c, "head_dim", n_embd / n_head));
  LLM42_ASSIGN_OR_RETURN(int64_t n_ctx, Int(c, "max_position_embeddings"));
  if (auto sw = c.find("sliding_window"); sw != c.end() && sw->is_number_integer() &&
      sw->get<int64_t>() > 0 && sw->get<int64_t>() < n_ctx &&
      !(c.contains("use_sliding_window") && c["use_sliding_window"] == false)) {
    if ((*family)->sliding) {  // its architecture slides (lib/model/arch)
      md->emplace_back(a + "attention.sliding_window", Uint(sw->get<int64_t>()));
    } else {
      n_ctx = sw->get<int64_t>();  // its layers do not slide: results are exact up to its size
    }
  }
  for (const HfFamily::Key& k : (*family)->keys) {
    const std::string hf(k.hf);
    LLM42_ASSIGN_OR_RETURN(const double v, Number(c, hf.c_str(), k.fallback));
    md->emplace_back(a + std::string(k.gguf), Float(v));
  }
  LLM42_ASSIGN_OR_RETURN(*n_vocab, Int(c, "vocab_size"));
  LLM42_ASSIGN_OR_RETURN(const double theta, Number(c, "rope_theta", 10000.0));
  LLM42_ASSIGN_OR_RETURN(const double eps, Number(c, "rms_norm_eps", 1e-6));
  *tied = c.value("tie_word_embeddings", false);
  md->emplace_back(a + "context_length", Uint(n_ctx));
  md->emplace_back(a + "embedding_length", Uint(n_embd));
  LLM42_ASSIGN_OR_RETURN(const int64_t n_layer, Int(c, "num_hidden_layers"));
  md->emplace_back(a + "block_count", Uint(n_layer));
  LLM42_ASSIGN_OR_RETURN(const int64_t n_ff, Int(c, "intermediate_size"));
  md->emplace_back(a + "feed_forward_length", Uint(n_ff));
  md->emplace_back(a + "attention.head_count", Uint(n_head));
  md->emplace_back(a + "attention.head_count_kv", Uint(n_head_kv));
  if (head_dim * n_head != n_embd) {  // as llama.cpp's converter states a head width of its own
    md->emplace_back(a + "attention.key_length", Uint(head_dim));
    md->emplace_back(a + "attention.value_length", Uint(head_dim));
  }
  md->emplace_back(a + "rope.dimension_count", Uint(head_dim));
  md->emplace_back(a + "rope.freq_base", Float(theta));
  md->emplace_back(a + "attention.layer_norm_rms_epsilon", Float(eps));
  return absl::OkStatus();
}

// rope_scaling: none, linear (GGUF keys) or llama3 (a rope_freqs.weight tensor, as llama.cpp's
// converter writes it).
absl::Status AddRopeScaling(const json& c, const std::string& arch, Metadata* md, Storage* st,
                            std::vector<GgufTensorInfo>* tensors) {
  auto it = c.find("rope_scaling");
  if (it == c.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return FormatError("config.json: rope_scaling is not an object");
  const json& r = *it;
  const std::string type = r.contains("rope_type") ? r.value("rope_type", "") : r.value("type", "");
  LLM42_ASSIGN_OR_RETURN(const double factor, Number(r, "factor", 1.0));
  if (type == "linear") {
    md->emplace_back(arch + ".rope.scaling.type", String("linear"));
    md->emplace_back(arch + ".rope.scaling.factor", Float(factor));
    return absl::OkStatus();
  }
  if (type == "longrope" || type == "su") {  // Phi-3: per-pair factors as tensors, as llama.cpp's converter writes them
    LLM42_ASSIGN_OR_RETURN(const int64_t hidden, Int(c, "hidden_size"));
    LLM42_ASSIGN_OR_RETURN(const int64_t heads, Int(c, "num_attention_heads"));
    LLM42_ASSIGN_OR_RETURN(const int64_t head_dim_lr, Int(c, "head_dim", hidden / heads));
    LLM42_ASSIGN_OR_RETURN(const int64_t n_ctx, Int(c, "max_position_embeddings"));
    LLM42_ASSIGN_OR_RETURN(const int64_t original, Int(c, "original_max_position_embeddings", n_ctx));
    for (const char* which : {"short_factor", "long_factor"}) {
      const json& f = r.value(which, json());
      if (!f.is_array() || static_cast<int64_t>(f.size()) != head_dim_lr / 2) {
        return FormatError("config.json: rope_scaling.", which, " is not a list of ", head_dim_lr / 2, " numbers");
      }
      std::vector<uint8_t>& bytes = st->owned.emplace_back(f.size() * sizeof(float));
      for (size_t i = 0; i < f.size(); ++i) {
        if (!f[i].is_number()) return FormatError("config.json: rope_scaling.", which, "[", i, "] is not a number");
        const float v = f[i].get<float>();
        std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof v);
      }
      GgufTensorInfo t;
      t.name = std::string(which) == "short_factor" ? "rope_factors_short.weight" : "rope_factors_long.weight";
      t.dims = {static_cast<int64_t>(f.size())};
      t.type = GgmlType::kF32;
      t.n_bytes = bytes.size();
      t.data = bytes.data();
      tensors->push_back(std::move(t));
    }
    const double scale = static_cast<double>(n_ctx) / static_cast<double>(original);
    md->emplace_back(arch + ".rope.scaling.attn_factor",
                     Float(scale <= 1.0 ? 1.0 : std::sqrt(1 + PortableLog(scale) / PortableLog(static_cast<double>(original)))));
    md->emplace_back(arch + ".rope.scaling.original_context_length", Uint(original));
    return absl::OkStatus();
  }
  if (type != "llama3") {
    return UnsupportedError("config.json: rope_scaling type '", type, "' is not supported (linear, llama3, longrope)");
  }
  LLM42_ASSIGN_OR_RETURN(const int64_t n_embd, Int(c, "hidden_size"));
  LLM42_ASSIGN_OR_RETURN(const int64_t n_head, Int(c, "num_attention_heads"));
  LLM42_ASSIGN_OR_RETURN(const int64_t head_dim, Int(c, "head_dim", n_embd / n_head));
  LLM42_ASSIGN_OR_RETURN(const double theta, Number(c, "rope_theta", 10000.0));
  LLM42_ASSIGN_OR_RETURN(const double low, Number(r, "low_freq_factor", 1.0));
  LLM42_ASSIGN_OR_RETURN(const double high, Number(r, "high_freq_factor", 4.0));
  LLM42_ASSIGN_OR_RETURN(const double original, Number(r, "original_max_position_embeddings", 8192));
  if (!(high > low) || !(factor >= 1.0) || !(original > 0)) {
    return FormatError("config.json: rope_scaling llama3 factors are inconsistent");
  }
  const std::vector<float> f = Llama3RopeFactors(head_dim, theta, factor, low, high, original);
  std::vector<uint8_t>& bytes = st->owned.emplace_back(f.size() * sizeof(float));
  std::memcpy(bytes.data(), f.data(), bytes.size());
  GgufTensorInfo t;
  t.name = "rope_freqs.weight";
  t.dims = {static_cast<int64_t>(f.size())};
  t.type = GgmlType::kF32;
  t.n_bytes = bytes.size();
  t.data = bytes.data();
  tensors->push_back(std::move(t));
  return absl::OkStatus();
}

// tokenizer.json's pre-tokenizer as a GGUF tokenizer.ggml.pre name.
absl::StatusOr<std::string> PreTokenizerName(const json& tok) {
  const std::string dump = tok.value("pre_tokenizer", json()).dump();
  if (dump.find("\"ByteLevel\"") == std::string::npos) {
    return UnsupportedError("tokenizer.json: only byte-level BPE tokenizers are supported (this one's "
                            "pre-tokenizer is ", dump.substr(0, 200), ")");
  }
  if (dump.find(json(kLlama3Regex).dump()) != std::string::npos) return std::string("llama-bpe");
  if (dump.find(json(kQwen2Regex).dump()) != std::string::npos) return std::string("qwen2");
  if (dump.find("\"Split\"") == std::string::npos) return std::string("gpt-2");
  return UnsupportedError("tokenizer.json: the pre-tokenizer's regex is not one llm42 implements "
                          "(GPT-2, Llama 3, Qwen 2)");
}

// Fills texts/types from id -> text pairs, padding holes and the rows past the tokenizer up to
// n_vocab as unused [PADn] tokens (as llama.cpp's converter does).
absl::Status PlaceTokens(const std::vector<std::pair<int64_t, std::string>>& pairs, int64_t n_vocab,
                         VocabSpec* spec) {
  int64_t n = n_vocab;
  for (const auto& [id, text] : pairs) {
    if (id < 0 || id >= (int64_t{1} << 24)) return FormatError("token id ", id, " is out of range");
    n = std::max(n, id + 1);
  }
  spec->texts.assign(static_cast<size_t>(n), std::string());
  spec->types.assign(static_cast<size_t>(n), TokenType::kUnused);
  std::vector<bool> seen(static_cast<size_t>(n));
  for (const auto& [id, text] : pairs) {
    spec->texts[static_cast<size_t>(id)] = text;
    spec->types[static_cast<size_t>(id)] = TokenType::kNormal;
    seen[static_cast<size_t>(id)] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!seen[static_cast<size_t>(i)]) spec->texts[static_cast<size_t>(i)] = absl::StrCat("[PAD", i, "]");
  }
  return absl::OkStatus();
}

// SentencePiece's tokenizer.model (a serialized ModelProto): pieces, scores and types as GGUF's
// "llama" tokenizer holds them.
absl::StatusOr<VocabSpec> ReadSentencePiece(const fs::path& path, int64_t n_vocab) {
  LLM42_ASSIGN_OR_RETURN(std::string bytes, ReadText(path));
  sentencepiece::ModelProto model;
  if (!model.ParseFromString(bytes) || model.pieces_size() == 0) {
    return FormatError(platform::PathUtf8(path), " is not a SentencePiece model");
  }
  if (model.trainer_spec().model_type() != sentencepiece::TrainerSpec::BPE) {
    return UnsupportedError(platform::PathUtf8(path), ": SentencePiece model type ",
                            sentencepiece::TrainerSpec::ModelType_Name(model.trainer_spec().model_type()),
                            " is not supported (BPE)");
  }
  VocabSpec spec;
  spec.model = "llama";
  std::vector<std::pair<int64_t, std::string>> pairs;
  for (int i = 0; i < model.pieces_size(); ++i) pairs.emplace_back(i, model.pieces(i).piece());
  LLM42_RETURN_IF_ERROR(PlaceTokens(pairs, n_vocab, &spec));
  spec.scores.assign(spec.texts.size(), 0.0f);
  for (int i = 0; i < model.pieces_size(); ++i) {
    const auto& p = model.pieces(i);
    spec.scores[static_cast<size_t>(i)] = p.score();
    spec.types[static_cast<size_t>(i)] = static_cast<TokenType>(p.type());  // same numbering
    if (p.type() == sentencepiece::ModelProto::SentencePiece::UNKNOWN) spec.unk = i;
  }
  spec.add_space_prefix = model.normalizer_spec().add_dummy_prefix();
  return spec;
}

// tokenizer.json's model.vocab and added_tokens as id -> text pairs, and each added token's id and
// whether it is special.
absl::Status ReadJsonVocab(const json& tok, std::vector<std::pair<int64_t, std::string>>* pairs,
                           std::vector<std::pair<int64_t, bool>>* added) {
  const json& vocab = tok.value("model", json::object()).value("vocab", json::object());
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer()) return FormatError("tokenizer.json: vocab['", text, "'] is not an id");
    pairs->emplace_back(id.get<int64_t>(), text);
  }
  for (const json& a : tok.value("added_tokens", json::array())) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string()) {
      return FormatError("tokenizer.json: added token ", a.dump(), " lacks an id or content");
    }
    pairs->emplace_back(a["id"].get<int64_t>(), a["content"].get<std::string>());
    added->emplace_back(a["id"].get<int64_t>(), a.value("special", false));
  }
  return absl::OkStatus();
}

// tokenizer.json's model.merges ("left right" strings or [left, right] pairs), highest priority
// first.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadJsonMerges(const json& tok) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const json& m : tok.value("model", json::object()).value("merges", json::array())) {
    if (m.is_string()) {
      const std::string both = m.get<std::string>();
      const size_t space = both.find(' ', 1);
      if (space == std::string::npos) return FormatError("tokenizer.json: merge ", m.dump(), " is not a pair");
      out.emplace_back(both.substr(0, space), both.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return FormatError("tokenizer.json: merge ", m.dump(), " is not a pair");
    }
  }
  return out;
}

// A byte-fallback BPE tokenizer.json (Gemma's, and Llama 2's or Mistral's port of their
// SentencePiece models): the SentencePiece tokenizer GGUF's "llama" model describes, with each
// token's score from the merge that makes it (-rank: SentencePiece merges the pair whose result
// scores highest, Hugging Face's BPE the pair ranked first, so the two agree), the tokens no merge
// makes ranked below them all, <0xXX> tokens as bytes. The space marker is prepended (GGUF's
// add_space_prefix) where the normalizer prepends it or a Metaspace pre-tokenizer does.
absl::StatusOr<VocabSpec> ReadByteFallbackBpe(const json& tok, int64_t n_vocab) {
  const json& pre = tok.value("pre_tokenizer", json());
  const bool metaspace =
      pre.is_object() && pre.value("type", "") == "Metaspace" && pre.value("replacement", "\u2581") == "\u2581";
  if (!pre.is_null() && !(metaspace && !pre.value("split", true))) {
    return UnsupportedError("tokenizer.json: a byte-fallback BPE tokenizer whose pre-tokenizer splits the text (",
                            pre.dump().substr(0, 200), ") is not supported");
  }
  // The normalizer: none, one step, or a Sequence of them; each what SentencePiece's normalization
  // does (spaces become the marker, which may be prepended).
  const json& normalizer = tok.value("normalizer", json());
  const json steps = normalizer.is_object() ? normalizer.value("normalizers", json::array({normalizer})) : json::array();
  bool prepends = metaspace && pre.value("prepend_scheme", "always") != "never";
  for (const json& step : steps) {
    const std::string type = step.value("type", "");
    const bool prepend = type == "Prepend" && step.value("prepend", "") == "\u2581";
    const bool replace = type == "Replace" && step.value("content", "") == "\u2581" &&
                         step.value("pattern", json::object()).value("String", "") == " ";
    if (!prepend && !replace) {
      return UnsupportedError("tokenizer.json: normalizer ", step.dump().substr(0, 200),
                              " is not supported (a Prepend or a Replace of spaces with U+2581)");
    }
    prepends = prepends || prepend;
  }
  VocabSpec spec;
  spec.model = "llama";
  std::vector<std::pair<int64_t, std::string>> pairs;
  std::vector<std::pair<int64_t, bool>> added;
  LLM42_RETURN_IF_ERROR(ReadJsonVocab(tok, &pairs, &added));
  LLM42_RETURN_IF_ERROR(PlaceTokens(pairs, n_vocab, &spec));
  LLM42_ASSIGN_OR_RETURN(const auto merges, ReadJsonMerges(tok));
  absl::flat_hash_map<std::string, int32_t> index;
  for (size_t i = 0; i < spec.texts.size(); ++i) index.emplace(spec.texts[i], static_cast<int32_t>(i));
  const auto unranked = -static_cast<float>(merges.size() + 1);
  spec.scores.assign(spec.texts.size(), unranked);
  std::vector<bool> ranked(spec.texts.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    auto it = index.find(merges[r].first + merges[r].second);
    if (it == index.end()) return FormatError("tokenizer.json: merge ", r, " makes a token outside the vocabulary");
    const auto id = static_cast<size_t>(it->second);
    if (!ranked[id]) spec.scores[id] = -static_cast<float>(r);
    ranked[id] = true;
  }
  for (size_t i = 0; i < spec.texts.size(); ++i) {
    const std::string& t = spec.texts[i];
    if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') spec.types[i] = TokenType::kByte;
  }
  if (const json& unk = tok["model"].value("unk_token", json()); unk.is_string()) {
    if (auto it = index.find(unk.get<std::string>()); it != index.end()) {
      spec.unk = it->second;
      spec.types[static_cast<size_t>(it->second)] = TokenType::kUnknown;
    }
  }
  for (const auto& [id, special] : added) {
    if (static_cast<int32_t>(id) == spec.unk) continue;
    spec.types[static_cast<size_t>(id)] = special ? TokenType::kControl : TokenType::kUserDefined;
  }
  spec.add_space_prefix = prepends;
  return spec;
}

absl::StatusOr<VocabSpec> ReadTokenizer(const fs::path& dir, const json& config, int64_t n_vocab) {
  VocabSpec spec;
  spec.model = "gpt2";
  std::vector<std::pair<int64_t, std::string>> pairs;
  std::vector<std::pair<int64_t, bool>> added;  // id, special
  json tok;
  if (fs::exists(dir / "tokenizer.json")) {
    LLM42_ASSIGN_OR_RETURN(tok, ReadJson(dir / "tokenizer.json"));
  }
  const bool byte_level_json =
      tok.is_object() && tok.value("pre_tokenizer", json()).dump().find("\"ByteLevel\"") != std::string::npos;
  const bool byte_fallback_json = tok.is_object() && tok.value("model", json::object()).value("type", "") == "BPE" &&
                                  tok["model"].value("byte_fallback", false);
  if (!byte_level_json && fs::exists(dir / "tokenizer.model")) {
    // Llama 2, Mistral, Gemma: SentencePiece (their tokenizer.json is a byte-fallback BPE port of it).
    LLM42_ASSIGN_OR_RETURN(spec, ReadSentencePiece(dir / "tokenizer.model", n_vocab));
  } else if (byte_fallback_json && !byte_level_json) {
    LLM42_ASSIGN_OR_RETURN(spec, ReadByteFallbackBpe(tok, n_vocab));
  } else if (!tok.is_null()) {
    const json& model = tok.value("model", json::object());
    if (model.value("type", "") != "BPE") {
      return UnsupportedError("tokenizer.json: model type '", model.value("type", "?"),
                              "' is not supported (BPE)");
    }
    LLM42_ASSIGN_OR_RETURN(spec.pre, PreTokenizerName(tok));
    LLM42_RETURN_IF_ERROR(ReadJsonVocab(tok, &pairs, &added));
    LLM42_ASSIGN_OR_RETURN(const auto merges, ReadJsonMerges(tok));
    for (const auto& [left, right] : merges) spec.merges.push_back(left + " " + right);
  } else if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
    spec.pre = "gpt-2";
    LLM42_ASSIGN_OR_RETURN(json vocab, ReadJson(dir / "vocab.json"));
    for (const auto& [text, id] : vocab.items()) {
      if (!id.is_number_integer()) return FormatError("vocab.json: '", text, "' is not an id");
      pairs.emplace_back(id.get<int64_t>(), text);
    }
    LLM42_ASSIGN_OR_RETURN(std::string merges, ReadText(dir / "merges.txt"));
    std::istringstream lines(merges);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      spec.merges.push_back(line);
    }
  } else {
    return FormatError(platform::PathUtf8(dir), ": no tokenizer (tokenizer.json, tokenizer.model, or vocab.json "
                       "and merges.txt)");
  }
  if (spec.model == "gpt2") {
    LLM42_RETURN_IF_ERROR(PlaceTokens(pairs, n_vocab, &spec));
    for (const auto& [id, special] : added) {
      spec.types[static_cast<size_t>(id)] = special ? TokenType::kControl : TokenType::kUserDefined;
    }
  }

  json tc = json::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    LLM42_ASSIGN_OR_RETURN(tc, ReadJson(dir / "tokenizer_config.json"));
  }
  absl::flat_hash_map<std::string, int32_t> index;
  for (size_t i = 0; i < spec.texts.size(); ++i) index.emplace(spec.texts[i], static_cast<int32_t>(i));
  auto special_id = [&](const char* tc_key, const char* config_key) -> int32_t {
    if (tc.contains(tc_key)) {
      auto it = index.find(TokenContent(tc[tc_key]));
      if (it != index.end()) return it->second;
    }
    const json& v = config.value(config_key, json());
    if (v.is_number_integer()) return static_cast<int32_t>(v.get<int64_t>());
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) return static_cast<int32_t>(v[0].get<int64_t>());
    return -1;
  };
  spec.bos = special_id("bos_token", "bos_token_id");
  spec.eos = special_id("eos_token", "eos_token_id");
  if (const json& e = config.value("eos_token_id", json()); e.is_array() && e.size() > 1 && e.back().is_number_integer()) {
    spec.eot = static_cast<int32_t>(e.back().get<int64_t>());  // Llama 3.1: [end_of_text, eom, eot]
  }
  for (int32_t id : {spec.bos, spec.eos, spec.eot}) {  // GGUF marks these control tokens
    if (id >= 0 && id < static_cast<int32_t>(spec.types.size()) && spec.types[static_cast<size_t>(id)] == TokenType::kNormal) {
      spec.types[static_cast<size_t>(id)] = TokenType::kControl;
    }
  }
  if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean()) spec.add_bos = tc["add_bos_token"].get<bool>();
  if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean()) spec.add_eos = tc["add_eos_token"].get<bool>();
  if (const json& t = tc.value("chat_template", json()); t.is_string()) {
    spec.chat_template = t.get<std::string>();
  } else if (t.is_array()) {
    for (const json& named : t) {
      if (named.value("name", "") == "default" && named.contains("template") && named["template"].is_string()) {
        spec.chat_template = named["template"].get<std::string>();
      }
    }
  }
  return spec;
}

void AddVocab(const VocabSpec& spec, Metadata* md) {
  md->emplace_back("tokenizer.ggml.model", String(spec.model));
  if (!spec.pre.empty()) md->emplace_back("tokenizer.ggml.pre", String(spec.pre));
  md->emplace_back("tokenizer.ggml.tokens", Strings(spec.texts));
  GgufValue types;
  types.type = GgufType::kArray;
  types.array_type = GgufType::kInt32;
  for (TokenType t : spec.types) types.int_array.push_back(static_cast<int64_t>(t));
  md->emplace_back("tokenizer.ggml.token_type", std::move(types));
  if (!spec.scores.empty()) {
    GgufValue scores;
    scores.type = GgufType::kArray;
    scores.array_type = GgufType::kFloat32;
    scores.float_array.assign(spec.scores.begin(), spec.scores.end());
    md->emplace_back("tokenizer.ggml.scores", std::move(scores));
  }
  if (!spec.merges.empty()) md->emplace_back("tokenizer.ggml.merges", Strings(spec.merges));
  if (spec.unk >= 0) md->emplace_back("tokenizer.ggml.unknown_token_id", Uint(spec.unk));
  if (spec.add_space_prefix) md->emplace_back("tokenizer.ggml.add_space_prefix", Bool(*spec.add_space_prefix));
  if (spec.bos >= 0) md->emplace_back("tokenizer.ggml.bos_token_id", Uint(spec.bos));
  if (spec.eos >= 0) md->emplace_back("tokenizer.ggml.eos_token_id", Uint(spec.eos));
  if (spec.eot >= 0) md->emplace_back("tokenizer.ggml.eot_token_id", Uint(spec.eot));
  if (spec.add_bos) md->emplace_back("tokenizer.ggml.add_bos_token", Bool(*spec.add_bos));
  if (spec.add_eos) md->emplace_back("tokenizer.ggml.add_eos_token", Bool(*spec.add_eos));
  if (!spec.chat_template.empty()) md->emplace_back("tokenizer.chat_template", String(spec.chat_template));
}

// The GGUF name of a Hugging Face tensor of `family`, empty for tensors llm42 does not use.
std::string GgufName(const std::string& hf, const HfFamily& family) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (const auto& [from, to] : kGlobal) {
    if (hf == from) return to;
  }
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  constexpr std::string_view kPrefix = "model.layers.";
  if (hf.rfind(kPrefix, 0) != 0) return {};
  const size_t dot = hf.find('.', kPrefix.size());
  if (dot == std::string::npos) return {};
  const std::string layer = hf.substr(kPrefix.size(), dot - kPrefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : family.layer_tensors) {
    if (rest == from) return absl::StrCat("blk.", layer, ".", std::string(to));
  }
  for (const auto& [from, to] : kLayer) {
    if (rest == from) return absl::StrCat("blk.", layer, ".", to);
  }
  return {};
}

// Rows (or bias elements) of a q/k projection from Hugging Face's rotate-half order to GGUF's
// interleaved order, per head: GGUF row 2i + s of a head is HF row s * head_dim/2 + i.
std::vector<uint8_t> PermuteRows(const uint8_t* data, uint64_t n_bytes, int64_t rows, int64_t n_heads) {
  std::vector<uint8_t> out(n_bytes);
  const size_t row_bytes = n_bytes / static_cast<uint64_t>(rows);
  const int64_t hd = rows / n_heads, half = hd / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t s = 0; s < 2; ++s) {
        std::memcpy(out.data() + static_cast<size_t>(h * hd + 2 * i + s) * row_bytes,
                    data + static_cast<size_t>(h * hd + s * half + i) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

absl::Status AddTensors(const fs::path& dir, const HfFamily& family, const json& config,
                        Storage* st, std::vector<GgufTensorInfo>* tensors) {
  std::vector<std::string> shard_names;
  if (fs::exists(dir / "model.safetensors.index.json")) {
    LLM42_ASSIGN_OR_RETURN(json index, ReadJson(dir / "model.safetensors.index.json"));
    const json& map = index.value("weight_map", json());
    if (!map.is_object()) return FormatError("model.safetensors.index.json has no weight_map object");
    for (const auto& [name, file] : map.items()) {
      if (!file.is_string()) return FormatError("model.safetensors.index.json: '", name, "' has no file");
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
        return FormatError("model.safetensors.index.json: shard '", f, "' is not a file in the directory");
      }
      if (std::find(shard_names.begin(), shard_names.end(), f) == shard_names.end()) shard_names.push_back(f);
    }
  } else if (fs::exists(dir / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  }  // else a tokenizer-only directory: no tensors, as in a vocabulary-only GGUF
  const int64_t n_head = config.value("num_attention_heads", 1);
  const int64_t n_head_kv = config.value("num_key_value_heads", n_head);
  for (const std::string& name : shard_names) {
    LLM42_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard, SafetensorsFile::Open(platform::PathUtf8(dir / name)));
    for (const SafetensorsTensor& t : shard->tensors()) {
      const std::string gguf = GgufName(t.name, family);
      if (gguf.empty()) continue;
      GgufTensorInfo info;
      info.name = gguf;
      if (t.dtype == "F32") {
        info.type = GgmlType::kF32;
      } else if (t.dtype == "F16") {
        info.type = GgmlType::kF16;
      } else if (t.dtype == "BF16") {
        info.type = GgmlType::kBF16;
      } else {
        return UnsupportedError(shard->path(), ": tensor '", t.name, "' has dtype ", t.dtype,
                                "; llm42 reads F32, F16 and BF16");
      }
      if (t.shape.empty() || t.shape.size() > 2) {
        return FormatError(shard->path(), ": tensor '", t.name, "' has ", t.shape.size(), " dimensions");
      }
      info.dims.assign(t.shape.rbegin(), t.shape.rend());  // ggml order: contiguous first
      info.data = t.data;
      info.n_bytes = t.n_bytes;
      // RMSNorms that scale by 1 + weight (Hugging Face's Gemma*RMSNorm): GGUF holds 1 + weight,
      // as llama.cpp's converter writes it.
      if (family.norms_plus_one && gguf.ends_with("norm.weight")) {
        const auto n = static_cast<size_t>(t.n_bytes / (info.type == GgmlType::kF32 ? 4 : 2));
        std::vector<uint8_t>& bytes = st->owned.emplace_back(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) {
          float v;
          if (info.type == GgmlType::kF32) {
            std::memcpy(&v, t.data + 4 * i, 4);
          } else {
            uint16_t h;
            std::memcpy(&h, t.data + 2 * i, 2);
            v = info.type == GgmlType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
          }
          v += 1.0f;
          std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof v);
        }
        info.type = GgmlType::kF32;
        info.data = bytes.data();
        info.n_bytes = bytes.size();
      }
      const bool q = gguf.ends_with("attn_q.weight") || gguf.ends_with("attn_q.bias");
      const bool k = gguf.ends_with("attn_k.weight") || gguf.ends_with("attn_k.bias");
      if (family.permute_qk && (q || k)) {
        const int64_t heads = q ? n_head : n_head_kv;
        const int64_t rows = t.shape[0];
        if (heads <= 0 || rows % (2 * heads) != 0) {
          return FormatError(shard->path(), ": tensor '", t.name, "' has ", rows, " rows, not a whole "
                             "number of ", heads, " heads");
        }
        info.data = st->owned.emplace_back(PermuteRows(t.data, t.n_bytes, rows, heads)).data();
      }
      tensors->push_back(std::move(info));
    }
    st->shards.push_back(std::move(shard));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GgufFile>> OpenHfDirectoryOrThrow(const std::string& path,
                                                                  std::span<const HfFamily* const> families) {
  const fs::path dir = platform::Utf8Path(path);
  LLM42_ASSIGN_OR_RETURN(json config, ReadJson(dir / "config.json"));
  Metadata md;
  const HfFamily* family = nullptr;
  int64_t n_vocab = 0;
  bool tied = false;
  absl::Status s = AddConfig(config, families, &md, &family, &n_vocab, &tied);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  const std::string arch(family->arch);
  md.insert(md.begin(), {"general.architecture", String(arch)});
  md.insert(md.begin() + 1, {"general.name", String(dir.filename().empty() ? platform::PathUtf8(dir.parent_path().filename()) : platform::PathUtf8(dir.filename()))});

  auto storage = std::make_shared<Storage>();
  std::vector<GgufTensorInfo> tensors;
  s = AddRopeScaling(config, arch, &md, storage.get(), &tensors);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  absl::StatusOr<VocabSpec> vocab = ReadTokenizer(dir, config, n_vocab);
  if (!vocab.ok()) return absl::Status(vocab.status().code(), absl::StrCat(path, ": ", vocab.status().message()));
  AddVocab(*vocab, &md);
  LLM42_RETURN_IF_ERROR(AddTensors(dir, *family, config, storage.get(), &tensors));
  if (tied) {
    // Tied embeddings: the model reuses token_embd.weight when output.weight is absent.
    std::erase_if(tensors, [](const GgufTensorInfo& t) { return t.name == "output.weight"; });
  }
  return GgufFile::FromParts(path, std::move(md), std::move(tensors), std::move(storage));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> OpenHfDirectory(const std::string& path,
                                                          std::span<const HfFamily* const> families) {
  // The JSON files are read through nlohmann::json's typed accessors, which throw when a field
  // has another JSON type than the one read ("tie_word_embeddings": 1): one catch here turns
  // every such mismatch into the FORMAT_ERROR a malformed file gets (hf_fuzzer found it; it
  // terminated C++ callers).
  try {
    return OpenHfDirectoryOrThrow(path, families);
  } catch (const json::exception& e) {
    return FormatError(path, ": a field of its JSON files has the wrong type (", e.what(), ")");
  }
}

absl::StatusOr<std::unique_ptr<GgufFile>> OpenModelFile(const std::string& path,
                                                        std::span<const HfFamily* const> families) {
  std::error_code ec;
  if (fs::is_directory(platform::Utf8Path(path), ec)) return OpenHfDirectory(path, families);
  return GgufFile::Open(path);
}

}  // namespace llm42
