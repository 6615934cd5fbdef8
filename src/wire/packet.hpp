#pragma once
// The INA wire format (version 1) and the in-memory packet both engines use.
//
// On the wire a packet is a 36-byte header in network byte order followed by
// `count` int32 values (big-endian). In memory a Packet is a header plus an
// inline payload of fixed capacity, handed out by a PacketPool; the simulator
// never serializes, the UDP runtime does (encode/decode below).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "wire/rank_bits.hpp"

namespace ina {

using NodeId = uint16_t;
constexpr NodeId kNoNode = 0xFFFF;
constexpr NodeId kMulticast = 0xFFFE;  // "all workers of header.job", replicated by the switch

constexpr uint8_t kWireVersion = 1;
constexpr size_t kHeaderBytes = 36;
// Workers of one job with a worker bitmap: 128 in the simulator (RankBits);
// on the wire (the UDP runtime) the bitmap is 64 bits, so 64.
constexpr unsigned kMaxWorkers = kRankBits;
constexpr unsigned kMaxWireWorkers = 64;

enum class PktType : uint8_t {
  Data = 1,        // gradient (or partial aggregate) worker -> switch -> PS
  Ack = 2,         // aggregation result, switch/PS -> workers (payload = result)
  Fetch = 3,       // PS -> switch: hand over the aggregator holding (job, psn)
  FetchReply = 4,  // switch -> PS: the aggregator's content (bitmap 0 = not held)
  GradRequest = 5, // PS -> worker: send your gradient (or result) for psn to me
  Reminder = 6,    // worker -> PS: I am stuck on psn, please run the reminder
  RateSync = 7,    // switch -> worker: psn was dropped (collision / capacity): halve the window, resend it (GRID)
  // Ring collectives (host/ring.hpp, dataplane/rina.cpp). `priority` carries
  // the step tag (op << 8 | step code), `psn` the packet's index in the
  // step's shard, `rank` the sender's rank in the job (`nworkers` may be up
  // to 255), `bitmap` a rack-local member bit (Rina), `agg_index` the node a
  // Rina ToR forwards the aggregate or broadcast to.
  RingData = 8,    // a shard packet of one ring step (partial: kPartial; complete values: kResult)
  RingAck = 9,     // receipt of a RingData (tag, psn); kEce echoes a CE mark
  RingPull = 10,   // Rina: agent -> ToR -> rack: start the step with this tag
  RingBarrier = 11,  // step barrier (RingConfig::step_barrier): psn 0 = a rank's report that it finished
                     // the step with this tag (to the job's lowest rank), psn 1 = that rank's release of it; no payload
  // Sparse <key, value> packets (Zebra, PS-lite-style push; wire/kv.hpp has
  // the payload layout). `priority` carries the iteration, `psn` the packet's
  // index in its stream (bit 31 set: a stream whose aggregator is the PS).
  KvData = 12,     // gradient pairs: worker -> switch (hot) or -> PS (cold); switch -> PS (pairs not in its table)
  KvAck = 13,      // receipt of a KvData (or, with kResult, of a KvResult) for (iteration, psn)
  KvResult = 14,   // aggregated pairs: switch (keys = rank indices) or PS (keys) -> workers
};
constexpr uint8_t kMaxPktType = 14;
// The type's name as above ("Data", "RingAck", ...), or "?" for a value no type has.
inline const char* pkt_type_name(PktType t) {
  static constexpr const char* kNames[] = {"?",          "Data",     "Ack",      "Fetch",       "FetchReply",
                                           "GradRequest", "Reminder", "RateSync", "RingData",    "RingAck",
                                           "RingPull",    "RingBarrier", "KvData", "KvAck",      "KvResult"};
  const auto i = static_cast<uint8_t>(t);
  return i <= kMaxPktType ? kNames[i] : "?";
}
constexpr unsigned kMaxRingWorkers = 255;  // ring packets: workers per job (rank is 8 bits)
inline bool is_ring(PktType t) { return t >= PktType::RingData && t <= PktType::RingBarrier; }
inline bool is_kv(PktType t) { return t >= PktType::KvData && t <= PktType::KvResult; }

// Header flag bits.
namespace flag {
constexpr uint16_t kEcn = 1 << 0;        // CE: marked by a congested queue
constexpr uint16_t kEce = 1 << 1;        // ECN echo, carried by an Ack to the workers
constexpr uint16_t kResend = 1 << 2;     // retransmission by the worker
constexpr uint16_t kCollision = 1 << 3;  // forwarded to the PS after an addressing collision
constexpr uint16_t kPartial = 1 << 4;    // payload is a partial aggregate (bitmap may have >1 bit)
constexpr uint16_t kEvicted = 1 << 5;    // partial aggregate evicted by a preemption
constexpr uint16_t kToPs = 1 << 6;       // bypass switch aggregation, deliver to the PS
constexpr uint16_t kResult = 1 << 7;     // payload is the complete aggregation result
constexpr uint16_t kRetired = 1 << 8;    // worker -> PS: that PSN is retired here, so every worker has its result
constexpr uint16_t kLast = 1 << 9;       // KV: the last packet of its stream (the payload's `total` counts the stream)
// P4INC-AOI (dataplane/aoi.cpp): the sender still lacks the result of the
// fragment that used this packet's aggregator (agg_index) before it; the
// switch refuses the packet as an asynchronous error.
constexpr uint16_t kBehind = 1 << 10;
// Ring receiver flow control (host/ring_transfer.cpp): a RingAck with kBusy
// says the receiver refused the packet (its receive buffers hold earlier
// steps still); the sender holds the transfer. kBusy | kResume says the
// receiver has room again: the sender sends what it held and goes on.
constexpr uint16_t kBusy = 1 << 11;
constexpr uint16_t kResume = 1 << 12;
// KV data on a PS stream with delayed acknowledgements
// (host::SparseConfig::ack_every > 1): the sender can send nothing more
// until it is acknowledged, so the receiver acknowledges it at once (the
// role of TCP's PSH and quick ack).
constexpr uint16_t kAckNow = 1 << 13;
// KV: on a worker's last cold packet, its hot stream of that iteration went
// to the switch, whose results reach the PS (kv::HotRoute::ViaPs): the PS
// waits for them before it answers.
constexpr uint16_t kHot = 1 << 14;
constexpr uint16_t kAll = (1 << 15) - 1;
// Wire only, never in kAll: the datagram ends in an 8-byte tag that
// authenticates it (the runtime's optional datagram authentication,
// runtime/datagram_tag.hpp). The runtime engine verifies and strips the tag
// and this bit before decode(), and sets both after encode(), so no node and
// no simulator trace ever sees it; decode() refuses it (BadFlags).
constexpr uint16_t kTagged = 1 << 15;
}  // namespace flag

struct Header {
  uint8_t version = kWireVersion;
  PktType type = PktType::Data;
  uint16_t flags = 0;
  uint16_t job = 0;
  NodeId src = kNoNode;
  NodeId dst = kNoNode;
  uint8_t rank = 0;      // sender rank (0-based) for worker packets
  uint8_t nworkers = 0;  // workers in the job (1..64)
  uint32_t psn = 0;      // packet sequence number within the job's stream
  RankBits bitmap;       // contributing workers, bit r = rank r (the wire carries the low 64)
  uint32_t priority = 0; // DSA preemption priority (Eq. 1, fixed point)
  uint32_t agg_index = 0;// aggregator index (set by the switch; P4INC-AOI: chosen by the worker, the switch uses it)
  uint16_t count = 0;    // number of int32 values in the payload
  uint16_t reserved = 0;

