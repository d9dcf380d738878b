// Arbitrary bytes as a reproducibility receipt (binary or text form).
#include <cstdint>
#include <string_view>

#include "lib/engine/receipt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto receipt = llm42::ParseReceipt(std::string_view(reinterpret_cast<const char*>(data), size));
  if (receipt.ok()) {
    (void)llm42::ReceiptText(*receipt);
    (void)llm42::ReplayOptions(*receipt);
  }
  return 0;
}
