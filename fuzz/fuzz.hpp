#pragma once
// Shared by the fuzz targets (fuzz/<name>.cpp) and the seed generator
// (make_seeds.cpp): the finding macro, a reader for the fuzz input, and the
// event framing of the node targets (switch_program, ps).
//
// Every target defines LLVMFuzzerTestOneInput. It is linked either with
// libFuzzer (clang, `make fuzz`) or with replay_main.cpp (GCC, ctest).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/packet.hpp"

// A finding: an invariant the code under test broke. Prints and aborts, so
// libFuzzer saves the input and the replay driver reports it.
#define FUZZ_CHECK(cond, ...)                                                         \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "FUZZ FINDING at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                              \
      std::fputc('\n', stderr);                                                       \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace ina::fuzz {

// Consumes the input front to back. Reads past the end yield zeros and set
// exhausted(), so a target never reads out of bounds.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool exhausted() const { return end_; }
  size_t remaining() const { return n_ - i_; }
  uint8_t u8() {
    if (i_ >= n_) { end_ = true; return 0; }
    return p_[i_++];
  }
  uint16_t u16() { const uint16_t lo = u8(); return static_cast<uint16_t>(lo | (u8() << 8)); }
  // The next `k` bytes, or an empty span (and exhausted()) if fewer remain.
  std::span<const std::byte> bytes(size_t k) {
    if (k > remaining()) { end_ = true; i_ = n_; return {}; }
    std::span<const std::byte> s(reinterpret_cast<const std::byte*>(p_ + i_), k);
    i_ += k;
    return s;
  }
  // Payload length of the wire packet starting here: the header's count
  // field (bytes 32..33, big endian), so that mutating it keeps the framing.
  size_t next_packet_bytes() const {
    if (remaining() < kHeaderBytes) return kHeaderBytes;
    const size_t count = (size_t{p_[i_ + 32]} << 8) | p_[i_ + 33];
    return kHeaderBytes + 4 * count;
  }

 private:
  const uint8_t* p_;
  size_t n_, i_ = 0;
  bool end_ = false;
};

// Event framing of the node targets. The input is a few configuration bytes
// (target-specific) followed by events; an event is one op byte, kind = op & 3,
// arg = op >> 2 (0..63):
//   kPacket, kBurst  a wire packet follows (36-byte header + 4 * count bytes,
//                    count read from the header). kPacket first advances time
//                    by arg * 10 us; kBurst delivers at the same time.
//   kAdvance         time advances by arg * 1 ms (timers due fire on the way).
//   kControl         target-specific (switch: remove or re-add job 1 + arg % 3;
//                    PS: a stale timer with token arg fires now).
enum Kind : uint8_t { kPacket = 0, kAdvance = 1, kControl = 2, kBurst = 3 };
inline uint8_t op(Kind k, unsigned arg = 0) { return static_cast<uint8_t>(k | ((arg & 63) << 2)); }

// Builds inputs in that framing (seed generator).
class Writer {
 public:
  void byte(uint8_t b) { out_.push_back(b); }
  void packet(const Header& h, std::span<const int32_t> payload, Kind k = kPacket, unsigned arg = 0) {
    byte(op(k, arg));
    std::vector<std::byte> buf(encoded_size(h));
    encode(h, payload, buf);
    for (std::byte b : buf) out_.push_back(static_cast<uint8_t>(b));
  }
  void event(Kind k, unsigned arg) { byte(op(k, arg)); }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

}  // namespace ina::fuzz
