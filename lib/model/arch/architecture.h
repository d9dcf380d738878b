#ifndef LLM42_MODEL_ARCH_ARCHITECTURE_H_
#define LLM42_MODEL_ARCH_ARCHITECTURE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/format/hf_family.h"
#include "lib/model/arch/model_preset.h"
#include "lib/model/layer_tensors.h"
#include "lib/model/model_config.h"

namespace llm42 {

class GgufFile;
class TensorReader;

// Which of the optional tensors a layer of the common blocks (blocks.h) has.
struct LayerParts {
  enum class Biases { kNone, kOptional, kRequired } biases = Biases::kOptional;  // blk.N.attn_{q,k,v}.bias
  bool qk_norms = false;    // blk.N.attn_{q,k}_norm.weight (per head)
  bool post_norms = false;  // blk.N.post_attention_norm.weight, blk.N.post_ffw_norm.weight
  // Fused tensors allowed: blk.N.attn_qkv.weight (q, k, v rows in turn) in place of the three,
  // blk.N.ffn_up.weight of 2 n_ff rows (gate, then up) in place of ffn_gate and ffn_up (Phi-3).
  bool fused = false;
  // Gemma 4's: values normalized per head without a weight; blk.N.attn_v.weight optional (none:
  // the values are the keys' projection, before the key norm); blk.N.layer_output_scale.weight
  // (one value the layer's output is multiplied by) optional.
  bool v_norm = false;
  bool optional_v = false;
  bool layer_scale = false;
  // Qwen3.5's: blk.N.attn_q.weight holds each head's queries then as many rows of an output gate
  // (the attention's output multiplied by its sigmoid); the feed-forward norm is
  // blk.N.post_attention_norm.weight.
  bool output_gate = false;
  std::string_view ffn_norm = "ffn_norm";
  // Gemma 4's: a layer with experts keeps its dense FFN beside them.
  bool dense_with_experts = false;
  // gpt-oss's: blk.N.attn_sinks.weight (a logit per query head, AttentionShape::sinks),
  // blk.N.attn_output.bias, and biases on the router and the experts (ffn_gate_inp.bias,
  // ffn_{gate,up,down}_exps.bias), each required.
  bool sinks = false;
  bool output_bias = false;
  bool expert_biases = false;
};

// One float key an architecture reads beyond the common ones: {arch}.suffix into a ModelConfig
// field. The loader reads it (FORMAT_ERROR naming it outside its range), make-model writes it,
// and a Hugging Face config.json's `hf` value converts to it.
struct ArchKey {
  std::string_view suffix;
  float ModelConfig::*field;
  float fallback;  // without the key
  float lo, hi;    // a value lies in (lo, hi)
  std::string_view hf = {};  // config.json's name for it (empty: none)
  bool made = true;          // make-model writes it (the preset's value, else the fallback)
};

// Whether the file states {arch}.attention.sliding_window (which layers slide is ReadConfig's).
enum class Window : uint8_t { kNone, kOptional, kRequired };
// Whether the file has experts ({arch}.expert_count).
enum class Experts : uint8_t { kNone, kOptional, kRequired };

// What an architecture is, as data, consumed by the loaders (ModelConfig::FromGguf, the weights,
// Hugging Face directories), make-model and the session, none of which names an architecture.
struct ArchitectureData {
  std::string_view name = {};  // general.architecture's value
  bool rope_neox = false;
  Window window = Window::kNone;
  LayerParts parts = {};
  bool ties_output = false;  // its files have no output.weight: the embeddings serve
  bool longrope = false;     // make-model writes LongRoPE's keys and factor tensors (Phi-3.5's)
  float made_rope_base = 10000.0f;  // the RoPE base make-model writes
  std::vector<ArchKey> keys = {};
  // Whether its files have mixture-of-experts layers ({arch}.expert_count > 0; kNone: such a file
  // is refused, kRequired: one without is a FORMAT_ERROR), and how they route: the gate and
  // whether the chosen weights are normalized (ReadArchitectureKeys fills in the counts and
  // {arch}.expert_weights_scale).
  Experts experts = Experts::kNone;
  ExpertRouting routing = {};
  // Its experts are feed_forward_length wide (Mixtral's llama files), not
  // expert_feed_forward_length.
  bool experts_full_width = false;
  // Its Hugging Face classes, tensor names and conversions (arch, sliding and keys are filled in
  // from the fields above: HfFamilies).
  HfFamily hf = {};
  std::vector<ModelPreset> presets = {};  // make-model's random models of it
};

// A feed-forward block's gate activation: SiLU (SwiGLU), GELU's tanh form (GeGLU), or gpt-oss's
// clamped SwiGLU (Backend::ClampedSwiGlu with alpha 1.702 and limit 7, its experts' only).
enum class Activation { kSilu, kGeluTanh, kClampedSilu };

struct ExpertWork;  // lib/model/arch/experts.h

// What one layer's graph works on (ModelRunner builds it per layer): the backend, the batch's
// rows and schedules, the activation buffers ([rows][width] each: x the residual stream,
// n_embd wide; xn a normalized copy; q the layer's q_dim; k, v its kv_dim; attn q_dim; proj
// n_embd; gate, up its n_ff, or n_embd_per_layer where wider), this layer's RoPE and attention
// heads (its window, scale, cap), the K/V storage layer it reads (ModelConfig::kv_layer) and
// whether it writes it there, the batch's per-layer inputs ([rows][n_layer *
// n_embd_per_layer]; nullptr for none), and the experts' memory (nullptr for a model without).
struct LayerGraph {
  Backend& be;
  const ModelConfig& c;
  int64_t layer;
  int64_t m;
  Schedules sc;
  RopeParams rope;
  AttentionShape heads;
  int64_t kv_layer;
  bool stores_kv;
  const float* per_layer;
  float *x, *xn, *q, *k, *v, *attn, *proj, *gate, *up;
  ExpertWork* experts = nullptr;
};

// A decoder architecture as code (llama.cpp's per-architecture graph builders are the model):
// which metadata it reads beyond the common keys, which tensors a layer has, and the layer's
// graph over the backend's ops, built from what architectures share (blocks.h). One file each
// under lib/model/arch, registered in architecture.cc; adding one touches neither the engine,
// the scheduler nor the backends. The rest of the pass is every architecture's: embeddings
// (scaled by embed_scale), the layers, the output norm, the output matrix (the embeddings where
// the file has none), logits soft-capped by final_softcap.
class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual const ArchitectureData& data() const = 0;
  std::string_view name() const { return data().name; }
  // What its data cannot say, into c after ModelConfig::FromGguf read the common keys and the
  // data's (which layers slide, scales derived from other values): FORMAT_ERROR for a value out
  // of range.
  virtual absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const { return absl::OkStatus(); }
  // Layer l's tensors into L.
  virtual absl::Status LoadLayer(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) const = 0;
  // Layer l's forward pass: g.x updated in place.
  virtual absl::Status Layer(const LayerGraph& g, const BackendLayer& L) const = 0;
};

