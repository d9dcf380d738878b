#ifndef LLM42_FORMAT_HF_FAMILY_H_
#define LLM42_FORMAT_HF_FAMILY_H_

// How a Hugging Face checkpoint of one model family becomes the GGUF llama.cpp's converter would
// write, as data: the format layer converts by these tables and knows no family. Each family's
// table is declared in its own file under lib/model/arch (ArchitectureData::hf), and the model
// layer hands the list to OpenHfDirectory (lib/model/model_file.h).
#include <string_view>
#include <utility>
#include <vector>

namespace llm42 {

struct HfFamily {
  // A config.json value that becomes a GGUF key {arch}.gguf (fallback where config.json lacks it).
  struct Key {
    std::string_view hf = {};
    std::string_view gguf = {};
    double fallback = 0;
  };
  std::string_view arch = {};                  // general.architecture
  std::vector<std::string_view> classes = {};  // config.json's architectures[0] values it converts
  // Tensors of a layer (the name after "model.layers.N.") whose GGUF names differ from the common
  // table's (hf_loader.cc): consulted first.
  std::vector<std::pair<std::string_view, std::string_view>> layer_tensors = {};
  bool norms_plus_one = false;  // RMSNorm weights scale by 1 + weight; GGUF holds 1 + weight
  bool permute_qk = false;      // q/k rows in rotate-half order; GGUF's are interleaved per head
  bool sliding = false;         // config.json's sliding_window is {arch}.attention.sliding_window
                                // (else it caps the context: the layers do not slide)
  std::vector<Key> keys = {};
};

}  // namespace llm42

#endif  // LLM42_FORMAT_HF_FAMILY_H_
