#include "lib/util/sha256.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace llm42 {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

inline uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The standard's compression function, block by block.
void BlocksPortable(uint32_t* state, const uint8_t* p, size_t n_blocks) {
  for (; n_blocks > 0; --n_blocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) w[i] = BigEndian32(p + 4 * i);
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
             h = state[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d;
    state[4] += e, state[5] += f, state[6] += g, state[7] += h;
  }
}

#if defined(__x86_64__)
bool CpuHasShaNi() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool sha = (b & (1u << 29)) != 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return sha && (c & bit_SSE4_1) != 0 && (c & bit_SSSE3) != 0;
}

// The same compression on the SHA extensions. They keep the working variables as two vectors,
// (a, b, e, f) and (c, d, g, h) from the high lane down; sha256rnds2 runs two rounds on the low
// two words of a message-plus-constant vector, and msg1 / msg2 compute the message schedule four
// words at a time: W[i..i+3] = msg2(msg1(W[i-16..], W[i-12..]) + W[i-7..i-4], W[i-4..i-1]).
__attribute__((target("sha,sse4.1,ssse3"))) void BlocksShaNi(uint32_t* state, const uint8_t* p, size_t n_blocks) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  const __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));      // lanes a b c d
  const __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));  // lanes e f g h
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);  // lanes b a d c
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);  // lanes h g f e
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);       // lanes f e b a
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);    // lanes h g d c
  for (; n_blocks > 0; --n_blocks, p += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {
      __m128i& cur = w[g % 4];
      if (g < 4) {
        cur = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), byte_swap);
      } else {
        const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]),
                                        _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        cur = _mm_sha256msg2_epu32(t, w[(g + 3) % 4]);
      }
      __m128i msg = _mm_add_epi32(cur, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, msg);
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);  // lanes a b e f
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);  // lanes g h c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));    // a b c d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));  // e f g h
}
#else
bool CpuHasShaNi() { return false; }
#endif

}  // namespace

Sha256Hasher::Sha256Hasher() : use_sha_ni_(CpuHasShaNi()) { std::memcpy(state_, kInitial, sizeof state_); }

Sha256Hasher Sha256Hasher::Portable() {
  Sha256Hasher h;
  h.use_sha_ni_ = false;
  return h;
}

void Sha256Hasher::Blocks(const uint8_t* p, size_t n_blocks) {
#if defined(__x86_64__)
  if (use_sha_ni_) return BlocksShaNi(state_, p, n_blocks);
#endif
  BlocksPortable(state_, p, n_blocks);
}

void Sha256Hasher::Update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_ > 0) {
    const size_t take = std::min(n, 64 - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < 64) return;
    Blocks(buffer_, 1);
    buffered_ = 0;
  }
  Blocks(p, n / 64);
  p += n / 64 * 64;
  buffered_ = n % 64;
  if (buffered_ > 0) std::memcpy(buffer_, p, buffered_);
}

std::string Sha256Hasher::Final() {
  // A 1 bit, zeros to 56 bytes mod 64, then the message length in bits, big-endian.
  const uint64_t bits = total_ * 8;
  uint8_t pad[72] = {0x80};
  const size_t pad_len = (buffered_ < 56 ? 56 : 120) - buffered_;
  for (int i = 0; i < 8; ++i) pad[pad_len + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  Update(pad, pad_len + 8);
  std::string digest(32, '\0');
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) digest[static_cast<size_t>(4 * i + j)] = static_cast<char>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

std::string Sha256(const void* data, size_t n) {
  Sha256Hasher h;
  h.Update(data, n);
  return h.Final();
}

}  // namespace llm42
