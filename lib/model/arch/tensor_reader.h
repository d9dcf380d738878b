#ifndef LLM42_MODEL_ARCH_TENSOR_READER_H_
#define LLM42_MODEL_ARCH_TENSOR_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {

// A model file's tensors as an architecture asks for them (Architecture::LoadLayer): each checked
// for presence, shape and a type llm42 computes with, its blocks for finite scales; FORMAT_ERROR
// naming the tensor ("blk.3.attn_q.weight: expected 64x64, got 64x63"), UNSUPPORTED naming a type
// without kernels. Counts the bytes of the matrices it hands out (a decode step's weight reads).
class TensorReader {
 public:
  explicit TensorReader(const GgufFile& file) : file_(file) {}

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }
  // A matrix of `rows` rows of `cols` weights (GGUF dims {cols, rows}).
  absl::StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t cols, int64_t rows);
  // A 1-D tensor of `cols` values as a matrix of one row (a gate's weights).
  absl::StatusOr<WeightMatrix> RowMatrix(const std::string& name, int64_t cols);
  // The same without counting its bytes (the embedding table: gathered, not streamed).
  absl::StatusOr<WeightMatrix> Table(const std::string& name, int64_t cols, int64_t rows) const;
  // A vector of n values, as f32.
  absl::StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) const;
  // Empty where the file lacks it, else as Vector.
  absl::StatusOr<std::vector<float>> OptionalVector(const std::string& name, int64_t n) const;
  // A small 2-D tensor's values as f32, row after row (a convolution's weights).
  absl::StatusOr<std::vector<float>> Values(const std::string& name, int64_t cols, int64_t rows) const;
  // The n_expert matrices of a 3-D tensor (GGUF dims {cols, rows, n_expert}), each `rows` rows
  // of `cols`; counted as the share of its bytes n_used of them are (a decode step's reads).
  absl::StatusOr<std::vector<WeightMatrix>> Experts(const std::string& name, int64_t cols, int64_t rows,
                                                    int64_t n_expert, int64_t n_used);
  // `n` rows of `m` from row `first` (a part of a fused tensor; its bytes counted already).
  static WeightMatrix Rows(const WeightMatrix& m, int64_t first, int64_t n);

  int64_t matrix_bytes() const { return matrix_bytes_; }
  void count(int64_t bytes) { matrix_bytes_ += bytes; }

 private:
  absl::StatusOr<const GgufTensorInfo*> Find(const std::string& name, const std::vector<int64_t>& dims) const;

  const GgufFile& file_;
  int64_t matrix_bytes_ = 0;
};

}  // namespace llm42

#endif  // LLM42_MODEL_ARCH_TENSOR_READER_H_
