#ifndef LLM42_ENGINE_RECEIPT_H_
#define LLM42_ENGINE_RECEIPT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "lib/engine/options.h"
#include "lib/engine/request.h"
#include "lib/model/fingerprint.h"
#include "lib/util/mutex.h"
#include "proto/receipt.pb.h"

namespace llm42 {

// What a session contributes to a receipt: the model and how its fixed schedule runs.
struct ReceiptSetup {
  ModelFingerprintValue model;
  std::string model_name;
  uint32_t schedule_version = 0;
  std::string backend, device, kv_dtype;
  int32_t tensor_parallel = 1;
  int64_t max_sequence = 0;  // the session's limit on a sequence's positions (Session::max_sequence)
};

// What checking a receipt found. The three ways to differ are told apart: another model file,
// another schedule (a different fixed-schedule version, backend, device or KV type: bits are not
// promised to carry over), or the same setup giving other output (a real reproducibility
// failure).
struct ReceiptCheck {
  enum class Outcome : int32_t { kReproduced = 0, kOtherModel = 1, kOtherSchedule = 2, kOtherOutput = 3 };
  Outcome outcome = Outcome::kReproduced;
  // kOtherOutput: the first output position whose token, logprob bits or end differ.
  int64_t first_difference = -1;
  std::string detail;  // one line: what differs
};

// The session's side of receipts, shared with every request it accepted, so that a finished
// request's receipt can be made after its session is gone: the model file (fingerprinted on
// first use, once) and how the session runs the fixed schedule.
class ReceiptContext {
 public:
  // `setup` without its model fields; `all_fixed`: a batch_invariant session, whose every
  // request is deterministic.
  ReceiptContext(std::shared_ptr<const GgufFile> file, int threads, ReceiptSetup setup, bool all_fixed);

  const ModelFingerprintValue& Fingerprint();
  ReceiptSetup Setup();
  // The receipt of finished request `r`: a deterministic request (or any, when all_fixed) that
  // ended by a stop or its length; FailedPrecondition otherwise.
  absl::StatusOr<std::string> Make(const Request& r);

 private:
  const std::shared_ptr<const GgufFile> file_;
  const int threads_;
  const bool all_fixed_;
  Mutex mu_;
  ReceiptSetup setup_ ABSL_GUARDED_BY(mu_);  // setup_.model is filled on first use
};

// The serialized receipt (binary Protobuf, digest filled) of a request that finished with
// `output` (and its logprobs, when it asked for them) after being fed `prompt` (the whole
// sequence, a parent's tokens included) with the effective seed `seed`.
std::string MakeReceipt(const ReceiptSetup& setup, const std::vector<int32_t>& prompt, const RequestOptions& options,
                        uint64_t seed, const std::vector<int32_t>& output, const std::vector<float>& logprobs,
                        FinishReason reason);

// `r` serialized with its digest made (MakeReceipt's last step; tests forge receipts with it).
std::string SealReceipt(Receipt r);

// A receipt from its binary or text form; DataLoss when it is neither, when its format is
// unknown, when its digest does not match its contents (altered or damaged), or when its fields
// are inconsistent (a value no writer makes, or one a replay would ignore: an unknown finish
// reason or grammar kind, a grammar without a kind or a kind without a grammar, penalties
// without repetition_penalty or recorded with none on, logit biases out of token order).
absl::StatusOr<Receipt> ParseReceipt(std::string_view bytes);
std::string ReceiptText(const Receipt& receipt);

// kOtherModel or kOtherSchedule when the receipt was made elsewhere; kReproduced when the setups
// agree (the output is still to be compared).
ReceiptCheck CompareSetup(const Receipt& receipt, const ReceiptSetup& here);
// The request that replays the receipt.
// FORMAT_ERROR when the receipt's options are not valid ones (a grammar that does not parse).
absl::StatusOr<RequestOptions> ReplayOptions(const Receipt& receipt);
// The replay's output against the receipt's.
ReceiptCheck CompareOutput(const Receipt& receipt, const std::vector<int32_t>& tokens,
                           const std::vector<float>& logprobs, FinishReason reason);

}  // namespace llm42

#endif  // LLM42_ENGINE_RECEIPT_H_
