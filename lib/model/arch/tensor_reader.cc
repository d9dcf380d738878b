#include "lib/model/arch/tensor_reader.h"

#include "absl/strings/str_join.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

std::string Shape(const std::vector<int64_t>& dims) { return absl::StrJoin(dims, "x"); }

}  // namespace

absl::StatusOr<const GgufTensorInfo*> TensorReader::Find(const std::string& name,
                                                         const std::vector<int64_t>& dims) const {
  const GgufTensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return FormatError("missing tensor '", name, "'");
  if (t->dims != dims) {
    return FormatError("tensor ", name, ": expected ", Shape(dims), ", got ", Shape(t->dims));
  }
  const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(t->type));
  if (!info.computable) {
    return UnsupportedError("tensor '", name, "' has type ", info.name,
                            ", which llm42 cannot compute with yet (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                            "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4)");
  }
  // A damaged block (a scale that is infinite or NaN) would turn every output it touches to NaN.
  if (info.block_size > 1) {
    const auto n_blocks = static_cast<int64_t>(t->n_bytes / static_cast<uint64_t>(info.block_bytes));
    if (const int64_t bad = FirstNonFiniteBlock(t->type, t->data, n_blocks); bad >= 0) {
      return FormatError("tensor ", name, ": block ", bad, " of ", n_blocks, " (", info.name,
                         ") has a scale that is infinite or NaN");
    }
  }
  return t;
}

absl::StatusOr<WeightMatrix> TensorReader::Table(const std::string& name, int64_t cols, int64_t rows) const {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {cols, rows}));
  WeightMatrix w;
  w.type = t->type;
  w.data = t->data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<size_t>(t->n_bytes / static_cast<uint64_t>(rows));
  return w;
}

absl::StatusOr<WeightMatrix> TensorReader::Matrix(const std::string& name, int64_t cols, int64_t rows) {
  LLM42_ASSIGN_OR_RETURN(WeightMatrix w, Table(name, cols, rows));
  matrix_bytes_ += static_cast<int64_t>(w.row_bytes) * rows;
  return w;
}

absl::StatusOr<WeightMatrix> TensorReader::RowMatrix(const std::string& name, int64_t cols) {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {cols}));
  matrix_bytes_ += static_cast<int64_t>(t->n_bytes);
  return WeightMatrix{t->type, t->data, 1, cols, static_cast<size_t>(t->n_bytes)};
}

absl::StatusOr<std::vector<WeightMatrix>> TensorReader::Experts(const std::string& name, int64_t cols, int64_t rows,
                                                                int64_t n_expert, int64_t n_used) {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {cols, rows, n_expert}));
  WeightMatrix all;
  all.type = t->type;
  all.data = t->data;
  all.rows = rows * n_expert;
  all.cols = cols;
  all.row_bytes = static_cast<size_t>(t->n_bytes / static_cast<uint64_t>(all.rows));
  std::vector<WeightMatrix> experts;
  for (int64_t e = 0; e < n_expert; ++e) experts.push_back(Rows(all, e * rows, rows));
  matrix_bytes_ += static_cast<int64_t>(t->n_bytes) / n_expert * n_used;
  return experts;
}

absl::StatusOr<std::vector<float>> TensorReader::Vector(const std::string& name, int64_t n) const {
  LLM42_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {n}));
  std::vector<float> v(static_cast<size_t>(n));
  internal::DequantizeRow(t->type, t->data, n, v.data());
  return v;
}

absl::StatusOr<std::vector<float>> TensorReader::Values(const std::string& name, int64_t cols, int64_t rows) const {
  LLM42_ASSIGN_OR_RETURN(const WeightMatrix w, Table(name, cols, rows));
  std::vector<float> v(static_cast<size_t>(cols * rows));
  for (int64_t r = 0; r < rows; ++r) internal::DequantizeRow(w.type, w.row(r), cols, v.data() + r * cols);
  return v;
}

absl::StatusOr<std::vector<float>> TensorReader::OptionalVector(const std::string& name, int64_t n) const {
  if (!Has(name)) return std::vector<float>();
  return Vector(name, n);
}

WeightMatrix TensorReader::Rows(const WeightMatrix& m, int64_t first, int64_t n) {
  WeightMatrix w = m;
  w.data = m.row(first);
  w.rows = n;
  return w;
}

}  // namespace llm42
