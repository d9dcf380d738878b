#ifndef LLM42_NUMERICS_PHILOX_H_
#define LLM42_NUMERICS_PHILOX_H_

#include <array>
#include <cstdint>

#include "lib/numerics/host_device.h"

namespace llm42 {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so the random number for (seed, position, stream) is a pure function
// of them. Rolling a sequence back needs no RNG state, and a replay draws exactly what the first
// pass drew. The rounds are written once for the host and a device (host_device.h).
LLM42_HD inline void PhiloxRounds(uint32_t c[4], uint32_t k[2]) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
}

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// 53 random bits for (seed, position, stream): PhiloxUniform's, as an integer.
LLM42_HD inline uint64_t PhiloxBits53(uint64_t seed, uint64_t position, uint32_t stream = 0) {
  uint32_t c[4] = {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), stream, 0};
  uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  PhiloxRounds(c, k);
  const uint64_t bits = (static_cast<uint64_t>(c[0]) << 21) ^ (static_cast<uint64_t>(c[1]) >> 11);
  return bits & ((uint64_t{1} << 53) - 1);
}

// Uniform double in [0, 1) for (seed, position, stream): PhiloxBits53 * 2^-53.
LLM42_HD inline double PhiloxUniform(uint64_t seed, uint64_t position, uint32_t stream = 0) {
  return static_cast<double>(PhiloxBits53(seed, position, stream)) * 0x1.0p-53;
}

}  // namespace llm42

#endif  // LLM42_NUMERICS_PHILOX_H_
