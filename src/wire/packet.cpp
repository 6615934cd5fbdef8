#include "wire/packet.hpp"
#include "wire/patch.hpp"

#include <stdexcept>
#include <bit>
#include <cstring>

#include <fmt/format.h>

namespace ina {

PacketPool::PacketPool(uint16_t payload_capacity, size_t slab_packets)
    : capacity_(payload_capacity), slab_packets_(slab_packets) {
  stride_ = sizeof(Packet) + sizeof(int32_t) * payload_capacity;
  stride_ = (stride_ + alignof(Packet) - 1) / alignof(Packet) * alignof(Packet);
}

void PacketPool::grow() {
  const size_t bytes = stride_ * slab_packets_;
  std::unique_ptr<std::byte[], SlabFree> slab(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
  std::memset(slab.get(), 0, bytes);  // (a packet's values start as zeros)
  for (size_t i = slab_packets_; i-- > 0;) {
    auto* p = new (slab.get() + i * stride_) Packet{};
    set_next(p, free_);
    free_ = p;
  }
  total_ += slab_packets_;
  free_n_ += slab_packets_;
  slabs_.push_back(std::move(slab));
}

void PacketPool::give_free(PacketPool& to, size_t n) {
  if (to.capacity_ != capacity_) throw std::invalid_argument("give_free: pools of different capacities");
  while (n-- > 0 && free_) {
    Packet* p = free_;
    free_ = next_of(p);
    --free_n_;
    set_next(p, to.free_);
    to.free_ = p;
    ++to.free_n_;
  }
}

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::None: return "ok";
    case DecodeError::Truncated: return "truncated header";
    case DecodeError::BadVersion: return "unsupported wire version";
    case DecodeError::BadType: return "unknown packet type";
    case DecodeError::BadFlags: return "unknown flag bits";
    case DecodeError::BadWorkerCount: return "worker count out of range (1..64; ring packets 1..255)";
    case DecodeError::BadRank: return "rank not below worker count";
    case DecodeError::BadBitmap: return "bitmap has bits beyond worker count";
    case DecodeError::PayloadLength: return "payload length does not match count";
    case DecodeError::PayloadTooLarge: return "payload larger than receive buffer";
  }
  return "?";
}

namespace {

template <typename T>
T bswap(T v) {
  if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(v));
  else if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(v));
  else return static_cast<T>(__builtin_bswap64(v));
}

template <typename T>
void put_be(std::byte*& p, T v) {
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) v = bswap(v);
  std::memcpy(p, &v, sizeof(T));
  p += sizeof(T);
}

template <typename T>
T get_be(const std::byte*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) v = bswap(v);
  return v;
}

// The payload's n words, big-endian. The byte swap was ~40 % of the switch
// thread's time with 32 KB packets (`ina bench switch`) as a
// scalar loop: baseline x86-64 (SSE2) has no byte shuffle, so the loops are
// also built for SSSE3 and AVX2 (pshufb / vpshufb), chosen at load time by
// the CPU (GCC's target_clones, an ifunc). Same bytes either way.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)  // (core/simd_clones.hpp)
#define INA_WORD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "ssse3", "default")))
#else
#define INA_WORD_CLONES
#endif
}  // namespace

INA_WORD_CLONES void copy_values(int32_t* __restrict out, const int32_t* __restrict in, size_t n) {
  if (n == 64) std::memcpy(out, in, 64 * sizeof(int32_t));
  else std::memcpy(out, in, n * sizeof(int32_t));
}

namespace {

INA_WORD_CLONES void put_words(std::byte* out, const int32_t* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = static_cast<uint32_t>(in[i]);
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    std::memcpy(out + 4 * i, &v, 4);
  }
}

