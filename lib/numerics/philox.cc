#include "lib/numerics/philox.h"

namespace llm42 {

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  PhiloxRounds(c.data(), k.data());
  return c;
}

}  // namespace llm42
