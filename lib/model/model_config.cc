#include "lib/model/model_config.h"

#include <algorithm>

#include "lib/model/arch/architecture.h"
#include "lib/format/gguf_reader.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

absl::StatusOr<int64_t> RequiredPositive(const GgufFile& f, const std::string& key, int64_t max) {
  LLM42_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > max) return FormatError("key '", key, "' = ", v, " is out of range (1..", max, ")");
  return v;
}

// `key` as one value for every layer, or an array of one per layer (Gemma 4's head_count_kv and
// feed_forward_length): each in 1..max; *all = the value (the largest of an array), *per_layer
// the array (left empty for one value).
absl::Status ReadPerLayer(const GgufFile& f, const std::string& key, int64_t n_layer, int64_t max, int64_t* all,
                          std::vector<int64_t>* per_layer, int64_t min_element = 1) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr || v->type != GgufType::kArray) {
    LLM42_ASSIGN_OR_RETURN(*all, RequiredPositive(f, key, max));
    return absl::OkStatus();
  }
  if (v->int_array.size() != static_cast<size_t>(n_layer) || v->array_type == GgufType::kBool) {
    return FormatError("key '", key, "' is an array of ", v->array_size(), " values where the model has ", n_layer,
                       " layers (an integer per layer)");
  }
  *all = 0;
  for (size_t l = 0; l < v->int_array.size(); ++l) {
    const int64_t x = v->int_array[l];
    if (x < min_element || x > max) {
      return FormatError("key '", key, "'[", l, "] = ", x, " is out of range (", min_element, "..", max, ")");
    }
    *all = std::max(*all, x);
  }
  per_layer->assign(v->int_array.begin(), v->int_array.end());
  return absl::OkStatus();
}

// The largest of f(l) over the layers.
template <typename F>
int64_t Widest(int64_t n_layer, F f) {
  int64_t most = 0;
  for (int64_t l = 0; l < n_layer; ++l) most = std::max(most, f(l));
  return most;
}

}  // namespace

int64_t ModelConfig::max_q_dim() const { return Widest(n_layer, [&](int64_t l) { return q_dim(l); }); }
int64_t ModelConfig::max_kv_dim() const { return Widest(n_layer, [&](int64_t l) { return kv_dim(l); }); }
int64_t ModelConfig::max_ff() const { return Widest(n_layer, [&](int64_t l) { return n_ff_of(l); }); }

int64_t ModelConfig::n_recurrent() const { return recurrent_index(n_layer); }
int64_t ModelConfig::recurrent_index(int64_t l) const {
  int64_t n = 0;
  for (int64_t j = 0; j < l; ++j) n += recurrent(j);
  return n;
}

