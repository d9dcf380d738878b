#include "lib/backend/fixed_gemm_choice.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/util/stable_hash.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

// How many of the library's candidates for kFixedGemmCheckRows rows may serve as the reference.
constexpr int kReferences = 3;
// At most this many of a row count's rejected candidates are named in the log.
constexpr int kNamedRejections = 3;
constexpr int64_t kMostRows = 2048;
constexpr int64_t kCheckOutputBytes = int64_t{256} << 20;

const char* KindName(GemmWay::Kind kind) {
  switch (kind) {
    case GemmWay::Kind::kLibrary: return "library";
    case GemmWay::Kind::kTensorCore: return "tensor-core kernel";
    case GemmWay::Kind::kFmaChain: return "FMA-chain kernel";
  }
  return "?";
}

std::string WayName(const GemmWay& way) {
  return way.kind == GemmWay::Kind::kLibrary ? absl::StrCat("library algo ", way.algo) : KindName(way.kind);
}

// The rows of an m-row run that a check compares: all of them up to twice the check input, else
// its first and last kFixedGemmCheckRows (each of the input's rows at the start and at the end).
std::vector<int64_t> CheckedRows(int64_t m) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < m; ++r) {
    if (m <= 2 * kFixedGemmCheckRows || r < kFixedGemmCheckRows || r >= m - kFixedGemmCheckRows) rows.push_back(r);
  }
  return rows;
}

// "" when `got` equals `ref` (rows of n) to within f32 rounding of a different summation order:
// per row, 2e-3 of the row's largest |ref| plus 1e-5. A wrong kernel (a misplaced fragment, a
// skipped k step) misses by the size of the values themselves.
std::string DisagreementWithReference(const std::vector<float>& got, const std::vector<float>& ref, int64_t n) {
  for (size_t row0 = 0; row0 < ref.size(); row0 += static_cast<size_t>(n)) {
    float scale = 0;
    for (int64_t j = 0; j < n; ++j) scale = std::max(scale, std::abs(ref[row0 + static_cast<size_t>(j)]));
    const float tolerance = 2e-3f * scale + 1e-5f;
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = row0 + static_cast<size_t>(j);
      if (!(std::abs(got[i] - ref[i]) <= tolerance)) {
        return absl::StrCat("output (", row0 / static_cast<size_t>(n), ", ", j, ") is ", got[i],
                            " where the FMA chains give ", ref[i]);
      }
    }
  }
  return "";
}

// Check runs, each (way, row count) run once, kept as a hash of each checked row's bits
// (CheckedRows(m), in order).
class Runs {
 public:
  struct Result {
    std::string refused;
    std::vector<uint64_t> hashes;
  };

  Runs(FixedGemmDevice& device, int64_t n) : device_(device), n_(n) {}

  absl::StatusOr<const Result*> Get(const GemmWay& way, int64_t m) {
    if (auto it = done_.find(Key{way.kind, way.algo, m}); it != done_.end()) return &it->second;
    LLM42_ASSIGN_OR_RETURN(GemmRun run, device_.Run(way, m, CheckedRows(m)));
    return Record(way, m, run);
  }

  // Keeps a run made outside Get (whose outputs the caller wanted as well).
  absl::StatusOr<const Result*> Record(const GemmWay& way, int64_t m, const GemmRun& run) {
    Result r{run.refused, {}};
    const size_t rows = CheckedRows(m).size(), n = static_cast<size_t>(n_);
    if (r.refused.empty()) {
      if (run.rows.size() != rows * n) {
        return absl::InternalError(absl::StrCat("a fixed GEMM check run of ", WayName(way), " returned ",
                                                run.rows.size(), " outputs for ", rows, " rows of ", n_));
      }
      for (size_t i = 0; i < rows; ++i) r.hashes.push_back(StableHash().Mix(run.rows.data() + i * n, n * sizeof(float)).value());
    }
    return &done_.try_emplace(Key{way.kind, way.algo, m}, std::move(r)).first->second;
  }

