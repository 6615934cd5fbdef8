#pragma once
// The sparse <key, value> payload (Zebra, PS-lite-style push),
// carried by KvData / KvResult packets after the common 36-byte header.
//
// Payload (int32 words, big-endian on the wire like every payload):
//   word 0   version (8 bits) | pairs (8 bits) | hot-set version (16 bits)
//   word 1   total: on the last packet of a stream (flag kLast), the number
//            of packets in that stream; 0 otherwise
//   then `pairs` x 3 words: key high 32 bits, key low 32 bits, value
// Keys are strictly ascending within a packet (PS-lite requires unique,
// sorted keys per push; Zebra's switch results carry rank indices, also
// ascending). A KvAck has no payload.
//
// Header use: `priority` = the iteration, `psn` = the packet's index in its
// stream; streams whose aggregator is the PS have bit 31 set (kPsStream),
// so the PS tells a worker's direct packets from those the switch forwards.
// A KvAck of a PS stream (host::SparseConfig::ack_every) also carries in
// `agg_index` the cumulative count: every packet of the stream below it has
// arrived (TCP's cumulative acknowledgement).
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "wire/packet.hpp"

namespace ina::kv {

constexpr uint8_t kVersion = 1;
constexpr unsigned kHeaderWords = 2;
constexpr unsigned kPairWords = 3;
// The codec's bound: a 1500-byte frame (36 B header, 8 B KV header, 120 x
// 12 B; with Ethernet/IP/UDP framing the simulator's 50 B: 1498 B). A
// deployment's limit is lower for the switch's streams (Zebra: 9 to 11).
constexpr unsigned kMaxPairs = 120;
constexpr uint32_t kPsStream = 1u << 31;

// Where the switch sends a sparse job's hot results (§III-E: "the switches
// send the aggregated results to the PS which broadcasts the all updated
// parameters back to each worker"):
//   ViaPs      to the PS, which acknowledges them and sends them with its
//              own sums, every key's, to the workers (the paper's);
//   Multicast  to the workers directly, who acknowledge them, beside the
//              PS's cold sums (a variant: one hop less, the PS never sees them).
enum class HotRoute : uint8_t { ViaPs, Multicast };
const char* to_string(HotRoute r);  // "via-ps", "multicast"
std::optional<HotRoute> parse_hot_route(std::string_view s);

constexpr unsigned words(unsigned pairs) { return kHeaderWords + kPairWords * pairs; }

inline unsigned pairs(const Packet& p) { return (static_cast<uint32_t>(p.payload()[0]) >> 16) & 0xFF; }
inline uint8_t version(const Packet& p) { return static_cast<uint8_t>(static_cast<uint32_t>(p.payload()[0]) >> 24); }
inline uint16_t hot_version(const Packet& p) { return static_cast<uint16_t>(static_cast<uint32_t>(p.payload()[0]) & 0xFFFF); }
inline uint32_t total(const Packet& p) { return static_cast<uint32_t>(p.payload()[1]); }
inline uint64_t key(const Packet& p, unsigned i) {
  const int32_t* w = p.payload() + kHeaderWords + kPairWords * i;
  return (static_cast<uint64_t>(static_cast<uint32_t>(w[0])) << 32) | static_cast<uint32_t>(w[1]);
}
inline int32_t value(const Packet& p, unsigned i) { return p.payload()[kHeaderWords + kPairWords * i + 2]; }

// Starts a KV payload of `n` pairs (filled with set()); the caller checks capacity.
inline void init(Packet& p, unsigned n, uint16_t hot_ver, uint32_t stream_total = 0) {
  p.payload()[0] = static_cast<int32_t>((uint32_t{kVersion} << 24) | (n << 16) | hot_ver);
  p.payload()[1] = static_cast<int32_t>(stream_total);
  p.h.count = static_cast<uint16_t>(words(n));
}
inline void set(Packet& p, unsigned i, uint64_t k, int32_t v) {
  int32_t* w = p.payload() + kHeaderWords + kPairWords * i;
  w[0] = static_cast<int32_t>(static_cast<uint32_t>(k >> 32));
  w[1] = static_cast<int32_t>(static_cast<uint32_t>(k));
  w[2] = v;
}
inline void set_value(Packet& p, unsigned i, int32_t v) { p.payload()[kHeaderWords + kPairWords * i + 2] = v; }
// Keeps the pairs whose `keep[i]` is true, in order; returns how many are left.
unsigned compact(Packet& p, std::span<const bool> keep);

enum class Error : uint8_t { None = 0, NoHeader, BadVersion, TooManyPairs, Length, Unsorted, PayloadOnAck };
const char* to_string(Error e);
// Validates a KV packet's payload against the header and the limit of pairs
// per packet: version, pairs <= max_pairs, count = words(pairs), keys strictly
// ascending; a KvAck must have no payload.
Error check(const Packet& p, unsigned max_pairs);

}  // namespace ina::kv
