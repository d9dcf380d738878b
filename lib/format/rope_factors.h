#ifndef LLM42_FORMAT_ROPE_FACTORS_H_
#define LLM42_FORMAT_ROPE_FACTORS_H_

#include <cstdint>
#include <vector>

namespace llm42 {

// The Llama 3.1 RoPE frequency divisors (Hugging Face rope_scaling type "llama3") for n_rot
// dims: 1 for high frequencies, `factor` for low ones, interpolated between.
std::vector<float> Llama3RopeFactors(int64_t n_rot, double base, double factor, double low_freq_factor,
                                     double high_freq_factor, double original_context);

}  // namespace llm42

#endif  // LLM42_FORMAT_ROPE_FACTORS_H_