  // "" when every checked row of (way, m) equals the reference's row of the same input (row r of
  // the check input's r % kFixedGemmCheckRows); else why not.
  absl::StatusOr<std::string> Differs(const GemmWay& way, int64_t m, const Result& ref) {
    LLM42_ASSIGN_OR_RETURN(const Result* got, Get(way, m));
    if (!got->refused.empty()) return got->refused;
    const std::vector<int64_t> rows = CheckedRows(m);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (got->hashes[i] != ref.hashes[static_cast<size_t>(rows[i] % kFixedGemmCheckRows)]) {
        return absl::StrCat("row ", rows[i], " of ", m, " differs");
      }
    }
    return std::string();
  }

 private:
  using Key = std::tuple<GemmWay::Kind, int, int64_t>;
  FixedGemmDevice& device_;
  int64_t n_;
  absl::node_hash_map<Key, Result> done_;  // Results stay where they are: callers hold them
};

// Step 1 of ChooseFixedGemm: nullopt when no reference passes at every row count (each
// reference's reason appended to `rejected`).
absl::StatusOr<std::optional<FixedGemmChoice>> LibraryChoice(FixedGemmDevice& device, Runs& runs, int64_t ref_m,
                                                             int64_t max_rows, std::vector<std::string>& rejected) {
  LLM42_ASSIGN_OR_RETURN(std::vector<int> refs, device.LibraryCandidates(ref_m));
  if (refs.empty()) rejected.push_back(absl::StrCat("library: no algorithm for ", ref_m, " rows"));
  const std::vector<int64_t> buckets = FixedGemmBuckets(max_rows);
  for (size_t i = 0; i < refs.size() && i < kReferences; ++i) {
    const GemmWay ref_way{GemmWay::Kind::kLibrary, refs[i]};
    LLM42_ASSIGN_OR_RETURN(const Runs::Result* ref, runs.Get(ref_way, ref_m));
    if (!ref->refused.empty()) {
      rejected.push_back(absl::StrCat(WayName(ref_way), ": ", ref->refused));
      continue;
    }
    FixedGemmChoice choice;
    choice.rows = buckets;
    choice.max_rows = max_rows;
    std::string failed;
    for (int64_t b : buckets) {
      LLM42_ASSIGN_OR_RETURN(std::vector<int> candidates, device.LibraryCandidates(b));
      if (std::find(candidates.begin(), candidates.end(), refs[i]) == candidates.end()) candidates.push_back(refs[i]);
      std::vector<std::string> why_not;
      bool found = false;
      for (int c : candidates) {
        const GemmWay way{GemmWay::Kind::kLibrary, c};
        LLM42_ASSIGN_OR_RETURN(std::string differs, runs.Differs(way, b, *ref));
        if (differs.empty()) {
          choice.ways.push_back(way);
          found = true;
          break;
        }
        if (static_cast<int>(why_not.size()) < kNamedRejections) why_not.push_back(absl::StrCat(c, ": ", differs));
      }
      if (!found) {
        failed = absl::StrCat("at ", b, " rows none of ", candidates.size(), " algorithms reproduces its rows (",
                              absl::StrJoin(why_not, ", "), candidates.size() > why_not.size() ? ", ..." : "", ")");
        break;
      }
    }
    if (!failed.empty()) {
      rejected.push_back(absl::StrCat("reference ", WayName(ref_way), ": ", failed));
      continue;
    }
    std::vector<int> used;
    for (const GemmWay& w : choice.ways) {
      if (std::find(used.begin(), used.end(), w.algo) == used.end()) used.push_back(w.algo);
    }
    choice.why = absl::StrCat("library algo", used.size() > 1 ? "s " : " ", absl::StrJoin(used, ", "), " over ",
                              buckets.size(), " row counts to ", max_rows, ", checked against ", WayName(ref_way));
    return choice;
  }
  return std::nullopt;
}

}  // namespace

std::vector<float> FixedGemmCheckInput(int64_t k) {
  std::vector<float> x(static_cast<size_t>(kFixedGemmCheckRows * k));
  uint32_t r = 2463534242u;
  for (float& v : x) {
    r ^= r << 13;
    r ^= r >> 17;
    r ^= r << 5;
    v = static_cast<float>(r >> 8) * 0x1.0p-23f - 1.0f;
  }
  return x;
}

