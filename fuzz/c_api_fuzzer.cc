// Arbitrary bytes as a program against the C ABI on stories260K (../shared; LLM42_SHARED_DIR
// overrides): each byte picks an operation — option setters with values from the next bytes
// (NaN, infinities and negatives included), submits, zero-timeout and short reads into small
// buffers, cancels, destroys of unread requests, stats, tokenize/detokenize of arbitrary ids,
// parents and receipts. Whatever the sequence, every call returns a status (never crashes,
// leaks or trips a sanitizer), and the input ends with every handle destroyed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llm42/llm42.h"

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  uint8_t u8() { return p_ == end_ ? 0 : *p_++; }
  int32_t i32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | u8();
    return static_cast<int32_t>(v);
  }
  float f32() {
    // Mostly ordinary values, sometimes the raw bits (NaN, infinities, denormals).
    const uint8_t kind = u8();
    if (kind < 200) return static_cast<float>(kind) / 100.0f;
    const int32_t bits = i32();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  std::string text(size_t max) {
    const size_t n = u8() % (max + 1);
    std::string s;
    for (size_t i = 0; i < n && !empty(); ++i) s.push_back(static_cast<char>(u8()));
    return s;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

llm42_session* Session() {
  static llm42_session* session = [] {
    const char* env = std::getenv("LLM42_SHARED_DIR");
    const std::string model = std::string(env != nullptr ? env : LLM42_SHARED_DIR) + "/models/stories260K.gguf";
    llm42_set_log_level(LLM42_LOG_ERROR);
    llm42_session_options* so = nullptr;
    llm42_determinism* d = nullptr;
    llm42_session* s = nullptr;
    if (llm42_session_options_create(&so) != LLM42_OK || llm42_determinism_create(LLM42_MODE_SELECTIVE, &d) != LLM42_OK ||
        llm42_session_options_set_model_path(so, model.c_str()) != LLM42_OK ||
        llm42_determinism_set_window(d, 4) != LLM42_OK || llm42_session_options_set_determinism(so, d) != LLM42_OK ||
        llm42_session_options_set_threads(so, 1) != LLM42_OK ||
        llm42_session_options_set_kv_cache_tokens(so, 256) != LLM42_OK ||  // small: preemption
        llm42_session_create(so, &s) != LLM42_OK) {
      std::abort();  // the fuzzer needs its model
    }
    llm42_determinism_destroy(d);
    llm42_session_options_destroy(so);
    return s;
  }();
  return session;
}

void OnTokens(void* user, llm42_request*, const int32_t*, size_t n, const char*, size_t, int32_t) {
  *static_cast<size_t*>(user) += n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llm42_session* s = Session();
  Bytes in(data, size);
  llm42_request_options* ro = nullptr;
  if (llm42_request_options_create(&ro) != LLM42_OK) std::abort();
  llm42_request_options_set_prompt(ro, "Once", 4);
  llm42_request_options_set_max_tokens(ro, 4);
  std::vector<llm42_request*> requests;
  size_t delivered = 0;
  char text[7];
  int32_t ids[5];
  float values[5];
  size_t n = 0;
  int64_t v = 0;
  for (int ops = 0; ops < 64 && !in.empty(); ++ops) {
    llm42_request* r = requests.empty() ? nullptr : requests[in.u8() % requests.size()];
    switch (in.u8() % 24) {
      case 0: llm42_request_options_set_prompt(ro, nullptr, 0); break;
      case 1: {
        const std::string t = in.text(24);
        llm42_request_options_set_prompt(ro, t.data(), t.size());
        break;
      }
      case 2: {
        std::vector<int32_t> toks(in.u8() % 6);
        for (int32_t& t : toks) t = in.u8() % 2 == 0 ? in.u8() : in.i32();
        llm42_request_options_set_prompt_tokens(ro, toks.data(), toks.size());
        break;
      }
      case 3: llm42_request_options_set_max_tokens(ro, in.u8() % 2 == 0 ? in.u8() % 12 : in.i32()); break;
      case 4: llm42_request_options_set_temperature(ro, in.f32()); break;
      case 5: llm42_request_options_set_top_k(ro, in.i32()); break;
      case 6: llm42_request_options_set_top_p(ro, in.f32()); break;
      case 7: llm42_request_options_set_min_p(ro, in.f32()); break;
      case 8: llm42_request_options_set_deterministic(ro, in.u8() & 1); break;
      case 9: llm42_request_options_add_stop(ro, in.text(4).c_str()); break;
      case 10: llm42_request_options_set_logprobs(ro, in.u8() & 1); break;
      case 11: llm42_request_options_set_top_logprobs(ro, in.u8() % 24 - 2); break;
      case 12: llm42_request_options_set_callback(ro, in.u8() % 2 == 0 ? OnTokens : nullptr, &delivered); break;
      case 13: llm42_request_options_set_parent(ro, r); break;
      case 14: {
        llm42_request* out = nullptr;
        if (requests.size() < 6 && llm42_request_submit(s, ro, &out) == LLM42_OK) requests.push_back(out);
        break;
      }
      case 15: if (r != nullptr) llm42_request_read_text(r, text, in.u8() % sizeof text, &n, in.u8() % 3); break;
      case 16: if (r != nullptr) llm42_request_read_tokens(r, ids, in.u8() % 5, &n, 0); break;
      case 17: if (r != nullptr) llm42_request_cancel(r); break;
      case 18:
        if (r != nullptr) {
          llm42_request_destroy(r);
          requests.erase(std::find(requests.begin(), requests.end(), r));
        }
        break;
      case 19: if (r != nullptr) llm42_request_wait(r, in.u8() % 50); break;
      case 20:
        if (r != nullptr) {
          llm42_request_stat(r, static_cast<llm42_stat>(in.u8() % 16), &v);
          llm42_request_logprobs(r, values, in.u8() % 5, &n);
          llm42_request_top_logprobs(r, ids, values, in.u8() % 5, &n);
          llm42_request_output_text(r, text, in.u8() % sizeof text, &n);
        }
        break;
      case 21: llm42_session_stat(s, static_cast<llm42_stat>(in.u8() % 16), &v); break;
      case 22: {
        int32_t any[3] = {in.i32(), in.u8(), in.u8()};
        llm42_session_detokenize(s, any, in.u8() % 4, text, in.u8() % sizeof text, &n);
        const std::string t = in.text(16);
        llm42_session_tokenize(s, t.c_str(), t.size(), in.u8() & 1, ids, in.u8() % 5, &n);
        break;
      }
      case 23:
        if (r != nullptr && llm42_request_wait(r, 2000) == LLM42_OK) {
          size_t bytes = 0;
          if (llm42_request_receipt(r, nullptr, 0, &bytes) == LLM42_OUT_OF_RANGE) {
            std::vector<uint8_t> receipt(bytes);
            if (llm42_request_receipt(r, receipt.data(), receipt.size(), &bytes) == LLM42_OK) {
              receipt[in.u8() % receipt.size()] ^= in.u8();
              llm42_receipt_outcome outcome = LLM42_RECEIPT_REPRODUCED;
              int64_t at = 0;
              char detail[16];  // smaller than most lines: the cut is exercised too
              size_t detail_len = 0;
              llm42_session_verify_receipt(s, receipt.data(), receipt.size(), &outcome, &at, detail, sizeof detail,
                                           &detail_len);
            }
          }
        }
        break;
    }
  }
  for (llm42_request* r : requests) llm42_request_destroy(r);
  llm42_request_options_destroy(ro);
  return 0;
}
