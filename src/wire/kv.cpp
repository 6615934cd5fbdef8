#include "wire/kv.hpp"

namespace ina::kv {

const char* to_string(Error e) {
  switch (e) {
    case Error::None: return "ok";
    case Error::NoHeader: return "KV payload shorter than its 2-word header";
    case Error::BadVersion: return "unknown KV payload version";
    case Error::TooManyPairs: return "more pairs than the limit per packet";
    case Error::Length: return "payload length does not match the pair count";
    case Error::Unsorted: return "keys not strictly ascending (unsorted or duplicate)";
    case Error::PayloadOnAck: return "a KV ack carries a payload";
  }
  return "?";
}

const char* to_string(HotRoute r) { return r == HotRoute::ViaPs ? "via-ps" : "multicast"; }

std::optional<HotRoute> parse_hot_route(std::string_view s) {
  if (s == "via-ps") return HotRoute::ViaPs;
  if (s == "multicast") return HotRoute::Multicast;
  return std::nullopt;
}

Error check(const Packet& p, unsigned max_pairs) {
  if (p.h.type == PktType::KvAck) return p.h.count == 0 ? Error::None : Error::PayloadOnAck;
  if (p.h.count < kHeaderWords) return Error::NoHeader;
  if (version(p) != kVersion) return Error::BadVersion;
  const unsigned n = pairs(p);
  if (n > max_pairs || n > kMaxPairs) return Error::TooManyPairs;
  if (p.h.count != words(n)) return Error::Length;
  for (unsigned i = 1; i < n; ++i)
    if (key(p, i) <= key(p, i - 1)) return Error::Unsorted;
  return Error::None;
}

unsigned compact(Packet& p, std::span<const bool> keep) {
  const unsigned n = pairs(p);
  unsigned out = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    if (out != i) set(p, out, key(p, i), value(p, i));
    ++out;
  }
  p.payload()[0] = static_cast<int32_t>((static_cast<uint32_t>(p.payload()[0]) & 0xFF00FFFFu) | (out << 16));
  p.h.count = static_cast<uint16_t>(words(out));
  return out;
}

}  // namespace ina::kv
