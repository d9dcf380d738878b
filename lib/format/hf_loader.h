#ifndef LLM42_FORMAT_HF_LOADER_H_
#define LLM42_FORMAT_HF_LOADER_H_

#include <memory>
#include <string>

#include <span>

#include "absl/status/statusor.h"
#include "lib/format/gguf_reader.h"
#include "lib/format/hf_family.h"

namespace llm42 {

// Opens `path` as a model: a GGUF file, or a Hugging Face directory of one of `families` (see
// OpenHfDirectory). lib/model/model_file.h's OpenModel passes every architecture's.
absl::StatusOr<std::unique_ptr<GgufFile>> OpenModelFile(const std::string& path,
                                                        std::span<const HfFamily* const> families);

// A Hugging Face checkpoint directory presented as the GGUF llama.cpp's converter would write,
// without copying the weights:
// - config.json: an architectures[0] class of one of `families` (hf_family.h: its tensor names,
//   keys and conversions); rope_scaling none, linear, llama3 or longrope;
// - a tokenizer: tokenizer.json with a byte-level BPE model, SentencePiece's tokenizer.model
//   (BPE), or vocab.json + merges.txt; tokenizer_config.json for special tokens, add_bos_token
//   and chat_template;
// - model.safetensors or the shards model.safetensors.index.json names, in F32, F16 or BF16
//   (neither: no tensors, for tokenizer-only sessions).
// Tensors are the mapped safetensors data, except q/k projections a family stores in rotate-half
// order, which are copied with their rows permuted into GGUF's interleaved-RoPE order, and norms a
// family stores without their 1 +, so that both layouts compute the same bits. FORMAT_ERROR for
// missing or malformed files (naming the file and field), UNSUPPORTED for other architectures,
// dtypes, tokenizer models and RoPE scalings (naming them).
absl::StatusOr<std::unique_ptr<GgufFile>> OpenHfDirectory(const std::string& dir, std::span<const HfFamily* const> families);

}  // namespace llm42

#endif  // LLM42_FORMAT_HF_LOADER_H_
