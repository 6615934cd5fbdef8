#pragma once
// Deterministic packet-level discrete-event simulator.
//
// Time is integer picoseconds. Events are (time, sequence) ordered in a
// 4-ary heap of 32-byte PODs; ties break by insertion order, so a run is a
// pure function of its seed. A link is a FIFO output queue plus a wire: a
// packet's departure is computed arithmetically from the link's busy-until
// time, so crossing a link costs exactly one event (its arrival). Packets in
// flight on a link wait in the link's own FIFO (arrival times are
// non-decreasing). The links' heads compete in a tournament (winner) tree
// keyed by (arrival, sequence): delivering a head and keying the next one is
// one leaf-to-root pass with one comparison per level. Timers and reordered packets are in a 4-ary heap. The
// earlier of the two is the next event, so the global order is (time,
// sequence) exactly as if every event were in one queue. Queue
// occupancy is the backlog; drop-tail and ECN marking act on it at enqueue.
// Loss, duplication and reordering are injected per link from the link's own
// random stream; a reordered packet leaves the FIFO and becomes its own event.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "core/time.hpp"
#include "proto/node.hpp"
#include "wire/packet.hpp"

namespace ina::sim {

struct LinkParams {
  double gbps = 100;
  Time delay = 2500 * kNs;    // propagation, one way
  uint64_t queue_bytes = 1 << 20;
  uint64_t ecn_bytes = 100 * 1000;  // 0 = no marking
  double loss = 0, dup = 0, reorder = 0;
  Time reorder_delay = 5 * kUs;   // reordered packets are held ~U(0, this) extra
};

struct LinkStats {
  uint64_t packets = 0, bytes = 0;      // delivered
  uint64_t drop_queue = 0, drop_loss = 0;
  uint64_t duplicated = 0, reordered = 0, ecn_marked = 0;
  Time busy = 0;                        // total serialization time
};

// Prefetches a packet's header and payload (a 64-value payload: 6 lines).
inline void prefetch_packet(const Packet* p) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t off = 0; off < sizeof(Packet) + 64 * sizeof(int32_t); off += 64) __builtin_prefetch(c + off, 0, 2);
}

// Packets in flight on one link in arrival order: a growable ring of
// (arrival, packet) pairs, so the next arrival time is read without touching
// the packet (which is usually not in cache yet). 24 bytes, in the link's
// first cache line.
class WireFifo {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  Time front_time() const { return buf_[head_].first; }
  Packet* front() const { return buf_[head_].second; }
  // Pops the head and prefetches what the link delivers next time: the ring
  // two lines on and the new head's packet (a packet lives on the wire for
  // thousands of events, long enough to leave the caches; with the line
  // fetched now it is in cache when it is due, after the other links' turns).
  void pop() {
    head_ = (head_ + 1) & mask_;
    --n_;
    __builtin_prefetch(&buf_[(head_ + 8) & mask_]);
    if (n_) prefetch_packet(buf_[head_].second);
  }
  void push(Time t, Packet* p) {
    if (!buf_ || n_ == mask_ + 1) grow();
    buf_[(head_ + n_) & mask_] = {t, p};
    ++n_;
  }

 private:
  void grow() {
    const uint32_t cap = buf_ ? 2 * (mask_ + 1) : 64;
    auto b = std::make_unique<std::pair<Time, Packet*>[]>(cap);
    for (uint32_t i = 0; i < n_; ++i) b[i] = buf_[(head_ + i) & mask_];
    buf_ = std::move(b);
    head_ = 0;
    mask_ = cap - 1;
  }
  std::unique_ptr<std::pair<Time, Packet*>[]> buf_;
  uint32_t head_ = 0, n_ = 0, mask_ = 0;
};

// A link's fields in the order its work reads them: the first cache line is
// what every delivery and every send reads (the wire, the queue's state and
// thresholds), the second its parameters (every send reads loss, delay,
// duplication and reordering), then the counters.
struct alignas(64) Link {
  WireFifo wire;  // in flight, in arrival order
  NodeId from = kNoNode, to = kNoNode;
  uint32_t ser_bytes = 0;  // the last packet size serialized, and its time (0 B take 0 ps)
  Time busy_until = 0;
  Time ser_time = 0;
  Time queue_time = 0, ecn_time = 0;    // thresholds as backlog time
  LinkParams p;
  uint64_t bps = 0;
  LinkStats st;
  Rng rng;
};
static_assert(offsetof(Link, p) == 64, "a link's first line: the wire and the queue");

// Heap events. Deliver: a lone packet (reordered); Timer: a node's timer.
enum class EvKind : uint32_t { Deliver = 0, Timer = 1 };

