#include "sim/engine.hpp"

#include <cmath>
#include <algorithm>
#include <barrier>
#include <exception>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "core/ecmp.hpp"
#include "core/resources.hpp"
#include "proto/ecn.hpp"

#include <fmt/format.h>

namespace ina::sim {

inline void Simulator::route(Partition& P, NodeId from, Packet* p) {
  p->h.src = p->h.src == kNoNode ? from : p->h.src;
  uint32_t li = kNoLink;
  const uint32_t row = row_[from];
  if (row == kNoRow) {  // a host (or a switch before build_routes, whose host_link_ is kNoLink)
    li = host_link_[from];
  } else if (p->h.dst < route_n_) {
    const uint32_t* e = route_entry(row, p->h.dst);
    li = e ? *e : kNoLink;
    if (li >= kManyHops && li != kNoLink) {  // equal-cost candidates: one per flow
      const uint32_t* c = &ecmp_[li & ~kManyHops];
      li = c[1 + ecmp_index(p->h.src, p->h.dst, from, c[0])];
    }
  }
  if (li == kNoLink) {
    ++P.misrouted;
    P.pool.put(p);
    return;
  }
  transmit(P, li, p);
}

Packet* SimEffects::alloc() { return part_.pool.get(); }
void SimEffects::send(Packet* p) { sim_.route(part_, current, p); }
void SimEffects::free(Packet* p) { part_.pool.put(p); }
void SimEffects::set_timer(Time at, uint64_t token) { sim_.schedule_timer(part_, current, at, token); }
bool SimEffects::multicast(Packet* p) { return sim_.multicast_from(part_, current, p); }
void SimEffects::send_copies(Packet* p, std::span<const NodeId> to) {
  for (size_t r = 1; r < to.size(); ++r) {
    Packet* c = part_.pool.clone(*p);
    c->h.dst = to[r];
    sim_.route(part_, current, c);
  }
  p->h.dst = to[0];
  sim_.route(part_, current, p);
}

void Simulator::route(NodeId from, Packet* p) {
  ensure_trees();
  route(*parts_[node_part_[from]], from, p);
}

void Simulator::set_multicast_group(uint16_t group, std::vector<NodeId> members) {
  if (members.size() > kRankBits)
    throw std::invalid_argument(fmt::format("multicast groups hold at most {} members, got {}", kRankBits, members.size()));
  if (groups_.size() <= group) groups_.resize(group + 1);
  groups_[group] = std::move(members);
  size_mcast();  // the group's splits are stale
}

void Simulator::size_mcast() {
  mcast_.assign(route_rows_, {});
}

bool Simulator::multicast_from(Partition& P, NodeId from, Packet* p) {
  if (p->h.job >= groups_.size() || groups_[p->h.job].empty() || !is_switch_[from]) return false;
  const auto& members = groups_[p->h.job];
  const RankBits pending = p->mcast ? p->mcast : RankBits::first(static_cast<unsigned>(members.size()));
  // Members by next-hop link, in member order; one copy per link. A switch
  // sends a group's packets to the same members every time: the split is
  // kept per (group, switch) and made again only for other members.
  McastSplit scratch;
  McastSplit& split = row_[from] == kNoRow ? scratch : mcast_split(p->h.job, row_[from]);
  if (!split.valid || split.pending != pending) {
    split.branches.clear();
    for (unsigned m = 0; m < members.size(); ++m) {
      if (!pending.test(m)) continue;
      const uint32_t li = first_hop(from, members[m]);
      if (li == kNoLink) continue;
      auto it = std::find_if(split.branches.begin(), split.branches.end(), [&](const auto& b) { return b.first == li; });
      if (it == split.branches.end()) split.branches.emplace_back(li, RankBits::bit(m));
      else it->second |= RankBits::bit(m);
    }
    split.pending = pending;
    split.valid = true;
  }
  const auto& branches = split.branches;
  for (size_t b = 0; b < branches.size(); ++b) {
    Packet* c = b + 1 == branches.size() ? p : P.pool.clone(*p);
    const auto [li, mask] = branches[b];
    const NodeId to = links_[li].to;
    if (!is_switch_[to]) {  // the last hop: a unicast copy for that member
      c->h.dst = to;
      c->mcast = {};
    } else {
      c->h.dst = kMulticast;
      c->mcast = mask;
    }
    transmit(P, li, c);
  }
  if (branches.empty()) P.pool.put(p);
  return true;
}

Simulator::Simulator(uint64_t seed, uint16_t payload_capacity, uint32_t header_bytes, uint32_t min_packet_bytes)
    : payload_capacity_(payload_capacity), header_bytes_(header_bytes), min_packet_bytes_(min_packet_bytes), seed_(seed) {
  // Every packet takes at least 1 ps on a link: one link delivers one packet
  // a picosecond at most (the events' keys) and no send lands in the
  // picosecond it is made (run_same_time()).
  if (min_packet_bytes == 0)
    throw std::invalid_argument("simulator: min_packet_bytes is 0; a packet takes at least 1 byte on the wire");
  parts_.push_back(std::make_unique<Partition>(*this, payload_capacity, 0));
  parts_.front()->heap.reserve(1 << 16);
  parts_.front()->outbox.resize(1);
  local_.push_back(parts_.front().get());
}

Simulator::~Simulator() {
  // Return packets still in flight so the pools' accounting stays meaningful.
  Partition& P = *parts_.front();
  for (auto& part : parts_) {
    for (auto& e : part->heap)
      if (e.kind == EvKind::Deliver) P.pool.put(e.pkt);
    for (auto& box : part->outbox)
      for (const Posted& x : box) P.pool.put(x.pkt);
    for (const Posted& x : part->inbox) P.pool.put(x.pkt);
  }
  for (auto& l : links_)
    while (!l.wire.empty()) {
      P.pool.put(l.wire.front());
      l.wire.pop();
    }
}

size_t Simulator::packets_in_use() const {
  size_t n = remote_in_use_;  // a pool's count wraps when it frees more than it allocated; the sum does not
  for (const Partition* part : local_) n += part->pool.in_use();
  return n;
}

Time Simulator::now() const {
  Time t = 0;
  for (const auto& part : parts_) t = std::max(t, part->now);
  return t;
}

bool Simulator::idle() const {
  for (const auto& part : parts_)
    if (!part->heap.empty()) return false;
  return !remote_busy_;
}

bool Simulator::quiet() const {
  if (!idle() || remote_wires_) return false;
  for (const Link& l : links_)
    if (!l.wire.empty()) return false;
  return true;
}

uint64_t Simulator::sum(uint64_t Partition::*counter) const {
  uint64_t n = 0;
  for (const auto& part : parts_) n += (*part).*counter;
  return n;
}

uint64_t Simulator::events() const { return sum(&Partition::events); }
uint64_t Simulator::hops() const { return sum(&Partition::hops); }
uint64_t Simulator::misrouted() const { return sum(&Partition::misrouted); }

std::vector<Simulator::PartitionLoad> Simulator::partition_loads() const {
  std::vector<PartitionLoad> out;
  for (const auto& part : parts_) out.push_back({part->events, part->busy_s});
  return out;
}

uint64_t Simulator::digest() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const uint64_t d : node_digest_) h = (h ^ d) * 0x100000001b3ULL;
  return h;
}