INA_WORD_CLONES void get_words(int32_t* out, const std::byte* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, in + 4 * i, 4);
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    out[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

size_t encode(const Header& h, std::span<const int32_t> payload, std::span<std::byte> out) {
  const size_t need = kHeaderBytes + 4u * h.count;
  if (out.size() < need || payload.size() < h.count) return 0;
  if (h.bitmap.hi()) return 0;  // ranks >= 64: the wire's bitmap is 64 bits (kMaxWireWorkers)
  std::byte* p = out.data();
  put_be<uint8_t>(p, h.version);
  put_be<uint8_t>(p, static_cast<uint8_t>(h.type));
  put_be<uint16_t>(p, h.flags);
  put_be<uint16_t>(p, h.job);
  put_be<uint16_t>(p, h.src);
  put_be<uint16_t>(p, h.dst);
  put_be<uint8_t>(p, h.rank);
  put_be<uint8_t>(p, h.nworkers);
  put_be<uint32_t>(p, h.psn);
  put_be<uint64_t>(p, h.bitmap.lo());
  put_be<uint32_t>(p, h.priority);
  put_be<uint32_t>(p, h.agg_index);
  put_be<uint16_t>(p, h.count);
  put_be<uint16_t>(p, h.reserved);
  put_words(p, payload.data(), h.count);
  return need;
}

size_t encode(const Packet& pk, std::span<std::byte> out) { return encode(pk.h, pk.values(), out); }

void set_wire_dst(std::byte* datagram, NodeId dst) {
  std::byte* p = datagram + 8;  // after version, type, flags, job and src (encode's order)
  put_be<uint16_t>(p, dst);
}

uint16_t wire_flags(const std::byte* datagram) {
  const std::byte* p = datagram + 2;  // after version and type
  return get_be<uint16_t>(p);
}

void set_wire_flags(std::byte* datagram, uint16_t flags) {
  std::byte* p = datagram + 2;
  put_be<uint16_t>(p, flags);
}

uint16_t wire_job(const std::byte* datagram) {
  const std::byte* p = datagram + 4;  // after version, type and flags
  return get_be<uint16_t>(p);
}

DecodeError decode(std::span<const std::byte> in, Header& h, std::span<int32_t> payload_out) {
  if (in.size() < kHeaderBytes) return DecodeError::Truncated;
  const std::byte* p = in.data();
  Header x;
  x.version = get_be<uint8_t>(p);
  const uint8_t type = get_be<uint8_t>(p);
  x.flags = get_be<uint16_t>(p);
  x.job = get_be<uint16_t>(p);
  x.src = get_be<uint16_t>(p);
  x.dst = get_be<uint16_t>(p);
  x.rank = get_be<uint8_t>(p);
  x.nworkers = get_be<uint8_t>(p);
  x.psn = get_be<uint32_t>(p);
  x.bitmap = get_be<uint64_t>(p);
  x.priority = get_be<uint32_t>(p);
  x.agg_index = get_be<uint32_t>(p);
  x.count = get_be<uint16_t>(p);
  x.reserved = get_be<uint16_t>(p);
  if (x.version != kWireVersion) return DecodeError::BadVersion;
  if (type == 0 || type > kMaxPktType) return DecodeError::BadType;
  x.type = static_cast<PktType>(type);
  if (x.flags & ~flag::kAll) return DecodeError::BadFlags;
  if (x.nworkers == 0 || (x.nworkers > kMaxWireWorkers && !is_ring(x.type))) return DecodeError::BadWorkerCount;
  if (x.rank >= x.nworkers) return DecodeError::BadRank;
  if (x.bitmap & ~full_bitmap(x.nworkers)) return DecodeError::BadBitmap;
  if (in.size() != kHeaderBytes + 4u * x.count) return DecodeError::PayloadLength;
  if (x.count > payload_out.size()) return DecodeError::PayloadTooLarge;
  get_words(payload_out.data(), p, x.count);
  h = x;
  return DecodeError::None;
}

DecodeError decode(std::span<const std::byte> in, Packet& pk, const PacketPool& pool) {
  return decode(in, pk.h, std::span<int32_t>(pk.payload(), pool.capacity()));
}

std::string describe(const Header& h) {
  return fmt::format("type={} job={} psn={} rank={}/{} bitmap={} flags={:#x} prio={} agg={} count={} {}->{}",
                     static_cast<int>(h.type), h.job, h.psn, h.rank, h.nworkers,
                     h.bitmap.hi() ? fmt::format("{:#x}{:016x}", h.bitmap.hi(), h.bitmap.lo())
                                   : fmt::format("{:#x}", h.bitmap.lo()),
                     h.flags,
                     h.priority, h.agg_index, h.count, h.src, h.dst);
}

}  // namespace ina