struct Event {
  Time t;
  uint64_t seq;
  union { Packet* pkt; uint64_t token; };
  uint32_t node;
  EvKind kind;
};
static_assert(sizeof(Event) == 32);

// One delivery or timer, as seen by the optional trace sink (tests compare
// traces event by event; the digest() folds the same events into a hash).
struct TraceRecord {
  Time t;
  NodeId node;         // the node handed the packet or the timer
  bool timer;          // false: a packet delivery
  PktType type;        // deliveries: the header fields
  uint16_t job, flags;
  uint32_t psn;
  NodeId src, dst;
  uint8_t rank;
  RankBits bitmap;
  uint64_t token;      // timers: the token
};

class Simulator;

class SimEffects final : public Effects {
 public:
  explicit SimEffects(Simulator& s) : sim_(s) {}
  Packet* alloc() override;
  void send(Packet* p) override;
  void free(Packet* p) override;
  void set_timer(Time at, uint64_t token) override;
  bool multicast(Packet* p) override;
  NodeId current = kNoNode;

 private:
  Simulator& sim_;
};

class Simulator {
 public:
  // header_bytes: modelled bytes on the wire besides the payload values.
  Simulator(uint64_t seed, uint16_t payload_capacity, uint32_t header_bytes = 50, uint32_t min_packet_bytes = 64);
  ~Simulator();

  // Topology. Node ids are dense, in order of addition. The simulator owns nodes.
  NodeId add_node(std::unique_ptr<Node> n, bool is_switch);
  // ECN: links out of a switch mark every packet above their ecn_bytes
  // (the rule both engines share: proto/ecn.hpp); links out of a host
  // (its NIC's queue) never do unless this is set before connect() (a NIC
  // does not mark its own queue: DCTCP and DCQCN mark at switch ports).
  void set_host_ecn(bool on) { host_ecn_ = on; }
  // End-host latency: every packet spends `d` inside the
  // host that sends it (application to NIC) and `d` inside the host that
  // receives it (NIC to application), as a pure delay that limits no rate.
  // Set before connect(): links out of a host and into a host get `d` more
  // propagation delay each. A constant delay before a FIFO queue delays its
  // departures by the same constant, so charging the sender's share after
  // its NIC queue instead of before changes no time the hosts see. 0: none.
  void set_host_delay(Time d) { host_delay_ = d; }
  // Two unidirectional links a->b and b->a; returns the id of a->b (b->a is +1).
  uint32_t connect(NodeId a, NodeId b, const LinkParams& ab, const LinkParams& ba);
  // Shortest-path routes (by hop count; hosts never transit): for every
  // switch s and destination d, ALL links out of s that start a shortest path
  // to d, in link-id order. route() picks one per flow, at index
  // ecmp_index(p.src, p.dst, s, count) (core/ecmp.hpp, the same choice as
  // topo::Routing), so one (src, dst) flow always takes one path and flows
  // spread over equal-cost paths; with one candidate there is no hashing.
  // Multicast trees take the first candidate (the lowest link id) at every
  // switch, for every member. Call after the last connect().
  void build_routes();
  // The candidate next-hop links of switch `sw` towards `dst`, in link-id
  // order (empty: no route, `dst` == `sw`, `sw` a host, or no build_routes()).
  // Valid until the next build_routes().
  std::span<const uint32_t> next_hops(NodeId sw, NodeId dst) const;

  template <typename T>
  T& node(NodeId id) { return static_cast<T&>(*nodes_[id]); }
  Node& node(NodeId id) { return *nodes_[id]; }
  size_t node_count() const { return nodes_.size(); }
  Link& link(uint32_t id) { return links_[id]; }
  size_t link_count() const { return links_.size(); }
  // The link leaving host `h` (its only one).
  uint32_t uplink(NodeId h) const { return host_link_[h]; }

  // Multicast group `group` (a job id): its members, in rank order. Packets a
  // node multicasts to the group are replicated along the shortest-path tree.
  void set_multicast_group(uint16_t group, std::vector<NodeId> members);
  bool multicast_from(NodeId from, Packet* p);

  // Runs until no event is left or the next one is after `until`.
  void run(Time until = kNever);
  // The control plane acting on node `n` at `at` (after run(at): no event
  // is due before it): `f` gets the node's effects, as a timer would.
  void call(NodeId n, Time at, const std::function<void(Effects&)>& f);
  Time now() const { return now_; }
  bool idle() const { return heap_.empty(); }

