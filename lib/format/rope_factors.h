#ifndef LLM42_FORMAT_ROPE_FACTORS_H_
#define LLM42_FORMAT_ROPE_FACTORS_H_

#include <cstdint>
#include <vector>

namespace llm42 {

// The Llama 3.1 RoPE frequency divisors (Hugging Face rope_scaling type "llama3") for n_rot
// dims: 1 for high frequencies, `factor` for low ones, interpolated between.
std::vector<float> Llama3RopeFactors(int64_t n_rot, double base, double factor, double low_freq_factor,
                                     double high_freq_factor, double original_context);

// YaRN's RoPE scaling (GGUF rope.scaling.type "yarn") as per-pair divisors for n_rot dims, as
// ggml computes it with ext_factor 1: pair i's angle is the unscaled one times
// freq_scale * (1 - r_i) + r_i, r_i ramping from 1 (high frequencies: extrapolated) to 0 (low:
// interpolated by 1 / factor) between the correction dims of beta_fast and beta_slow at
// `original_context`. The divisor is that product's inverse.
std::vector<float> YarnRopeFactors(int64_t n_rot, double base, double factor, double original_context,
                                   double beta_fast, double beta_slow);

// YaRN's magnitude scale of every cosine and sine, as llama.cpp ends up applying it: 0.1 ln(factor)
// + 1 (the "mscale"), divided by the same with `log_mul` (rope.scaling.yarn_log_multiplier,
// Hugging Face's mscale_all_dim) where that is nonzero, times `attn_factor`.
float YarnMagnitude(double factor, double log_mul, double attn_factor);

}  // namespace llm42

#endif  // LLM42_FORMAT_ROPE_FACTORS_H_
