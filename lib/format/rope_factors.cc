#include "lib/format/rope_factors.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lib/numerics/portable_math.h"

namespace llm42 {

std::vector<float> Llama3RopeFactors(int64_t n_rot, double base, double factor, double low_freq_factor,
                                     double high_freq_factor, double original_context) {
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / PortablePow(base, static_cast<double>(i) / static_cast<double>(n_rot));
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

std::vector<float> YarnRopeFactors(int64_t n_rot, double base, double factor, double original_context,
                                   double beta_fast, double beta_slow) {
  // ggml_rope_yarn_corr_dims: the dims whose wavelength makes beta turns over the original context.
  auto corr_dim = [&](double beta) {
    return static_cast<double>(n_rot) * PortableLog(original_context / (beta * 2 * std::numbers::pi)) /
           (2 * PortableLog(base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(beta_fast)));
  const double high = std::min(static_cast<double>(n_rot - 1), std::ceil(corr_dim(beta_slow)));
  const double freq_scale = 1.0 / factor;
  std::vector<float> divisors;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double ramp = 1 - std::min(1.0, std::max(0.0, y));
    divisors.push_back(static_cast<float>(1.0 / (freq_scale * (1 - ramp) + ramp)));
  }
  return divisors;
}

float YarnMagnitude(double factor, double log_mul, double attn_factor) {
  auto mscale = [](double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * PortableLog(scale) + 1.0; };
  const double m = log_mul != 0 ? mscale(factor, 1.0) / mscale(factor, log_mul) : mscale(factor, 1.0);
  return static_cast<float>(m * attn_factor);
}

}  // namespace llm42