  PacketPool& pool() { return pool_; }
  uint32_t wire_bytes(const Packet& p) const { return wire_bytes(p.h.count); }
  // A packet of `count` values on the wire: header, values, at least a minimum frame.
  uint32_t wire_bytes(uint16_t count) const {
    const uint32_t b = header_bytes_ + 4u * count;
    return b < min_packet_bytes_ ? min_packet_bytes_ : b;
  }

  uint64_t events() const { return events_; }
  uint64_t hops() const { return hops_; }
  uint64_t timer_events() const { return events_ - hops_; }
  uint64_t misrouted() const { return misrouted_; }
  uint64_t digest() const { return digest_; }
  // Appends every delivery and timer to `sink` from now on (nullptr: off).
  void set_trace(std::vector<TraceRecord>* sink) { trace_ = sink; }
  // Instrumentation: called with each packet a link's random loss drops,
  // before it is freed (empty: off). It must not change the run.
  void set_loss_observer(std::function<void(const Packet&)> f) { loss_observer_ = std::move(f); }

  // Used by SimEffects.
  void route(NodeId from, Packet* p);
  void schedule_timer(NodeId n, Time at, uint64_t token);

 private:
  void push(const Event& e);
  Event pop();
  void transmit(uint32_t link_id, Packet* p);
  [[gnu::noinline]] void transmit_faulty(uint32_t link_id, Packet* p);  // a link with loss, duplication or reordering
  Time admit(Link& l, Packet* p);
  void enqueue_on_wire(uint32_t link_id, Packet* p, Time arrival, bool in_order);
  [[gnu::always_inline]] inline void deliver(NodeId to, Packet* p);  // (inlined into run(), its one caller)
  // Tournament (winner) tree over links: leaf_[l] is link l's key (its wire
  // head's arrival and sequence); win_[n] for 1 <= n < leaves_ is the link
  // with the least key below tree node n, and win_[leaves_ + l] = l, so the
  // root win_[1] is the next link delivery and re-keying a link compares
  // its new key with the sibling's winner once per level, with no branch.
  struct LeafKey {
    Time t = kNever;
    uint64_t seq = UINT64_MAX;
  };
  void key_link(uint32_t link_id);  // re-keys a link from its wire head, updates the path
  [[gnu::always_inline]] inline void key_link_inline(uint32_t link_id);  // the same, inlined into run()
  void build_tree();
  std::vector<LeafKey> leaf_ = std::vector<LeafKey>(1);  // no link yet: an empty key
  std::vector<uint32_t> win_ = std::vector<uint32_t>(2);
  size_t leaves_ = 1;

  PacketPool pool_;
  uint32_t header_bytes_, min_packet_bytes_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<bool> is_switch_;
  bool host_ecn_ = false;
  Time host_delay_ = 0;
  std::vector<Link> links_;
  std::vector<uint32_t> host_link_;            // per node: its uplink (hosts)
  std::vector<std::vector<uint32_t>> out_links_;
  // Routes, flat: route_[d * route_rows_ + row_[s]] for node d and switch s
  // is UINT32_MAX (no route), a link id (the only candidate), or
  // kManyHops | o: the candidates are ecmp_[o + 1 .. o + ecmp_[o]]. Candidate
  // sets are interned, so the table costs 4 bytes per (switch, node), as one
  // next hop would.
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr uint32_t kManyHops = 0x80000000u;
  std::vector<uint32_t> row_;    // per node: its row (switches, once routed) or kNoRow
  std::vector<uint32_t> route_;
  std::vector<uint32_t> ecmp_;
  size_t route_n_ = 0, route_rows_ = 0;  // nodes and switches when the routes were built
  uint32_t first_hop(NodeId sw, NodeId dst) const;  // multicast: the first candidate, or UINT32_MAX
  std::vector<std::vector<NodeId>> groups_;     // by group id
  // A switch's multicast split of a group: for the members `pending`, the
  // next-hop links in order of first member, each with its members.
  struct McastSplit {
    bool valid = false;
    RankBits pending;
    std::vector<std::pair<uint32_t, RankBits>> branches;
  };
  std::vector<McastSplit> mcast_;  // by group x switch row (made on first use; cleared when groups or routes change)
  McastSplit& mcast_split(uint16_t group, uint32_t row);
  std::vector<Event> heap_;
  uint64_t seq_ = 0;
  Time now_ = 0;
  uint64_t events_ = 0, hops_ = 0, misrouted_ = 0;
  std::function<void(const Packet&)> loss_observer_;
  uint64_t digest_ = 0xcbf29ce484222325ULL;
  bool started_ = false;
  std::vector<TraceRecord>* trace_ = nullptr;
  SimEffects fx_;
};

}  // namespace ina::sim