NodeId Simulator::add_node(std::unique_ptr<Node> n, bool is_switch) {
  if (nodes_.size() >= kMulticast) throw std::length_error("too many nodes");
  const auto id = static_cast<NodeId>(nodes_.size());
  n->set_id(id);
  nodes_.push_back(std::move(n));
  is_switch_.push_back(is_switch);
  host_link_.push_back(kNoLink);
  row_.push_back(kNoRow);
  out_links_.emplace_back();
  node_part_.push_back(0);
  node_digest_.push_back(0xcbf29ce484222325ULL);
  timer_count_.push_back(0);
  return id;
}

namespace {
bool faulty(const Link& l) { return l.p.loss > 0 || l.p.dup > 0 || l.p.reorder > 0; }
}  // namespace

uint32_t Simulator::connect(NodeId a, NodeId b, const LinkParams& ab, const LinkParams& ba) {
  if (a >= nodes_.size() || b >= nodes_.size()) throw std::out_of_range("connect: unknown node");
  if (parts_.size() > 1) throw std::logic_error("connect: after set_partitions (the window would not know the link)");
  if (links_.size() + 2 > kMaxLinks) throw std::length_error(fmt::format("connect: at most {} links", kMaxLinks));
  auto make = [&](NodeId from, NodeId to, const LinkParams& p) {
    if (!(p.gbps > 0)) throw std::invalid_argument("link bandwidth must be > 0");
    if (p.delay < 0) throw std::invalid_argument(fmt::format("link delay must be >= 0 ps, got {}", p.delay));
    Link l;
    l.from = from;
    l.to = to;
    l.p = p;
    l.p.delay += (is_switch_[from] ? 0 : host_delay_) + (is_switch_[to] ? 0 : host_delay_);
    l.delay = l.p.delay;
    l.bps = static_cast<uint64_t>(std::llround(p.gbps * 1e9));
    l.queue_time = serialization_time(p.queue_bytes, l.bps);
    // ECN marks at switch egress ports; a host's NIC queue only with set_host_ecn(true).
    l.ecn_time = p.ecn_bytes && (is_switch_[from] || host_ecn_) ? serialization_time(p.ecn_bytes, l.bps) : kNever;
    l.rng.reseed(mix(seed_, 0x11 + links_.size()));
    l.slow = faulty(l);
    const auto id = static_cast<uint32_t>(links_.size());
    links_.push_back(std::move(l));
    out_links_[from].push_back(id);
    if (!is_switch_[from]) {
      if (host_link_[from] != kNoLink) throw std::invalid_argument("a host has exactly one link");
      host_link_[from] = id;
    }
    return id;
  };
  const uint32_t id = make(a, b, ab);
  make(b, a, ba);
  trees_stale_ = true;
  return id;
}

namespace {
struct CandidateHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = v.size();
    for (const uint32_t x : v) h = mix(h, x);
    return static_cast<size_t>(h);
  }
};
}  // namespace