  bool has(uint16_t f) const { return (flags & f) != 0; }
};

inline RankBits full_bitmap(unsigned nworkers) { return RankBits::first(nworkers); }

// In-memory packet: one cache line, the payload right after it with the
// capacity of the pool that allocated it (PacketPool::capacity()). A pool
// whose capacity is a multiple of 16 values starts every packet on a cache
// line: a 64-value payload is four whole lines.
struct Packet {
  Header h;
  // Engine scratch: multicast members this copy still serves (empty =
  // all). In a pool's free list its bytes hold the link to the next free
  // packet (PacketPool), which get() clears.
  RankBits mcast;

  // As a pool hands one out: a default header, no multicast set (the
  // values are left as they are).
  void clear() {
    h = Header{};
    mcast = {};
  }
  int32_t* payload() { return reinterpret_cast<int32_t*>(this + 1); }
  const int32_t* payload() const { return reinterpret_cast<const int32_t*>(this + 1); }
  std::span<int32_t> values() { return {payload(), h.count}; }
  std::span<const int32_t> values() const { return {payload(), h.count}; }
};
static_assert(sizeof(Packet) == 64, "a packet's fields: one cache line");

// out[0, n) = in[0, n): a payload into a packet or an aggregator and back
// (every result copy and every contribution copies one). The common 64
// values are one fixed-size block, in vector registers.
void copy_values(int32_t* __restrict out, const int32_t* __restrict in, size_t n);

// Fixed-capacity packet pool: slabs, a free list, and an in-use count so that
// tests can assert that no packet leaked after a run.
class PacketPool {
 public:
  explicit PacketPool(uint16_t payload_capacity, size_t slab_packets = 4096);
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  // (Inline: every send and every delivery takes or returns one.)
  Packet* get() {
    Packet* p = take();
    p->clear();
    return p;
  }
  void put(Packet* p) {
    set_next(p, free_);
    free_ = p;
    ++free_n_;
    --in_use_;
  }
  // A packet with src's header and its src.h.count values (get() without
  // its default header: src's replaces it).
  Packet* clone(const Packet& src) {
    Packet* p = take();
    p->mcast = {};
    p->h = src.h;
    copy_values(p->payload(), src.payload(), src.h.count);
    return p;
  }

