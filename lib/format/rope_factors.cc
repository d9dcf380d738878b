#include "lib/format/rope_factors.h"

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

}  // namespace llm42
