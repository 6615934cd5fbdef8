#pragma once
// SipHash-2-4 with a 64-bit output (Aumasson and Bernstein, "SipHash: a fast
// short-input PRF", INDOCRYPT 2012), written from the paper's specification:
//
//   k0, k1 = the 16-byte key as two little-endian 64-bit words
//   v0 = k0 ^ "somepseu", v1 = k1 ^ "dorandom", v2 = k0 ^ "lygenera", v3 = k1 ^ "tedbytes"
//   each 8-byte little-endian word m of the message:  v3 ^= m; 2 SipRounds; v0 ^= m
//   the last word: the 0..7 remaining bytes, and (length mod 256) in its top byte
//   finalization: v2 ^= 0xff; 4 SipRounds; output v0 ^ v1 ^ v2 ^ v3
//
// Incremental: update() takes the message in pieces of any length, and a
// state can be copied to finish several messages that share a prefix (the
// runtime's multicast copies share their payload, datagram_tag.hpp).
// tests/runtime/test_datagram_auth.cpp checks the authors' 64 reference vectors.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ina {

class SipHash24 {
 public:
  SipHash24(uint64_t k0, uint64_t k1)
      : v0_(k0 ^ 0x736f6d6570736575ULL), v1_(k1 ^ 0x646f72616e646f6dULL),
        v2_(k0 ^ 0x6c7967656e657261ULL), v3_(k1 ^ 0x7465646279746573ULL) {}
  // The key as 16 bytes (k0 from bytes 0..7, k1 from 8..15, little-endian).
  explicit SipHash24(const uint8_t key[16]) : SipHash24(load(key), load(key + 8)) {}

  void update(const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    if (ntail_) {  // complete the pending word first
      while (n && ntail_ < 8) {
        tail_ |= uint64_t{*p++} << (8 * ntail_++);
        --n;
      }
      if (ntail_ < 8) return;
      compress(tail_);
      tail_ = 0;
      ntail_ = 0;
    }
    for (; n >= 8; n -= 8, p += 8) compress(load(p));
    while (n--) tail_ |= uint64_t{*p++} << (8 * ntail_++);
  }

  // The tag of everything given so far (the state is left as it is).
  uint64_t final() const {
    SipHash24 s = *this;
    s.compress(s.tail_ | (s.total_ & 0xff) << 56);
    s.v2_ ^= 0xff;
    for (int i = 0; i < 4; ++i) s.round();
    return s.v0_ ^ s.v1_ ^ s.v2_ ^ s.v3_;
  }

  static uint64_t hash(const uint8_t key[16], const void* data, size_t n) {
    SipHash24 s(key);
    s.update(data, n);
    return s.final();
  }

 private:
  static uint64_t load(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
  }
  void round() {
    v0_ += v1_; v1_ = std::rotl(v1_, 13); v1_ ^= v0_; v0_ = std::rotl(v0_, 32);
    v2_ += v3_; v3_ = std::rotl(v3_, 16); v3_ ^= v2_;
    v0_ += v3_; v3_ = std::rotl(v3_, 21); v3_ ^= v0_;
    v2_ += v1_; v1_ = std::rotl(v1_, 17); v1_ ^= v2_; v2_ = std::rotl(v2_, 32);
  }
  void compress(uint64_t m) {
    v3_ ^= m;
    round();
    round();
    v0_ ^= m;
  }

  uint64_t v0_, v1_, v2_, v3_;
  uint64_t tail_ = 0;   // bytes of the word not yet complete, little-endian
  unsigned ntail_ = 0;
  uint64_t total_ = 0;  // message length so far
};

}  // namespace ina
