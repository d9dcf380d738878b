#ifndef LLM42_NUMERICS_HOST_DEVICE_H_
#define LLM42_NUMERICS_HOST_DEVICE_H_

// What lets one function be compiled for the host and for a CUDA device alike: the rules whose
// bits must be the same wherever they run (lib/numerics/) are written once, in headers that
// include only this and <cstdint>, in C++17 (what nvcc builds), and called from both.

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LLM42_HD __host__ __device__
#else
#define LLM42_HD
#endif

namespace llm42 {

LLM42_HD inline uint64_t BitsOfDouble(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

LLM42_HD inline double DoubleOfBits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

LLM42_HD inline uint32_t BitsOfFloat(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__float_as_uint(x));
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

}  // namespace llm42

#endif  // LLM42_NUMERICS_HOST_DEVICE_H_