// Every architecture, in registry order (architecture.cc: one line each).
std::span<const Architecture* const> Architectures();
// The architecture named `name`, nullptr for none; every name, comma-separated (messages).
const Architecture* FindArchitecture(std::string_view name);
std::string ArchitectureNames();
// Every architecture's Hugging Face table, completed from its data (for OpenHfDirectory).
std::span<const HfFamily* const> HfFamilies();

// Integer key `key` of f within lo..hi: FORMAT_ERROR naming it (and the range) otherwise.
absl::StatusOr<int64_t> IntKeyIn(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi);

// Which layers slide, by llama.cpp's rule for a period of `pattern` layers: every layer l where
// l % pattern < pattern - 1 (2: the even layers; 6: five of each six).
void SlideByPattern(ModelConfig& c, int64_t pattern);

// The data's part of a config: RoPE style, {arch}.attention.sliding_window (FORMAT_ERROR for 0 or
// a window past the training context, or a required one missing), the ArchKeys, and the experts'
// counts and widths (FORMAT_ERROR for a count of 0 or more used than there are; UNSUPPORTED for
// experts in an architecture without ArchitectureData::experts).
absl::Status ReadArchitectureKeys(const GgufFile& f, const ArchitectureData& d, ModelConfig& c);

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_ARCHITECTURE_H_