void Simulator::build_routes() {
  const size_t n = nodes_.size();
  if (links_.size() >= kManyHops) throw std::length_error("too many links to route");
  row_.assign(n, kNoRow);
  std::vector<NodeId> switches;
  for (NodeId s = 0; s < n; ++s)
    if (is_switch_[s]) {
      row_[s] = static_cast<uint32_t>(switches.size());
      switches.push_back(s);
    }
  const size_t rows = switches.size();
  route_n_ = n;
  route_rows_ = rows;
  route_.assign(rows * rows, kNoLink);
  size_mcast();
  ecmp_.clear();
  std::unordered_map<std::vector<uint32_t>, uint32_t, CandidateHash> interned;
  std::vector<int> dist(n);
  std::vector<NodeId> queue;
  queue.reserve(n);
  std::vector<uint32_t> cand;
  // Columns towards every switch d: a BFS from d gives every node's hop
  // distance to d (links come in pairs a->b, b->a), hosts other than d reached
  // but not expanded. A switch's candidates are its links to d or to a switch
  // one hop closer.
  for (const NodeId d : switches) {
    std::fill(dist.begin(), dist.end(), -1);
    dist[d] = 0;
    queue.assign(1, d);
    for (size_t qi = 0; qi < queue.size(); ++qi) {
      const NodeId u = queue[qi];
      if (u != d && !is_switch_[u]) continue;
      for (const uint32_t li : out_links_[u]) {
        const NodeId v = links_[li].to;
        if (dist[v] >= 0) continue;
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
    uint32_t* column = &route_[row_[d] * rows];
    for (const NodeId s : queue) {
      if (s == d || !is_switch_[s]) continue;
      cand.clear();
      for (const uint32_t li : out_links_[s]) {
        const NodeId v = links_[li].to;
        if (dist[v] == dist[s] - 1 && (v == d || is_switch_[v])) cand.push_back(li);
      }
      if (cand.size() == 1) {
        column[row_[s]] = cand[0];
        continue;
      }
      auto [it, added] = interned.try_emplace(cand, static_cast<uint32_t>(ecmp_.size()));
      if (added) {
        if (ecmp_.size() + cand.size() + 1 >= kManyHops - 1) throw std::length_error("too many equal-cost routes");
        ecmp_.push_back(static_cast<uint32_t>(cand.size()));
        ecmp_.insert(ecmp_.end(), cand.begin(), cand.end());
      }
      column[row_[s]] = kManyHops | it->second;
    }
  }
  // A host h on one link to switch t: every other switch reaches h exactly as
  // it reaches t (the paths to h are those to t, plus t->h); t takes t->h.
  col_.assign(n, kNoRow);
  down_link_.assign(n, kNoLink);
  for (NodeId h = 0; h < n; ++h) {
    if (is_switch_[h]) {
      col_[h] = row_[h];
      continue;
    }
    const uint32_t up = host_link_[h];
    if (up == kNoLink) continue;
    const NodeId t = links_[up].to;
    if (!is_switch_[t]) continue;  // a host-to-host link: no switch routes to h
    col_[h] = row_[t];
    down_link_[h] = up ^ 1;  // the twin: t -> h
  }
}

std::span<const uint32_t> Simulator::next_hops(NodeId sw, NodeId dst) const {
  if (sw >= row_.size() || row_[sw] == kNoRow || dst >= route_n_) return {};
  const uint32_t* ep = route_entry(row_[sw], dst);
  if (!ep || *ep == kNoLink) return {};
  const uint32_t& e = *ep;
  if (e & kManyHops) {
    const uint32_t o = e & ~kManyHops;
    return {&ecmp_[o + 1], ecmp_[o]};
  }
  return {&e, 1};
}

uint32_t Simulator::first_hop(NodeId sw, NodeId dst) const {
  const auto c = next_hops(sw, dst);
  return c.empty() ? kNoLink : c.front();
}

namespace {
// (t, tie) order; tie is unique, so this is a strict total order.
inline bool before(const Event& a, const Event& b) {
  return a.t < b.t || (a.t == b.t && a.tie < b.tie);
}
}  // namespace

void Simulator::push(Partition& P, const Event& e) {
  // 4-ary min-heap on (t, tie).
  auto& heap = P.heap;
  heap.push_back(e);
  size_t i = heap.size() - 1;
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    const Event& p = heap[parent];
    if (before(p, e)) break;
    heap[i] = p;
    i = parent;
  }
  heap[i] = e;
}

Event Simulator::pop(Partition& P) {
  auto& heap = P.heap;
  const Event top = heap[0];
  const Event last = heap.back();
  heap.pop_back();
  const size_t n = heap.size();
  if (n == 0) return top;
  Event* h = heap.data();
  size_t i = 0;
  for (;;) {
    const size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    if (c + 3 < n) {  // full set of four children: branch-light selection
      const size_t b01 = before(h[c + 1], h[c]) ? c + 1 : c;
      const size_t b23 = before(h[c + 3], h[c + 2]) ? c + 3 : c + 2;
      best = before(h[b23], h[b01]) ? b23 : b01;
    } else {
      for (size_t k = c + 1; k < n; ++k)
        if (before(h[k], h[best])) best = k;
    }
    if (!before(h[best], last)) break;
    h[i] = h[best];
    i = best;
  }
  h[i] = last;
  return top;
}

void Simulator::schedule_timer(Partition& P, NodeId n, Time at, uint64_t token) {
  Event e;
  e.t = at < P.now ? P.now : at;
  e.tie = event_tie(n, 2, timer_count_[n]++);
  e.token = token;
  e.node = n;
  e.kind = EvKind::Timer;
  push(P, e);
}

// A 128-bit division, out of line (cold: a link's packets mostly have one size).
void Simulator::set_ser_bytes(Link& l, uint32_t bytes) {
  l.ser_bytes = bytes;
  l.ser_time = serialization_time(bytes, l.bps);
}

// The link's ser_bytes and ser_time for p's size.
inline void Simulator::size_link(Link& l, const Packet& p) const {
  const uint32_t bytes = wire_bytes(p);
  if (bytes != l.ser_bytes) [[unlikely]] set_ser_bytes(l, bytes);
}

// The link's queue: drop-tail above queue_time of backlog, ECN marking above
// ecn_time; else the packet is serialized once the link is free (its size
// the link's ser_bytes). Returns false if it was dropped (and freed).
inline bool Simulator::serialize(Partition& P, Link& l, Packet* p) {
  const Time now = P.now;
  const Time backlog = l.busy_until > now ? l.busy_until - now : 0;
  if (backlog > l.queue_time) {
    ++l.st.drop_queue;
    P.pool.put(p);
    return false;
  }
  if (ecn_mark(p->h, backlog > l.ecn_time)) ++l.st.ecn_marked;  // every packet type (proto/ecn.hpp)
  l.busy_until = (backlog ? l.busy_until : now) + l.ser_time;
  l.st.busy += l.ser_time;
  return true;
}

// serialize() for a packet of any size; its serialization time, or -1 if
// it was dropped (and freed).
inline Time Simulator::admit(Partition& P, Link& l, Packet* p) {
  size_link(l, *p);
  return serialize(P, l, p) ? l.ser_time : -1;
}

// A link inside the partition without loss, duplication or reordering (no
// random draw either way), a packet of the size last serialized and room on
// the wire: transmit_faulty()'s steps without the rest, in one function.
// Every call on this path is its last step (the other cases go to
// transmit_slow(), which makes room or a size's time and starts over), so
// the send paths it is inlined into keep few registers across it.
inline void Simulator::transmit(Partition& P, uint32_t link_id, Packet* p) {
  Link& l = links_[link_id];
  if (l.slow || wire_bytes(*p) != l.ser_bytes || l.wire.needs_room()) [[unlikely]] return transmit_slow(P, link_id, p);
  if (!serialize(P, l, p)) return;
  ++l.st.packets;
  l.st.bytes += l.ser_bytes;
  const bool was_empty = l.wire.empty();
  l.wire.push_with_room(l.busy_until + l.delay, p);
  if (was_empty) key_link(P, link_id);
}

void Simulator::transmit_slow(Partition& P, uint32_t link_id, Packet* p) {
  Link& l = links_[link_id];
  if (l.slow) return transmit_faulty(P, link_id, p);
  size_link(l, *p);
  if (l.wire.needs_room()) l.wire.make_room();
  transmit(P, link_id, p);
}

void Simulator::watch_link(uint32_t link, Time from, Time to) {
  if (link >= links_.size())
    throw std::out_of_range(fmt::format("watch_link: no link {} ({} links)", link, links_.size()));
  if (!(from < to)) throw std::invalid_argument(fmt::format("watch_link: an empty window [{}, {}) ps", from, to));
  if (started_) throw std::logic_error("watch_link: the run has started");
  Link& l = links_[link];
  if (l.watch < 0) {
    l.watch = static_cast<int32_t>(watched_.size());
    watched_.push_back({from, to, {}});
    l.slow = true;
  }
  watched_[static_cast<size_t>(l.watch)].from = from;
  watched_[static_cast<size_t>(l.watch)].to = to;
}

const std::vector<QueueSample>& Simulator::link_samples(uint32_t link) const {
  static const std::vector<QueueSample> none;
  if (link >= links_.size() || links_[link].watch < 0) return none;
  return watched_[static_cast<size_t>(links_[link].watch)].samples;
}

void Simulator::transmit_faulty(Partition& P, uint32_t link_id, Packet* p) {
  Link& l = links_[link_id];
  QueueSample* w = nullptr;  // this packet's sample, if the link is watched now
  if (Watched* wt = l.watch >= 0 ? &watched_[static_cast<size_t>(l.watch)] : nullptr;
      wt && P.now >= wt->from && P.now < wt->to) {
    const Header& h = p->h;
    wt->samples.push_back({P.now, l.busy_until > P.now ? l.busy_until - P.now : 0, wire_bytes(*p), h.type,
                           QueueSample::kSent, false, h.job, h.flags, h.psn, h.priority, h.src, h.dst});
    w = &wt->samples.back();
  }
  if (l.p.loss > 0 && l.rng.bernoulli(l.p.loss)) {
    ++l.st.drop_loss;
    if (w) w->fate = QueueSample::kLost;
    if (loss_observer_) {
      std::lock_guard lock(observer_mu_);  // (partitions' threads; a lost packet is rare)
      loss_observer_(*p);
    }
    P.pool.put(p);
    return;
  }
  const uint64_t marked = l.st.ecn_marked;
  const Time ser = admit(P, l, p);
  if (w) w->marked = l.st.ecn_marked != marked;
  if (ser < 0) {
    if (w) w->fate = QueueSample::kDropped;
    return;
  }
  const Time arrival = l.busy_until + l.delay;
  Packet* copy = nullptr;
  if (l.p.dup > 0 && l.rng.bernoulli(l.p.dup)) {
    ++l.st.duplicated;
    copy = P.pool.clone(*p);
    copy->mcast = p->mcast;  // a multicast copy serves the same members (0 would mean all of them)
    l.busy_until += ser;  // the copy takes the wire too
    l.st.busy += ser;
  }
  if (l.p.reorder > 0 && l.rng.bernoulli(l.p.reorder)) {
    ++l.st.reordered;
    const Time extra = static_cast<Time>(l.rng.uniform() * static_cast<double>(l.p.reorder_delay)) + 1;
    enqueue_on_wire(P, link_id, p, arrival + extra, false);
  } else {
    enqueue_on_wire(P, link_id, p, arrival, true);
  }
  if (copy) enqueue_on_wire(P, link_id, copy, l.busy_until + l.delay, true);
}

void Simulator::enqueue_on_wire(Partition& P, uint32_t link_id, Packet* p, Time arrival, bool in_order) {
  Link& l = links_[link_id];
  ++l.st.packets;
  l.st.bytes += wire_bytes(*p);
  const uint32_t count = in_order ? 0 : l.reordered_seq++;
  const uint16_t to_part = node_part_[l.to];
  if (to_part != P.index) {  // another partition's: posted at the end of the window
    P.outbox[to_part].push_back({arrival, p, link_id, count, in_order});
    return;
  }
  place(P, link_id, p, arrival, in_order, count);
}

void Simulator::place(Partition& P, uint32_t link_id, Packet* p, Time arrival, bool in_order, uint32_t count) {
  Link& l = links_[link_id];
  if (!in_order) {
    Event e;
    e.t = arrival;
    e.tie = event_tie(l.to, 1, reordered_id(link_id, count));
    e.pkt = p;
    e.node = l.to;
    e.kind = EvKind::Deliver;
    push(P, e);
    return;
  }
  const bool was_empty = l.wire.empty();
  l.wire.push(arrival, p);
  if (was_empty) key_link(P, link_id);
}

void Simulator::take_posted(Partition& P) {
  // One sender per link, posting in send order: each FIFO stays in arrival order.
  for (Partition* from : local_) {
    auto& box = from->outbox[P.index];
    for (const Posted& x : box) place(P, x.link, x.pkt, x.arrival, x.in_order, x.count);
    box.clear();
  }
  for (const Posted& x : P.inbox) place(P, x.link, x.pkt, x.arrival, x.in_order, x.count);
  P.inbox.clear();
}

namespace {
template <typename T>
void put_bytes(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
// Reads what put_bytes wrote; throws if `in` ends first (a peer that is not this build).
struct Reader {
  const std::string& in;
  size_t at = 0;
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    take(&v, sizeof v);
    return v;
  }
  void take(void* to, size_t n) {
    if (n > in.size() - at) throw std::runtime_error("a rank's message ends early (ranks of different builds?)");
    std::memcpy(to, in.data() + at, n);
    at += n;
  }
  bool done() const { return at == in.size(); }
};
}  // namespace

void Simulator::trade_posts() {
  const unsigned me = ranks_->rank();
  std::vector<std::string> out(ranks_->size());
  // The messages first; a failure to make them still trades (empty ones),
  // so that the other ranks are not left waiting, then throws. Packets are
  // freed once sent.
  std::exception_ptr failed;
  try {
    for (Partition* P : local_)
      for (size_t q = 0; q < parts_.size(); ++q) {
        if (part_rank_[q] == me) continue;
        std::string& m = out[part_rank_[q]];
        for (const Posted& x : P->outbox[q]) {
          put_bytes(m, static_cast<uint16_t>(q));
          put_bytes(m, x.link);
          put_bytes(m, x.count);
          put_bytes(m, static_cast<uint8_t>(x.in_order));
          put_bytes(m, x.arrival);
          put_bytes(m, x.pkt->h);
          put_bytes(m, x.pkt->mcast);
          m.append(reinterpret_cast<const char*>(x.pkt->payload()), sizeof(int32_t) * x.pkt->h.count);
        }
      }
  } catch (...) {
    failed = std::current_exception();
    out.assign(ranks_->size(), {});
  }
  const std::vector<std::string> in = ranks_->exchange(std::move(out), "posts");
  if (failed) std::rethrow_exception(failed);
  for (Partition* P : local_)
    for (size_t q = 0; q < parts_.size(); ++q) {
      if (part_rank_[q] == me) continue;
      for (const Posted& x : P->outbox[q]) P->pool.put(x.pkt);
      P->outbox[q].clear();
    }
  for (const std::string& m : in) {
    Reader r{m};
    while (!r.done()) {
      const auto q = r.get<uint16_t>();
      Posted x;
      x.link = r.get<uint32_t>();
      x.count = r.get<uint32_t>();
      x.in_order = r.get<uint8_t>() != 0;
      x.arrival = r.get<Time>();
      if (q >= parts_.size() || part_rank_[q] != me || x.link >= links_.size() || node_part_[links_[x.link].to] != q)
        throw std::runtime_error(fmt::format("rank {}: a post for partition {} on link {}, not this process's", me, q, x.link));
      Partition& Q = *parts_[q];
      if (Q.inbox.size() == Q.inbox.capacity()) Q.inbox.reserve(2 * Q.inbox.size() + 64);  // so push_back cannot throw
      x.pkt = Q.pool.get();
      Q.inbox.push_back(x);  // (freed with the simulator if the rest is malformed)
      Packet* p = x.pkt;
      p->h = r.get<Header>();
      p->mcast = r.get<RankBits>();
      if (p->h.count > Q.pool.capacity()) throw std::runtime_error(fmt::format("rank {}: a post of {} values", me, p->h.count));
      r.take(p->payload(), sizeof(int32_t) * p->h.count);
    }
  }
}

void Simulator::share_totals(double cpu_s) {
  const unsigned me = ranks_->rank();
  std::string m;
  put_bytes(m, cpu_s);
  size_t in_use = 0;
  bool busy = false, wires = false;
  for (const Partition* P : local_) {
    in_use += P->pool.in_use();
    busy |= !P->heap.empty();
  }
  for (const Link& l : links_) wires |= !l.wire.empty();
  put_bytes(m, in_use);
  put_bytes(m, static_cast<uint8_t>(busy | wires << 1));
  put_bytes(m, static_cast<uint32_t>(local_.size()));
  for (const Partition* P : local_) {
    put_bytes(m, P->index);
    put_bytes(m, P->events);
    put_bytes(m, P->hops);
    put_bytes(m, P->misrouted);
    put_bytes(m, P->busy_s);
    put_bytes(m, P->now);
  }
  for (NodeId n = 0; n < nodes_.size(); ++n)
    if (local(n)) put_bytes(m, node_digest_[n]);
  for (const Link& l : links_)
    if (local(l.from)) put_bytes(m, l.st);  // a link's counters are its sender's
  const std::vector<std::string> in = ranks_->share(m, "totals");
  remote_in_use_ = 0;
  remote_busy_ = remote_wires_ = false;
  for (unsigned from = 0; from < in.size(); ++from) {
    if (from == me) continue;
    Reader r{in[from]};
    helper_cpu_s_ += r.get<double>();
    remote_in_use_ += r.get<size_t>();
    const auto flags = r.get<uint8_t>();
    remote_busy_ |= (flags & 1) != 0;
    remote_wires_ |= (flags & 2) != 0;
    const auto np = r.get<uint32_t>();
    for (uint32_t i = 0; i < np; ++i) {
      const auto q = r.get<uint16_t>();
      if (q >= parts_.size() || part_rank_[q] != from) throw std::runtime_error(fmt::format("rank {} reports partition {}", from, q));
      Partition& Q = *parts_[q];
      Q.events = r.get<uint64_t>();
      Q.hops = r.get<uint64_t>();
      Q.misrouted = r.get<uint64_t>();
      Q.busy_s = r.get<double>();
      Q.now = r.get<Time>();
    }
    for (NodeId n = 0; n < nodes_.size(); ++n)
      if (part_rank_[node_part_[n]] == from) node_digest_[n] = r.get<uint64_t>();
    for (Link& l : links_)
      if (part_rank_[node_part_[l.from]] == from) l.st = r.get<LinkStats>();
    if (!r.done()) throw std::runtime_error(fmt::format("rank {}'s totals are longer than this build's", from));
  }
}

void Simulator::build_trees() {
  trees_stale_ = false;
  const size_t n = links_.size();
  std::vector<uint32_t> order(n);
  for (uint32_t l = 0; l < n; ++l) order[l] = l;
  auto tie = [&](uint32_t l) { return event_tie(links_[l].to, 0, l); };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return tie(a) < tie(b); });
  // A partition's tree holds the links into its nodes, in that order.
  for (auto& part : parts_) part->link_at.clear();
  leaf_of_.resize(n);
  for (const uint32_t l : order) {
    auto& at = parts_[node_part_[links_[l].to]]->link_at;
    leaf_of_[l] = static_cast<uint32_t>(at.size());
    at.push_back(l);
  }
  for (Partition* part : local_) {  // (another process's partitions run there: no tree here)
    Partition& P = *part;
    const size_t own = P.link_at.size();
    P.leaves = 1;
    while (P.leaves < own) P.leaves *= 2;
    P.link_at.resize(P.leaves, 0);  // (the padding leaves stay empty: never read)
    P.key.assign(P.leaves, kNever);
    P.head.assign(P.leaves, nullptr);
    P.win.assign(2 * P.leaves, 0);
    for (size_t l = 0; l < P.leaves; ++l) P.win[P.leaves + l] = static_cast<uint32_t>(l);
    for (size_t i = P.leaves - 1; i >= 1; --i) P.win[i] = P.win[2 * i];  // all empty: any is the least
    for (size_t leaf = 0; leaf < own; ++leaf)
      if (!links_[P.link_at[leaf]].wire.empty()) key_link(P, P.link_at[leaf]);
  }
}

