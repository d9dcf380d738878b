#ifndef LLM42_UTIL_SHA256_H_
#define LLM42_UTIL_SHA256_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace llm42 {

// SHA-256 (FIPS 180-4), our own so that libllm42 needs no libcrypto: model fingerprints and
// receipt digests are its only hashes, and a self-contained library (one that loads beside any
// other OpenSSL a host links) must not pull one in for them. Where the CPU has the SHA extensions
// the compression runs on them (a model fingerprint reads every weight byte: about 1.5 GB/s per
// core there, against about a fifth of that in portable code); elsewhere the portable rounds.
// Both give the standard's digest, checked against its published examples and OpenSSL's in
// tests/sha256_test.cc.
class Sha256Hasher {
 public:
  Sha256Hasher();
  void Update(const void* data, size_t n);
  // The 32-byte digest; the hasher is then spent.
  std::string Final();

  // Portable rounds only, whatever the CPU (tests).
  static Sha256Hasher Portable();

 private:
  void Blocks(const uint8_t* p, size_t n_blocks);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
  bool use_sha_ni_;
};

// SHA-256 of `n` bytes, as 32 raw bytes.
std::string Sha256(const void* data, size_t n);

}  // namespace llm42

#endif  // LLM42_UTIL_SHA256_H_
