#ifndef LLM42_MODEL_ARCH_ARCHITECTURE_H_
#define LLM42_MODEL_ARCH_ARCHITECTURE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/model/layer_tensors.h"
#include "lib/model/model_config.h"

namespace llm42 {

class GgufFile;
class TensorReader;

// What one layer's graph works on (ModelRunner builds it per layer): the backend, the batch's
// rows and schedules, the activation buffers ([rows][width] each: x the residual stream,
// n_embd wide; xn a normalized copy; q q_dim; k, v kv_dim; attn q_dim; proj n_embd; gate, up
// n_ff), this layer's RoPE and attention heads (its window, scale, cap).
struct LayerGraph {
  Backend& be;
  const ModelConfig& c;
  int64_t layer;
  int64_t m;
  Schedules sc;
  RopeParams rope;
  AttentionShape heads;
  float *x, *xn, *q, *k, *v, *attn, *proj, *gate, *up;
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
  // general.architecture's value.
  virtual std::string_view name() const = 0;
  // Its own hyperparameters into c, after ModelConfig::FromGguf read the common ones (RoPE style,
  // windows, scales, caps): FORMAT_ERROR for a value out of range.
  virtual absl::Status ReadConfig(const GgufFile& f, ModelConfig& c) const = 0;
  // Layer l's tensors into L.
  virtual absl::Status LoadLayer(TensorReader& r, const ModelConfig& c, int64_t l, HostLayer& L) const = 0;
  // Layer l's forward pass: g.x updated in place.
  virtual absl::Status Layer(const LayerGraph& g, const BackendLayer& L) const = 0;
};

// The architecture named `name`, nullptr for none; every name, comma-separated (messages).
const Architecture* FindArchitecture(std::string_view name);
std::string ArchitectureNames();

// ReadConfig's helper: {arch}.attention.sliding_window into c.sliding_window where the file has
// it (required unless `optional`), FORMAT_ERROR for 0 or a window past the training context.
absl::Status ReadSlidingWindow(const GgufFile& f, ModelConfig& c, bool optional);

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_ARCHITECTURE_H_