[[gnu::noinline]] void Simulator::key_link(Partition& P, uint32_t link_id) { key_leaf(P, leaf_of_[link_id], links_[link_id]); }

inline void Simulator::set_leaf(Partition& P, uint32_t leaf, const Link& l) {
  const bool empty = l.wire.empty();
  P.key[leaf] = empty ? kNever : l.wire.front_time();
  P.head[leaf] = empty ? nullptr : l.wire.front();
}

inline void Simulator::key_leaf(Partition& P, uint32_t leaf, const Link& l) {
  set_leaf(P, leaf, l);
  const Time t = P.key[leaf];
  const Time* keys = P.key.data();
  uint32_t* win = P.win.data();
  uint32_t w = leaf;
  auto k = static_cast<uint64_t>(t);
  for (size_t n = P.leaves + leaf; n > 1; n >>= 1) {
    const uint32_t sw = win[n ^ 1];
    const auto sk = static_cast<uint64_t>(keys[sw]);
    // The sibling wins an earlier key, and an equal one if it is the left
    // child (n odd): its leaves come first in the order of ties. (Keys are
    // at most kNever = 2^63 - 1: k + 1 does not wrap.) GCC compiles this to
    // a branch; two cmovs written out measured 2-3 % slower on the stars
    // (the outcomes there follow a pattern the predictor learns) and no
    // faster on the 1024-host fat-tree (bound by its cache misses).
    if (sk < k + (n & 1)) {
      w = sw;
      k = sk;
    }
    win[n >> 1] = w;
  }
}

