#pragma once
// Simulated and real time share one type: signed 64-bit picoseconds.
// A 306 B packet at 100 Gbps serializes in 24.48 ns = 24480 ps.
#include <cstdint>

namespace ina {

using Time = int64_t;  // picoseconds

constexpr Time kPs = 1;
constexpr Time kNs = 1000;
constexpr Time kUs = 1000 * kNs;
constexpr Time kMs = 1000 * kUs;
constexpr Time kSec = 1000 * kMs;
constexpr Time kNever = INT64_MAX;

constexpr double to_us(Time t) { return static_cast<double>(t) / kUs; }
constexpr double to_ms(Time t) { return static_cast<double>(t) / kMs; }

// Picoseconds given as a double, to Time without undefined behaviour: values
// beyond the range of Time saturate (to kNever, or -kNever), NaN is kNever
// (a deadline that never comes). Inputs are validated by their readers
// (scenario fields, command-line flags); this is the last line of defence.
constexpr Time saturate_ps(double ps) {
  if (!(ps == ps)) return kNever;  // NaN
  if (ps >= 9.2e18) return kNever;
  if (ps <= -9.2e18) return -kNever;
  return static_cast<Time>(ps);
}
constexpr Time from_us(double us) { return saturate_ps(us * kUs); }
constexpr Time from_ms(double ms) { return saturate_ps(ms * kMs); }

// Serialization time of `bytes` on a link of `bps` bits per second, rounded
// up (128-bit intermediate: exact for any size). A zero rate, or a time
// beyond the range of Time, is kNever (never a division by zero).
constexpr Time serialization_time(uint64_t bytes, uint64_t bps) {
  if (bps == 0) return bytes == 0 ? 0 : kNever;
  const unsigned __int128 bits_ps = static_cast<unsigned __int128>(bytes) * 8ULL * 1'000'000'000'000ULL;
  const unsigned __int128 t = (bits_ps + bps - 1) / bps;
  return t >= static_cast<unsigned __int128>(kNever) ? kNever : static_cast<Time>(t);
}

}  // namespace ina