FixedGemmChoice::Chunk FixedGemmChoice::ChunkAt(int64_t first, int64_t m) const {
  Chunk c{first, std::min(max_rows > 0 ? max_rows : m, m - first), 0, ways[0]};  // (a choice sets max_rows)
  c.padded_rows = c.rows;
  if (!rows.empty()) {
    const auto at = std::lower_bound(rows.begin(), rows.end(), c.rows);
    c.padded_rows = *at;
    c.way = ways[static_cast<size_t>(at - rows.begin())];
  }
  return c;
}

std::vector<FixedGemmChoice::Chunk> FixedGemmChoice::Chunks(int64_t m) const {
  std::vector<Chunk> chunks;
  for (int64_t first = 0; first < m; first += chunks.back().rows) chunks.push_back(ChunkAt(first, m));
  return chunks;
}

int64_t FixedGemmChoice::PaddedRows(int64_t m) const {
  if (m <= 0) return 0;
  const int64_t most = max_rows > 0 ? max_rows : m;
  const Chunk last = ChunkAt((m - 1) / most * most, m);
  return last.first_row + last.padded_rows;
}

std::vector<int64_t> FixedGemmBuckets(int64_t max_rows) {
  std::vector<int64_t> b;
  for (int64_t m = 1; m <= std::min<int64_t>(64, max_rows); m *= 2) b.push_back(m);
  for (int64_t m = 128; m <= max_rows; m += 64) b.push_back(m);
  if (b.back() != max_rows) b.push_back(max_rows);
  return b;
}

int64_t FixedGemmMaxRows(int64_t n) {
  const int64_t fits = kCheckOutputBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(n, 1));
  return std::clamp<int64_t>(fits / 64 * 64, 64, kMostRows);
}

absl::StatusOr<FixedGemmChoice> ChooseFixedGemm(FixedGemmDevice& device, int64_t n, int64_t max_rows,
                                                FixedGemmForce force) {
  max_rows = std::max<int64_t>(max_rows, 1);
  const int64_t ref_m = std::min(kFixedGemmCheckRows, max_rows);
  Runs runs(device, n);
  std::vector<std::string> rejected;

  // 1. The library.
  if (force == FixedGemmForce::kNone) {
    LLM42_ASSIGN_OR_RETURN(std::optional<FixedGemmChoice> library,
                           LibraryChoice(device, runs, ref_m, max_rows, rejected));
    if (library.has_value()) {
      if (!rejected.empty()) absl::StrAppend(&library->why, "; not ", absl::StrJoin(rejected, "; "));
      return *std::move(library);
    }
  }

  FixedGemmChoice own;
  own.max_rows = max_rows;
  const char* forced = force == FixedGemmForce::kNone ? "" : " (forced)";
  // 2. The tensor-core kernel.
  if (force != FixedGemmForce::kFmaChain) {
    const GemmWay tc{GemmWay::Kind::kTensorCore};
    const std::vector<int64_t> rows = CheckedRows(ref_m);
    LLM42_ASSIGN_OR_RETURN(const GemmRun got, device.Run(tc, ref_m, rows));  // its outputs serve twice
    LLM42_ASSIGN_OR_RETURN(const Runs::Result* ref, runs.Record(tc, ref_m, got));
    std::string why = ref->refused;
    for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{64}, max_rows}) {
      if (!why.empty()) break;
      if (m == ref_m || m > max_rows) continue;
      LLM42_ASSIGN_OR_RETURN(why, runs.Differs(tc, m, *ref));
    }
    if (why.empty()) {
      LLM42_ASSIGN_OR_RETURN(const GemmRun chains, device.Run(GemmWay{GemmWay::Kind::kFmaChain}, ref_m, rows));
      why = !chains.refused.empty() ? chains.refused : DisagreementWithReference(got.rows, chains.rows, n);
    }
    if (why.empty()) {
      own.ways = {tc};
      own.why = absl::StrCat(KindName(tc.kind), forced);
    } else {
      rejected.push_back(absl::StrCat(KindName(tc.kind), ": ", why));
    }
  }
  // 3. The FMA chains.
  if (own.ways.empty()) {
    own.ways = {GemmWay{GemmWay::Kind::kFmaChain}};
    own.why = absl::StrCat(KindName(GemmWay::Kind::kFmaChain), forced);
    own.fallback = true;
  }
  if (!rejected.empty()) absl::StrAppend(&own.why, ": ", absl::StrJoin(rejected, "; "));
  return own;
}

}  // namespace llm42