inline void Simulator::deliver(Partition& P, NodeId to, Packet* p) {
  ++P.hops;
  const Header& h = p->h;
  uint64_t& d = node_digest_[to];
  d = (d ^ static_cast<uint64_t>(P.now) ^ (static_cast<uint64_t>(h.psn) << 16) ^ (static_cast<uint64_t>(h.type) << 8) ^
       h.rank) *
      0x100000001b3ULL;
  if (trace_) trace_sink(P).push_back({P.now, to, false, h.type, h.job, h.flags, h.psn, h.src, h.dst, h.rank, h.bitmap, 0});
  P.fx.current = to;
  nodes_[to]->on_packet(p, P.now, P.fx);
}

void Simulator::call(NodeId n, Time at, const std::function<void(Effects&)>& f) {
  // The clock every partition reads (timers at, queues' backlog): as one
  // queue's would be, the latest of any event so far and `at`.
  const Time t = std::max(now(), at);
  for (auto& part : parts_) part->now = t;
  if (!local(n)) return;  // its process calls it
  ensure_trees();
  Partition& P = part_of(n);
  P.fx.current = n;
  f(P.fx);
}

void Simulator::start_nodes() {
  started_ = true;
  for (auto& n : nodes_) {
    if (!local(n->id())) continue;
    Partition& P = part_of(n->id());
    P.fx.current = n->id();
    n->on_start(P.now, P.fx);
  }
}

