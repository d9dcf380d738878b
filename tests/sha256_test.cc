// lib/util/sha256.h against FIPS 180-2's published examples and OpenSSL's SHA-256, on the SHA
// extensions (where the CPU has them) and on the portable rounds.
#include "lib/util/sha256.h"

#include <openssl/sha.h>

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/model/fingerprint.h"

namespace llm42 {
namespace {

std::string Hex(Sha256Hasher h, const std::string& message) {
  h.Update(message.data(), message.size());
  return HexOf(h.Final());
}

TEST(Sha256, TheStandardsExamples) {
  const std::string million(1000000, 'a');
  for (const Sha256Hasher& h : {Sha256Hasher(), Sha256Hasher::Portable()}) {
    EXPECT_EQ(Hex(h, ""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(Hex(h, "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(Hex(h, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(Hex(h, million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

// Every length across the padding's boundaries, fed whole and in random pieces.
TEST(Sha256, MatchesOpenSslAtEveryLengthAndSplit) {
  std::mt19937 rng(3);
  std::string data(1200, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n = 0; n <= data.size(); n += n < 200 ? 1 : 37) {
    unsigned char ref[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), n, ref);
    const std::string want(reinterpret_cast<const char*>(ref), sizeof ref);
    EXPECT_EQ(Sha256(data.data(), n), want) << n;
    for (Sha256Hasher h : {Sha256Hasher(), Sha256Hasher::Portable()}) {
      size_t at = 0;
      while (at < n) {
        const size_t piece = std::min<size_t>(n - at, rng() % 150);
        h.Update(data.data() + at, piece);
        at += piece;
      }
      EXPECT_EQ(h.Final(), want) << n;
    }
  }
}

}  // namespace
}  // namespace llm42
