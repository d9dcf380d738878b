#ifndef LLM42_NUMERICS_PHILOX_H_
#define LLM42_NUMERICS_PHILOX_H_

#include <array>
#include <cstdint>

namespace llm42 {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so the random number for (seed, position, stream) is a pure function
// of them. Rolling a sequence back needs no RNG state, and a replay draws exactly what the first
// pass drew.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Uniform double in [0, 1) for (seed, position, stream), 53 random bits.
double PhiloxUniform(uint64_t seed, uint64_t position, uint32_t stream = 0);

}  // namespace llm42

#endif  // LLM42_NUMERICS_PHILOX_H_