  uint16_t capacity() const { return capacity_; }
  size_t in_use() const { return in_use_; }
  size_t allocated() const { return total_; }
  size_t free_count() const { return free_n_; }
  // Moves `n` free packets (at most all) to `to`'s free list (pools of one
  // capacity). A packet may be freed into another pool of the same capacity
  // than the one it came from; in_use() counts gets minus puts, so only a
  // sum over the pools that share packets is meaningful.
  void give_free(PacketPool& to, size_t n);

 private:
  void grow();
  // The free list's link, kept in a free packet's mcast bytes.
  static Packet* next_of(const Packet* p) {
    Packet* n;
    std::memcpy(&n, reinterpret_cast<const std::byte*>(&p->mcast), sizeof n);
    return n;
  }
  static void set_next(Packet* p, Packet* n) { std::memcpy(reinterpret_cast<std::byte*>(&p->mcast), &n, sizeof n); }
  // A free packet off the list, as it was freed but for its mcast bytes
  // (the list's link: the caller clears them).
  Packet* take() {
    if (!free_) grow();
    Packet* p = free_;
    free_ = next_of(p);
    --free_n_;
    ++in_use_;
    return p;
  }
  uint16_t capacity_;
  size_t stride_;
  size_t slab_packets_;
  struct SlabFree {  // (a slab comes from ::operator new[](bytes, align_val_t{64}))
    void operator()(std::byte* b) const { ::operator delete[](b, std::align_val_t{64}); }
  };
  std::vector<std::unique_ptr<std::byte[], SlabFree>> slabs_;  // 64-byte aligned
  Packet* free_ = nullptr;
  size_t in_use_ = 0;
  size_t total_ = 0;
  size_t free_n_ = 0;
};

// ---- binary codec (runtime, tests, fuzzing) ----

enum class DecodeError {
  None = 0, Truncated, BadVersion, BadType, BadFlags, BadWorkerCount, BadRank,
  BadBitmap, PayloadLength, PayloadTooLarge,
};
const char* to_string(DecodeError e);

// Bytes needed to encode `h` with its payload.
inline size_t encoded_size(const Header& h) { return kHeaderBytes + 4u * h.count; }

// Writes header + payload into `out` (must hold encoded_size bytes). Returns bytes written.
size_t encode(const Header& h, std::span<const int32_t> payload, std::span<std::byte> out);
size_t encode(const Packet& p, std::span<std::byte> out);

// Parses and validates. On success fills `h` and copies the payload into
// `payload_out` (capacity = payload_out.size()).
DecodeError decode(std::span<const std::byte> in, Header& h, std::span<int32_t> payload_out);
// The same into a packet of `pool`'s (its capacity bounds the payload).
DecodeError decode(std::span<const std::byte> in, Packet& p, const PacketPool& pool);

std::string describe(const Header& h);

}  // namespace ina
