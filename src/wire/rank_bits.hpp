#pragma once
// A set of worker ranks, bit r = rank r, for up to kRankBits ranks: the
// worker bitmap of a packet header, a switch aggregator and a PS entry, and
// the engine's multicast member set. Two 64-bit words: the simulator runs
// jobs of up to 128 workers (the Rina paper's dragonfly 4,9,2 has 72 hosts),
// while the wire format (wire/packet.cpp) carries the low word only, so the
// UDP runtime stays at kMaxWireWorkers = 64 and refuses more.
//
// A plain uint64_t converts implicitly (it is the low word): `bitmap = 0`,
// `bitmap == 0b11`. Build a single rank's bit with bit(r), never `1ULL << r`
// (undefined from r = 64 on).
#include <bit>
#include <cstdint>

namespace ina {

constexpr unsigned kRankBits = 128;

class RankBits {
 public:
  constexpr RankBits() = default;
  constexpr RankBits(uint64_t lo) : w_{lo, 0} {}  // NOLINT: implicit on purpose (the low word)
  constexpr RankBits(uint64_t lo, uint64_t hi) : w_{lo, hi} {}

  // Rank r's bit (none for r >= kRankBits). (This and first() select
  // between words of one shift: no branch on the rank.)
  static constexpr RankBits bit(unsigned r) {
    const uint64_t b = 1ULL << (r & 63);
    return {r < 64 ? b : 0, r - 64 < 64 ? b : 0};
  }
  // Ranks 0..n-1 (n <= kRankBits).
  static constexpr RankBits first(unsigned n) {
    const uint64_t low = (1ULL << (n & 63)) - 1;  // the first n mod 64 bits
    return {n >= 64 ? ~0ULL : low, n >= 128 ? ~0ULL : n > 64 ? low : 0};
  }

  constexpr uint64_t lo() const { return w_[0]; }
  constexpr uint64_t hi() const { return w_[1]; }
  constexpr bool test(unsigned r) const { return r < 64 ? (w_[0] >> r & 1) : r < 128 && (w_[1] >> (r - 64) & 1); }
  constexpr bool any() const { return (w_[0] | w_[1]) != 0; }
  constexpr explicit operator bool() const { return any(); }
  constexpr int count() const { return std::popcount(w_[0]) + std::popcount(w_[1]); }
  // The lowest rank in the set (kRankBits when empty).
  constexpr unsigned lowest() const {
    return w_[0] ? static_cast<unsigned>(std::countr_zero(w_[0]))
                 : 64 + static_cast<unsigned>(std::countr_zero(w_[1]));
  }

  // Friends, so that a uint64_t (the low word) converts on either side.
  friend constexpr RankBits operator|(RankBits a, RankBits b) { return {a.w_[0] | b.w_[0], a.w_[1] | b.w_[1]}; }
  friend constexpr RankBits operator&(RankBits a, RankBits b) { return {a.w_[0] & b.w_[0], a.w_[1] & b.w_[1]}; }
  friend constexpr RankBits operator^(RankBits a, RankBits b) { return {a.w_[0] ^ b.w_[0], a.w_[1] ^ b.w_[1]}; }
  constexpr RankBits operator~() const { return {~w_[0], ~w_[1]}; }
  constexpr RankBits& operator|=(RankBits o) { return *this = *this | o; }
  constexpr RankBits& operator&=(RankBits o) { return *this = *this & o; }
  constexpr RankBits& operator^=(RankBits o) { return *this = *this ^ o; }
  constexpr bool operator==(const RankBits&) const = default;
  constexpr bool operator!() const { return !any(); }

  // Zero bytes are the empty set (core/zero_page_allocator.hpp).
  static constexpr bool kZeroBytesAreDefault = true;

 private:
  uint64_t w_[2] = {0, 0};
};
static_assert(RankBits{}.lo() == 0 && RankBits{}.hi() == 0);

}  // namespace ina