absl::Status ModelConfig::ValidateLayers() const {
  for (int64_t l = 0; l < n_layer; ++l) {
    if (recurrent(l) != (n_head_kv_of(l) == 0)) {
      return FormatError("layer ", l, (recurrent(l) ? " is recurrent but has " : " attends but has "), n_head_kv_of(l),
                         " KV heads");
    }
    if (recurrent(l)) continue;
    if (n_head % n_head_kv_of(l) != 0) {
      return FormatError("head count ", n_head, " is not a multiple of layer ", l, "'s KV head count ", n_head_kv_of(l));
    }
  }
  if (head_dim_swa % 2 != 0 || n_rot_swa % 2 != 0 || n_rot_swa > (head_dim_swa > 0 ? head_dim_swa : head_dim)) {
    return FormatError("sliding layers' head width ", head_dim_swa, " and rope dimension ", n_rot_swa,
                       " must be even, the second at most the first");
  }
  if (n_kv_shared < 0 || (n_kv_shared > 0 && n_kv_shared > n_layer - 2)) {
    return FormatError("attention.shared_kv_layers = ", n_kv_shared, " leaves fewer than 2 of the ", n_layer,
                       " layers storing keys and values");
  }
  for (int64_t l = n_kv_layers(); l < n_layer; ++l) {
    const int64_t from = kv_layer(l);
    if (sliding(from) != sliding(l) || kv_dim(from) != kv_dim(l)) {
      return FormatError("layer ", l, " shares the keys and values of layer ", from,
                         ", a layer of another kind (sliding or global) or width");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& f) {
  ModelConfig c;
  LLM42_ASSIGN_OR_RETURN(c.architecture, f.GetString("general.architecture"));
  const Architecture* arch = FindArchitecture(c.architecture);
  if (arch == nullptr) {
    return UnsupportedError("architecture '", c.architecture, "' is not supported (llm42 runs ",
                            ArchitectureNames(), ")");
  }
  if (const GgufValue* name = f.Find("general.name"); name && name->type == GgufType::kString) {
    c.name = name->string_value;
  }
  const std::string a = c.architecture + ".";
  LLM42_ASSIGN_OR_RETURN(c.n_ctx_train, RequiredPositive(f, a + "context_length", 1 << 24));
  LLM42_ASSIGN_OR_RETURN(c.n_embd, RequiredPositive(f, a + "embedding_length", 1 << 17));
  LLM42_ASSIGN_OR_RETURN(c.n_layer, RequiredPositive(f, a + "block_count", 1024));
  LLM42_RETURN_IF_ERROR(ReadPerLayer(f, a + "feed_forward_length", c.n_layer, 1 << 20, &c.n_ff, &c.layer_ff));
  LLM42_ASSIGN_OR_RETURN(c.n_head, RequiredPositive(f, a + "attention.head_count", 1024));
  c.n_head_kv = c.n_head;
  if (f.Find(a + "attention.head_count_kv") != nullptr) {
    // 0 for a layer without attention (a recurrent layer: ValidateLayers).
    LLM42_RETURN_IF_ERROR(ReadPerLayer(f, a + "attention.head_count_kv", c.n_layer, 1024, &c.n_head_kv, &c.layer_head_kv, 0));
  }
  if (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0) {
    return FormatError("head count ", c.n_head, " is not a multiple of KV head count ", c.n_head_kv);
  }
  // A head's width: attention.key_length where the file states it (Qwen3, Gemma: heads wider or
  // narrower than embedding length / head count), else that quotient.
  if (f.Find(a + "attention.key_length") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.head_dim, RequiredPositive(f, a + "attention.key_length", 1024));
    int64_t value_length = c.head_dim;
    if (f.Find(a + "attention.value_length") != nullptr) {
      LLM42_ASSIGN_OR_RETURN(value_length, RequiredPositive(f, a + "attention.value_length", 1024));
    }
    if (value_length != c.head_dim) {
      return UnsupportedError("attention.key_length ", c.head_dim, " differs from attention.value_length ",
                              value_length, " (llm42 runs heads whose keys and values are as wide)");
    }
  } else {
    if (c.n_embd % c.n_head != 0) {
      return FormatError("embedding length ", c.n_embd, " is not a multiple of head count ", c.n_head,
                         " and the file states no attention.key_length");
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.head_dim % 2 != 0) return FormatError("head width ", c.head_dim, " is odd");
  c.n_rot = c.head_dim;
  if (f.Find(a + "rope.dimension_count") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.n_rot, RequiredPositive(f, a + "rope.dimension_count", c.head_dim));
  }
  if (c.n_rot % 2 != 0) return FormatError("rope dimension ", c.n_rot, " is odd");
  // Sliding layers' own head width and rotated dims (Gemma 4), as wide keys as values.
  if (f.Find(a + "attention.key_length_swa") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.head_dim_swa, RequiredPositive(f, a + "attention.key_length_swa", 1024));
    if (f.GetIntOr(a + "attention.value_length_swa", c.head_dim_swa) != c.head_dim_swa) {
      return UnsupportedError("attention.key_length_swa ", c.head_dim_swa, " differs from attention.value_length_swa");
    }
    c.n_rot_swa = c.head_dim_swa;
  }
  if (f.Find(a + "rope.dimension_count_swa") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.n_rot_swa, RequiredPositive(f, a + "rope.dimension_count_swa",
                                                         c.head_dim_swa > 0 ? c.head_dim_swa : c.head_dim));
  }
  if (f.Find(a + "rope.freq_base") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(double base, f.GetFloat(a + "rope.freq_base"));
    if (!(base > 1.0)) return FormatError("rope.freq_base = ", base, " must be > 1");
    c.rope_freq_base = static_cast<float>(base);
  }
  if (const GgufValue* type = f.Find(a + "rope.scaling.type"); type && type->type == GgufType::kString) {
    const std::string& t = type->string_value;
    if (t == "linear" || t == "yarn") {
      LLM42_ASSIGN_OR_RETURN(double factor, f.GetFloat(a + "rope.scaling.factor"));
      if (!(factor >= 1.0 && factor <= 1024.0)) return FormatError("rope.scaling.factor = ", factor, " must be in [1, 1024]");
      if (t == "linear") {
        c.rope_freq_scale = static_cast<float>(1.0 / factor);
      } else {
        c.yarn.factor = factor;
        c.yarn.original_context = static_cast<double>(c.n_ctx_train);
        if (f.Find(a + "rope.scaling.original_context_length") != nullptr) {
          LLM42_ASSIGN_OR_RETURN(const int64_t original, RequiredPositive(f, a + "rope.scaling.original_context_length", c.n_ctx_train));
          c.yarn.original_context = static_cast<double>(original);
        }
        for (auto [key, value] : {std::pair{"rope.scaling.yarn_beta_fast", &c.yarn.beta_fast},
                                  {"rope.scaling.yarn_beta_slow", &c.yarn.beta_slow},
                                  {"rope.scaling.yarn_log_multiplier", &c.yarn.log_mul}}) {
          if (f.Find(a + key) == nullptr) continue;
          LLM42_ASSIGN_OR_RETURN(*value, f.GetFloat(a + key));
          const bool log_mul = value == &c.yarn.log_mul;
          if (!(*value >= (log_mul ? 0.0 : 1e-3) && *value <= 1024.0)) {
            return FormatError("key '", a, key, "' = ", *value, " is out of range");
          }
        }
        if (!(c.yarn.beta_fast > c.yarn.beta_slow)) {
          return FormatError("rope.scaling.yarn_beta_fast (", c.yarn.beta_fast, ") must exceed yarn_beta_slow (",
                             c.yarn.beta_slow, ")");
        }
      }
    } else if (t != "none") {
      return UnsupportedError("RoPE scaling type '", t, "' is not supported (none, linear, yarn; "
                              "Llama 3.1 scaling comes as rope_freqs.weight)");
    }
  }
  if (f.Find(a + "attention.layer_norm_rms_epsilon") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(double eps, f.GetFloat(a + "attention.layer_norm_rms_epsilon"));
    if (!(eps > 0 && eps < 1)) return FormatError("layer_norm_rms_epsilon = ", eps, " out of range");
    c.rms_eps = static_cast<float>(eps);
  }
  LLM42_RETURN_IF_ERROR(ReadArchitectureKeys(f, arch->data(), c));
  LLM42_RETURN_IF_ERROR(arch->ReadConfig(f, c));
  LLM42_RETURN_IF_ERROR(c.ValidateLayers());
  return c;
}

}  // namespace llm42