// Deliveries at one picosecond off the leaves first, first + 1, ... (a
// run of equal keys: the same order as one at a time, since ties go in
// leaf order), each re-keyed without its pass; then the tree's nodes
// above the run once, bottom up. A star at line rate delivers every
// host's packet at once, so most passes would climb the same nodes.
// The run stops at a leaf with a later key or when a heap event falls on
// this picosecond (a timer a delivery set for now): the tree then takes
// over, repaired. No delivery's send lands in this picosecond (a packet
// takes at least 1 ps to serialize: min_packet_bytes >= 1), so a leaf's
// key within the run stays as set; a send onto an empty wire re-keys its
// link with a pass, which may be a leaf the run has passed and may leave
// the run's ancestors stale: the repair recomputes every ancestor of the
// run from children that are right (below them no key changed without
// its pass). (A delivery that throws ends the run before the repair:
// run() is not called again after it throws.)
void Simulator::run_same_time(Partition& P, uint32_t first, Link& l0, Packet* p0) {
  const Time t = P.now;
  set_leaf(P, first, l0);
  __builtin_prefetch(P.head[first + 1], 0, 3);
  deliver(P, l0.to, p0);
  uint32_t end = first + 1;  // leaves [first, end) re-keyed
  while (end < P.leaves && P.key[end] == t && (P.heap.empty() || P.heap[0].t > t)) {
    Link& l = links_[P.link_at[end]];
    Packet* p = l.wire.front();
    l.wire.pop();
    set_leaf(P, end, l);
    if (end + 1 < P.leaves) __builtin_prefetch(P.head[end + 1], 0, 3);
    ++P.events;
    deliver(P, l.to, p);
    ++end;
  }
  const Time* keys = P.key.data();
  uint32_t* win = P.win.data();
  for (size_t lo = (P.leaves + first) >> 1, hi = (P.leaves + end - 1) >> 1; lo >= 1; lo >>= 1, hi >>= 1) {
    for (size_t n = lo; n <= hi; ++n) {
      const uint32_t a = win[2 * n], b = win[2 * n + 1];
      win[n] = keys[b] < keys[a] ? b : a;  // the left child wins an equal key
    }
  }
}

