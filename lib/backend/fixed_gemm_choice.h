#ifndef LLM42_BACKEND_FIXED_GEMM_CHOICE_H_
#define LLM42_BACKEND_FIXED_GEMM_CHOICE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llm42 {

// How a device backend picks the GEMM that runs the `fixed` schedule for one weight shape, so
// that a row's bits never depend on how many rows share the call. A GPU's GEMM library promises
// nothing about that (docs/gpu-determinism.md), so the choice is made by experiment, once per
// shape (on CUDA once per process), and never changes during a session. The rule lives here,
// device-free, so that it is tested on any machine against a fake device
// (tests/fixed_gemm_choice_test.cc); the CUDA backend drives it with cuBLASLt
// (lib/backend/cuda/lt_gemm.cc).

// One way a device can run a fixed GEMM.
struct GemmWay {
  enum class Kind {
    kLibrary,     // one of the library's algorithms (cuBLASLt), split-K off, little or no workspace
    kTensorCore,  // the backend's own tensor-core kernel, row-invariant by construction
    kFmaChain,    // the backend's own FMA-chain kernel: slow, invariant by construction
  };
  Kind kind = Kind::kFmaChain;
  int algo = -1;  // kLibrary: the device's id of the algorithm
  bool operator==(const GemmWay&) const = default;
};

// The check input: row r of every check run is FixedGemmCheckRow(r % kFixedGemmCheckRows), so a
// run of m rows holds the same rows several times over and each must come out the same.
inline constexpr int64_t kFixedGemmCheckRows = 256;
// The kFixedGemmCheckRows x k check values, in [-1, 1) (a fixed xorshift: every run checks the
// same); a device rounds them to its 16-bit type.
std::vector<float> FixedGemmCheckInput(int64_t k);

// What one check run produced.
struct GemmRun {
  // Why the way cannot run this many rows (the library does not support it, or wants a
  // workspace); empty when it ran.
  std::string refused;
  // The outputs of the rows asked for, n floats each, in the order asked.
  std::vector<float> rows;
};

// A device's GEMMs for one weight matrix of n outputs, as ChooseFixedGemm drives them.
class FixedGemmDevice {
 public:
  virtual ~FixedGemmDevice() = default;
  // The library's algorithms for a GEMM of m rows, best first, as ids that name one algorithm
  // (the same configuration, run with split-K off) whatever m asked for them.
  virtual absl::StatusOr<std::vector<int>> LibraryCandidates(int64_t m) = 0;
  // Runs `way` over m rows of the check input and returns the outputs of `rows` (each < m).
  virtual absl::StatusOr<GemmRun> Run(const GemmWay& way, int64_t m, std::span<const int64_t> rows) = 0;
};

// The fixed GEMM of one weight shape: how a call of m rows runs (Chunks). Every (row count,
// way) pair it runs was checked.
struct FixedGemmChoice {
  // Row counts the GEMM runs at, ascending, each with its way; empty when one way runs any
  // count as it is (ways then holds that one).
  std::vector<int64_t> rows;
  std::vector<GemmWay> ways;
  int64_t max_rows = 0;   // the most rows one run takes
  std::string why;        // what was chosen and why the better options were not
  bool fallback = false;  // the FMA chains: correct, and far slower than the device can be

  // A call's rows [first_row, first_row + rows) run as `padded_rows` rows with `way`: the call's
  // rows in the first `rows` of them, the outputs of the rest dropped.
  struct Chunk {
    int64_t first_row = 0, rows = 0, padded_rows = 0;
    GemmWay way;
  };
  // A call of m rows: chunks of max_rows, the last padded up to the next checked row count.
  std::vector<Chunk> Chunks(int64_t m) const;
  // The rows a call of m rows reads and writes once padded: the last chunk's end (only the last
  // is padded), so a caller whose buffers hold this many rows lets the padding run in place (what
  // the rows past m hold does not matter: no row's outputs depend on another row's inputs).
  int64_t PaddedRows(int64_t m) const;

 private:
  // The chunk of a call of m rows that starts at row `first`.
  Chunk ChunkAt(int64_t first, int64_t m) const;
};

// Row counts a library GEMM is checked and run at, up to max_rows: the powers of two to 64, then
// multiples of 64 (padding wastes at most half a decode-sized call, which reads the weights
// either way, and less than a fifth of a prefill chunk's work past 320 rows).
std::vector<int64_t> FixedGemmBuckets(int64_t max_rows);
// The largest call for a weight of n outputs: 2048 rows, or fewer where a check run's output
// would pass 256 MiB (a vocabulary head); a multiple of 64, at least 64.
int64_t FixedGemmMaxRows(int64_t n);

// Which ways the choice may take: all, the own kernels only, or the FMA chains only (the device
// tests run each; LLM42_CUDA_OWN_FIXED_GEMM=1 and =fma on CUDA).
enum class FixedGemmForce { kNone, kOwnKernels, kFmaChain };

// The first that passes, in this order:
//  1. The library, per row count (FixedGemmBuckets): a reference algorithm (one of the library's
//     first three candidates for kFixedGemmCheckRows rows) gives the reference rows; at every
//     row count, the first of the library's candidates for that count (then the reference
//     itself) whose every row equals the reference's bitwise is that count's way. One algorithm
//     throughout when it passes everywhere; several where the library's best kernel changes with
//     the row count but keeps the same arithmetic (as cuBLASLt's no-workspace choices did at the
//     Llama-8B shapes on an H200, docs/gpu-determinism.md finding 0).
//  2. The tensor-core kernel: its rows at 1, 7, 64 and max_rows rows equal those at
//     kFixedGemmCheckRows (or max_rows, if fewer), and those agree with the FMA chains' to within rounding (2e-3 of a
//     row's largest output: a guard against a kernel that is invariant but wrong).
//  3. The FMA chains, unchecked.
// Runs take at most max_rows rows (FixedGemmMaxRows of the weight's n outputs on a device; at
// least 1). Errors only when the device fails (a status from it).
absl::StatusOr<FixedGemmChoice> ChooseFixedGemm(FixedGemmDevice& device, int64_t n, int64_t max_rows,
                                                FixedGemmForce force);

}  // namespace llm42

#endif  // LLM42_BACKEND_FIXED_GEMM_CHOICE_H_
