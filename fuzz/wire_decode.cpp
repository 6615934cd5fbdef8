// Fuzz target: the wire decoder (src/wire/packet.cpp).
// Input: one datagram. Findings: a crash or sanitizer report in decode, or a
// decoded packet whose re-encoding is not the very same bytes (the format
// has no slack: every header field is kept and the length must match), or a
// round trip through a Packet that changes the header or payload.
#include <cstring>
#include <vector>

#include "fuzz.hpp"

using namespace ina;

namespace {

bool same(const Header& a, const Header& b) {
  return a.version == b.version && a.type == b.type && a.flags == b.flags && a.job == b.job && a.src == b.src &&
         a.dst == b.dst && a.rank == b.rank && a.nworkers == b.nworkers && a.psn == b.psn && a.bitmap == b.bitmap &&
         a.priority == b.priority && a.agg_index == b.agg_index && a.count == b.count && a.reserved == b.reserved;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);

  // Into a span as large as any count (65535 values): only the header decides.
  Header h;
  static std::vector<int32_t> payload(0xFFFF);
  const DecodeError err = decode(in, h, payload);
  FUZZ_CHECK(to_string(err) != nullptr, "no name for DecodeError %d", static_cast<int>(err));
  if (err != DecodeError::None) return 0;

  FUZZ_CHECK(h.version == kWireVersion, "accepted version %u", h.version);
  FUZZ_CHECK(static_cast<uint8_t>(h.type) >= 1 && static_cast<uint8_t>(h.type) <= kMaxPktType, "accepted type %u",
             static_cast<unsigned>(h.type));
  FUZZ_CHECK((h.flags & ~flag::kAll) == 0, "accepted flags %#x", h.flags);
  // Ring packets may name up to 255 workers (kMaxRingWorkers), the others 64.
  FUZZ_CHECK(h.nworkers >= 1 && (h.nworkers <= kMaxWireWorkers || is_ring(h.type)) && h.rank < h.nworkers,
             "accepted rank %u/%u", h.rank, h.nworkers);
  FUZZ_CHECK((h.bitmap & ~full_bitmap(h.nworkers)) == 0, "accepted bitmap %#llx for %u workers",
             static_cast<unsigned long long>(h.bitmap.lo()), h.nworkers);
  FUZZ_CHECK(encoded_size(h) == size, "decoded %zu bytes, encoded_size says %zu", size, encoded_size(h));

  // encode(decode(x)) == x, byte for byte.
  std::vector<std::byte> out(encoded_size(h));
  FUZZ_CHECK(encode(h, std::span<const int32_t>(payload.data(), h.count), out) == size, "encode size");
  FUZZ_CHECK(std::memcmp(out.data(), data, size) == 0, "re-encoding differs from the input: %s", describe(h).c_str());
  // A buffer one byte short is refused.
  if (size > 0) {
    std::vector<std::byte> small(size - 1);
    FUZZ_CHECK(encode(h, std::span<const int32_t>(payload.data(), h.count), small) == 0, "encode into short buffer");
  }

  // The Packet overloads, with a pool of exactly the needed capacity and one
  // value short of it (which must be PayloadTooLarge, not an overrun).
  PacketPool exact(h.count, 1);
  Packet* p = exact.get();
  FUZZ_CHECK(decode(in, *p, exact) == DecodeError::None, "Packet decode failed with capacity == count");
  FUZZ_CHECK(same(p->h, h), "Packet decode gives another header");
  FUZZ_CHECK(std::memcmp(p->payload(), payload.data(), 4u * h.count) == 0, "Packet decode gives another payload");
  std::vector<std::byte> out2(encoded_size(p->h));
  FUZZ_CHECK(encode(*p, out2) == size && std::memcmp(out2.data(), data, size) == 0, "Packet round trip differs");
  Packet* c = exact.clone(*p);
  FUZZ_CHECK(same(c->h, h) && std::memcmp(c->payload(), p->payload(), 4u * h.count) == 0, "clone differs");
  exact.put(c);
  exact.put(p);
  FUZZ_CHECK(exact.in_use() == 0, "pool in use");
  if (h.count > 0) {
    PacketPool short_pool(static_cast<uint16_t>(h.count - 1), 1);
    Packet* q = short_pool.get();
    FUZZ_CHECK(decode(in, *q, short_pool) == DecodeError::PayloadTooLarge, "count above capacity not refused");
    short_pool.put(q);
  }
  (void)describe(h);
  return 0;
}