void Simulator::run_window(Partition& P, Time limit, Time until) {
  const Time stop = until < limit ? until + 1 : limit;  // (until < kNever there)
  for (;;) {
    const uint32_t leaf = P.win[1];
    const Time lt = P.key[leaf];
    const bool have_link = lt != kNever;
    const bool have_heap = !P.heap.empty();
    if (!have_link && !have_heap) break;
    const uint32_t li = have_link ? P.link_at[leaf] : 0;
    // (Times first: the tie is read only when a delivery and a heap event
    // fall on one picosecond.)
    const bool link_first =
        have_link && (!have_heap || lt < P.heap[0].t ||
                      (lt == P.heap[0].t && event_tie(links_[li].to, 0, li) < P.heap[0].tie));
    const Time t = link_first ? lt : P.heap[0].t;
    if (t >= stop) break;
    P.now = t;
    ++P.events;
    if (link_first) {
      Link& l = links_[li];
      Packet* p = l.wire.front();
      l.wire.pop();  // (prefetches the link's next packet)
      if (leaf + 1 < P.leaves && P.key[leaf + 1] == t) [[unlikely]] {
        run_same_time(P, leaf, l, p);
        continue;
      }
      key_leaf(P, leaf, l);
      // The next link delivery's packet header, while this one is handled
      // (the prefetch at pop() is thousands of events early: its line may
      // be gone by now). Empty links hold nullptr, which a prefetch ignores.
      __builtin_prefetch(P.head[P.win[1]], 0, 3);
      deliver(P, l.to, p);
      continue;
    }
    const Event e = pop(P);
    if (e.kind == EvKind::Deliver) {
      deliver(P, static_cast<NodeId>(e.node), e.pkt);
    } else {
      uint64_t& d = node_digest_[e.node];
      d = (d ^ static_cast<uint64_t>(e.t) ^ e.token) * 0x100000001b3ULL;
      if (trace_)
        trace_sink(P).push_back({P.now, static_cast<NodeId>(e.node), true, PktType{}, 0, 0, 0, kNoNode, kNoNode, 0, 0, e.token});
      P.fx.current = static_cast<NodeId>(e.node);
      nodes_[e.node]->on_timer(e.token, P.now, P.fx);
    }
  }
}

Time Simulator::next_time(const Partition& P) const {
  const Time link = P.key[P.win[1]];
  return P.heap.empty() ? link : std::min(link, P.heap[0].t);
}

void Simulator::set_partitions(const std::vector<uint16_t>& part_of, Ranks* ranks) {
  if (started_) throw std::logic_error("set_partitions: the run has started");
  if (part_of.size() != nodes_.size())
    throw std::invalid_argument(fmt::format("set_partitions: {} entries for {} nodes", part_of.size(), nodes_.size()));
  for (const auto& part : parts_) {
    if (!part->heap.empty()) throw std::logic_error("set_partitions: events are already scheduled");
    for (const auto& box : part->outbox)
      if (!box.empty()) throw std::logic_error("set_partitions: packets are already posted");
    if (part->index > 0 && part->pool.allocated() > 0)
      throw std::logic_error("set_partitions: a partition's packets are in use");  // its pool goes
  }
  for (const auto& l : links_)
    if (!l.wire.empty()) throw std::logic_error("set_partitions: packets are already in flight");
  const size_t n = part_of.empty() ? 1 : size_t{*std::max_element(part_of.begin(), part_of.end())} + 1;
  if (n > kMaxPartitions)
    throw std::invalid_argument(fmt::format("set_partitions: {} partitions, at most {}", n, kMaxPartitions));
  const unsigned R = ranks ? ranks->size() : 1;
  if (R > n)
    throw std::invalid_argument(fmt::format("set_partitions: {} partitions for {} processes (at least one each)", n, R));
  if (R > 1 && trace_) throw std::logic_error("set_partitions: a trace is kept in one process, not split over ranks");
  node_part_ = part_of;
  ranks_ = R > 1 ? ranks : nullptr;
  parts_.resize(1);
  for (size_t i = 1; i < n; ++i) parts_.push_back(std::make_unique<Partition>(*this, payload_capacity_, static_cast<uint16_t>(i)));
  part_rank_.assign(n, 0);
  local_.clear();
  for (size_t i = 0; i < n; ++i) {
    part_rank_[i] = static_cast<uint16_t>(rank_of_partition(i, n, R));
    if (!ranks_ || part_rank_[i] == ranks_->rank()) local_.push_back(parts_[i].get());
    parts_[i]->outbox.assign(n, {});
  }
  for (Link& l : links_) l.slow = faulty(l) || l.watch >= 0 || node_part_[l.from] != node_part_[l.to];
  build_trees();
  // A packet sent at t into a link between partitions arrives at or after
  // t + its serialization (at least a minimum frame's, rounded up: 1 ps or
  // more) + the link's delay (>= 0): the window is at least 1 ps.
  lookahead_ = kNever;
  for (const Link& l : links_)
    if (node_part_[l.from] != node_part_[l.to])
      lookahead_ = std::min(lookahead_, l.delay + serialization_time(std::max(min_packet_bytes_, 1u), l.bps));
}

