// `llm42 verify` and the receipt half of `llm42 generate --receipt`: reproducibility receipts
// (docs/receipts.md) written and checked from the command line.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "lib/engine/receipt.h"
#include "lib/util/platform.h"
#include "llm42/llm42.hpp"
#include "tools/llm42/commands.h"

ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, kv_dtype);
ABSL_DECLARE_FLAG(int32_t, context);

namespace llm42::cli {

namespace {

bool IsTextPath(const std::string& path) {
  return absl::EndsWith(path, ".txtpb") || absl::EndsWith(path, ".textproto") || absl::EndsWith(path, ".txt");
}

const char* OutcomeName(llm42_receipt_outcome o) {
  switch (o) {
    case LLM42_RECEIPT_REPRODUCED: return "REPRODUCED";
    case LLM42_RECEIPT_OTHER_MODEL: return "OTHER MODEL";
    case LLM42_RECEIPT_OTHER_SCHEDULE: return "OTHER SCHEDULE";
    case LLM42_RECEIPT_OTHER_OUTPUT: return "NOT REPRODUCED";
    default: return "UNKNOWN";
  }
}

}  // namespace

bool WriteReceiptFile(api::Request& request, const std::string& path) {
  std::string bytes = request.Receipt();
  if (IsTextPath(path)) {
    auto parsed = ParseReceipt(bytes);
    if (!parsed.ok()) {
      std::cerr << "llm42: " << parsed.status().message() << "\n";
      return false;
    }
    bytes = ReceiptText(*parsed);
  }
  std::ofstream out(platform::Utf8Path(path), std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::cerr << "llm42: cannot write the receipt to " << path << "\n";
    return false;
  }
  std::cerr << "llm42: receipt written to " << path << "\n";
  return true;
}

int Verify(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::cerr << "usage: llm42 verify --model PATH RECEIPT\n";
    return 2;
  }
  const std::optional<std::string> read = ReadFileBytes(args[0]);
  if (!read) {
    std::cerr << "llm42: cannot read " << args[0] << "\n";
    return 2;
  }
  const std::string& bytes = *read;
  const auto receipt = ParseReceipt(bytes);
  if (!receipt.ok()) {
    std::cerr << "llm42: " << args[0] << ": " << receipt.status().message() << "\n";
    return 1;
  }
  // Unless told otherwise, replay where the receipt was made: its backend and KV type.
  if (absl::GetFlag(FLAGS_backend) == "auto") absl::SetFlag(&FLAGS_backend, receipt->schedule().backend());
  if (absl::GetFlag(FLAGS_kv_dtype) == "auto") absl::SetFlag(&FLAGS_kv_dtype, receipt->schedule().kv_dtype());
  // And with room for the whole sequence: the replay stops where the receipt's limit stopped it
  // (Sampling.max_sequence), not where a smaller default context would.
  const int64_t reached = receipt->prompt_tokens_size() + receipt->output_tokens_size();
  if (absl::GetFlag(FLAGS_context) == 0 && reached > SessionOptions::kDefaultContextLength) {
    absl::SetFlag(&FLAGS_context, static_cast<int32_t>(reached));
  }
  return RunWithModel([&] {
    api::Session session(SessionOptionsFromFlags());
    const api::Session::ReceiptCheck check = session.VerifyReceipt(bytes);
    std::cout << OutcomeName(check.outcome);
    if (check.reproduced()) {
      std::cout << ": " << receipt->output_tokens_size() << " tokens"
                << (receipt->logprobs().empty() ? "" : " and their logprob bits") << " of model "
                << receipt->model().sha256().substr(0, 16) << "… on " << receipt->schedule().backend() << "\n";
      return 0;
    }
    if (check.first_difference >= 0) std::cout << " at output position " << check.first_difference;
    std::cout << ": " << check.detail << "\n";
    return 1;
  });
}

}  // namespace llm42::cli
