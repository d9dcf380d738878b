#ifndef LLM42_TOOLS_LLM42_MACHINE_LIMITS_H_
#define LLM42_TOOLS_LLM42_MACHINE_LIMITS_H_

namespace llm42::cli {

// The machine's limits, measured in the same run as a benchmark so that its figures can be
// read as fractions of them.

// Bytes per second: the best of a few passes of a multi-threaded streaming read over 1 GiB.
double MeasureReadBandwidth(int threads);

// FLOP/s of fused multiply-adds on `threads` threads with vectors of `bits` (256 or 512; 0
// when the CPU lacks them): independent accumulator chains, enough to cover the latency.
double MeasureFmaPeak(int threads, int bits);

// FLOP/s of AVX-512 BF16 dot products (vdpbf16ps: four FLOPs per lane) on `threads` threads; 0
// when the CPU lacks them.
double MeasureBf16DotPeak(int threads);

}  // namespace llm42::cli

#endif  // LLM42_TOOLS_LLM42_MACHINE_LIMITS_H_