void Simulator::balance_pools() {
  // Packets freed in another partition than the one that allocated them
  // gather there: the free ones go back where they run short.
  size_t total = 0;
  for (const Partition* part : local_) total += part->pool.free_count();
  const size_t mean = total / local_.size(), slack = 4096;
  for (Partition* from : local_) {
    if (from->pool.free_count() <= mean + slack) continue;
    Partition* to = *std::min_element(local_.begin(), local_.end(), [](const Partition* a, const Partition* b) {
      return a->pool.free_count() < b->pool.free_count();
    });
    from->pool.give_free(to->pool, from->pool.free_count() - mean);
  }
}

void Simulator::run_partitioned(Time until) {
  const double cpu0 = thread_cpu_seconds();
  const size_t n = local_.size();
  std::vector<Time> next(n, kNever);
  bool done = false;
  Time stop = kNever;
  // A node that throws (a failed check, bad_alloc) stops every partition at
  // the next plan, in every process; the first exception is rethrown once
  // the threads joined (another process's, as its text).
  std::mutex failed_mu;
  std::exception_ptr failed;
  std::string remote_failure;
  auto fail = [&] {
    std::lock_guard lock(failed_mu);
    if (!failed) failed = std::current_exception();
  };
  try {
    if (!started_) start_nodes();
  } catch (...) {
    fail();
  }
  // The other processes' posts since the last run (start, set-up, call()).
  if (ranks_) try {
      trade_posts();
    } catch (...) {
      fail();
    }
  // Once every partition has taken what was posted to it and named its next
  // event: the window runs from the earliest of those for one lookahead.
  auto plan = [&]() noexcept {
    Time m = *std::min_element(next.begin(), next.end());
    if (ranks_) try {
        // Every process's earliest event and failure (a flag, then its
        // text): all decide alike.
        std::string mine;
        put_bytes(mine, m);
        put_bytes(mine, static_cast<uint8_t>(failed != nullptr));
        if (failed) try {
            std::rethrow_exception(failed);
          } catch (const std::exception& e) {
            mine += e.what();
          } catch (...) {
            mine += "an exception that is not a std::exception";
          }
        const std::vector<std::string> all = ranks_->share(mine, "window");
        for (unsigned r = 0; r < all.size(); ++r) {
          if (r == ranks_->rank()) continue;
          Reader rd{all[r]};
          m = std::min(m, rd.get<Time>());
          if (rd.get<uint8_t>() && remote_failure.empty())
            remote_failure = fmt::format("rank {}: {}", r, all[r].substr(rd.at));
        }
      } catch (...) {
        fail();
      }
    if (failed || !remote_failure.empty() || m == kNever || m > until) {
      done = true;
      return;
    }
    ++windows_;
    stop = m > kNever - lookahead_ ? kNever : m + lookahead_;
    balance_pools();
  };
  // Once every partition ran the window: posts to other processes go.
  auto ran_all = [&]() noexcept {
    if (ranks_) try {
        trade_posts();
      } catch (...) {
        fail();
      }
  };
  // Thread j runs partitions j, j + T, ... one after another.
  const size_t T = threads_ ? std::min<size_t>(threads_, n) : n;
  std::barrier planned(static_cast<std::ptrdiff_t>(T), plan);
  std::barrier ran(static_cast<std::ptrdiff_t>(T), ran_all);
  auto work = [&](size_t j) {
    for (;;) {
      for (size_t i = j; i < n; i += T) try {
          take_posted(*local_[i]);
          next[i] = next_time(*local_[i]);
        } catch (...) {
          fail();
        }
      planned.arrive_and_wait();
      if (done) return;
      for (size_t i = j; i < n; i += T) {
        Partition& P = *local_[i];
        const auto t0 = std::chrono::steady_clock::now();
        try {
          run_window(P, stop, until);
        } catch (...) {
          fail();
        }
        P.busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      ran.arrive_and_wait();
    }
  };
  std::vector<double> cpu(T, 0);
  {
    std::vector<std::jthread> threads;
    for (size_t j = 1; j < T; ++j)
      threads.emplace_back([&, j] {
        const double c0 = thread_cpu_seconds();
        work(j);
        cpu[j] = thread_cpu_seconds() - c0;
      });
    work(0);
  }
  for (size_t j = 1; j < T; ++j) helper_cpu_s_ += cpu[j];
  if (failed) std::rethrow_exception(failed);
  if (!remote_failure.empty()) throw std::runtime_error(remote_failure);
  if (ranks_) {
    double mine = thread_cpu_seconds() - cpu0;
    for (size_t j = 1; j < T; ++j) mine += cpu[j];
    share_totals(mine);
  }
  if (trace_) {  // each node's records are in one partition's, in its order
    const size_t first = trace_->size();
    for (auto& part : parts_) {
      trace_->insert(trace_->end(), part->trace.begin(), part->trace.end());
      part->trace.clear();
    }
    std::stable_sort(trace_->begin() + static_cast<std::ptrdiff_t>(first), trace_->end(),
                     [](const TraceRecord& a, const TraceRecord& b) { return a.t < b.t || (a.t == b.t && a.node < b.node); });
  }
  if (until != kNever && now() < until && idle())
    for (auto& part : parts_) part->now = until;
}

void Simulator::run(Time until) {
  ensure_trees();
  if (parts_.size() > 1) return run_partitioned(until);
  if (!started_) start_nodes();
  Partition& P = *parts_.front();
  run_window(P, kNever, until);
  if (until != kNever && P.now < until && P.heap.empty()) P.now = until;
}

}  // namespace ina::sim
