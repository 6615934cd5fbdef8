#include "sim/engine.hpp"

#include <cmath>
#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "core/ecmp.hpp"
#include "proto/ecn.hpp"

#include <fmt/format.h>

namespace ina::sim {

constexpr uint32_t kNoLink = UINT32_MAX;

Packet* SimEffects::alloc() { return sim_.pool().get(); }
void SimEffects::send(Packet* p) { sim_.route(current, p); }
void SimEffects::free(Packet* p) { sim_.pool().put(p); }
void SimEffects::set_timer(Time at, uint64_t token) { sim_.schedule_timer(current, at, token); }
bool SimEffects::multicast(Packet* p) { return sim_.multicast_from(current, p); }

void Simulator::set_multicast_group(uint16_t group, std::vector<NodeId> members) {
  if (members.size() > kRankBits)
    throw std::invalid_argument(fmt::format("multicast groups hold at most {} members, got {}", kRankBits, members.size()));
  if (groups_.size() <= group) groups_.resize(group + 1);
  groups_[group] = std::move(members);
  mcast_.clear();  // the group's splits are stale
}

Simulator::McastSplit& Simulator::mcast_split(uint16_t group, uint32_t row) {
  if (mcast_.empty()) mcast_.resize(groups_.size() * route_rows_);
  return mcast_[group * route_rows_ + row];
}

bool Simulator::multicast_from(NodeId from, Packet* p) {
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
    Packet* c = b + 1 == branches.size() ? p : pool_.clone(*p);
    const auto [li, mask] = branches[b];
    const NodeId to = links_[li].to;
    if (!is_switch_[to]) {  // the last hop: a unicast copy for that member
      c->h.dst = to;
      c->mcast = {};
    } else {
      c->h.dst = kMulticast;
      c->mcast = mask;
    }
    transmit(li, c);
  }
  if (branches.empty()) pool_.put(p);
  return true;
}

Simulator::Simulator(uint64_t seed, uint16_t payload_capacity, uint32_t header_bytes, uint32_t min_packet_bytes)
    : pool_(payload_capacity), header_bytes_(header_bytes), min_packet_bytes_(min_packet_bytes), seed_(seed), fx_(*this) {
  heap_.reserve(1 << 16);
}

Simulator::~Simulator() {
  // Return packets still in flight so the pool's accounting stays meaningful.
  for (auto& e : heap_)
    if (e.kind == EvKind::Deliver) pool_.put(e.pkt);
  for (auto& l : links_)
    while (!l.wire.empty()) {
      pool_.put(l.wire.front());
      l.wire.pop();
    }
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
  return id;
}

uint32_t Simulator::connect(NodeId a, NodeId b, const LinkParams& ab, const LinkParams& ba) {
  if (a >= nodes_.size() || b >= nodes_.size()) throw std::out_of_range("connect: unknown node");
  auto make = [&](NodeId from, NodeId to, const LinkParams& p) {
    if (!(p.gbps > 0)) throw std::invalid_argument("link bandwidth must be > 0");
    Link l;
    l.from = from;
    l.to = to;
    l.p = p;
    l.p.delay += (is_switch_[from] ? 0 : host_delay_) + (is_switch_[to] ? 0 : host_delay_);
    l.bps = static_cast<uint64_t>(std::llround(p.gbps * 1e9));
    l.queue_time = serialization_time(p.queue_bytes, l.bps);
    // ECN marks at switch egress ports; a host's NIC queue only with set_host_ecn(true).
    l.ecn_time = p.ecn_bytes && (is_switch_[from] || host_ecn_) ? serialization_time(p.ecn_bytes, l.bps) : kNever;
    l.rng.reseed(mix(seed_, 0x11 + links_.size()));
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
  build_tree();
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
  route_.assign(n * rows, kNoLink);
  mcast_.clear();
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
    uint32_t* column = &route_[d * rows];
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
  for (NodeId h = 0; h < n; ++h) {
    const uint32_t up = host_link_[h];
    if (up == kNoLink) continue;
    const NodeId t = links_[up].to;
    if (!is_switch_[t]) continue;  // a host-to-host link: no switch routes to h
    std::copy_n(&route_[t * rows], rows, &route_[h * rows]);
    route_[h * rows + row_[t]] = up ^ 1;  // the twin: t -> h
  }
}

std::span<const uint32_t> Simulator::next_hops(NodeId sw, NodeId dst) const {
  if (sw >= row_.size() || row_[sw] == kNoRow || dst >= route_n_) return {};
  const uint32_t& e = route_[dst * route_rows_ + row_[sw]];
  if (e == kNoLink) return {};
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
// (t, seq) order; seq is unique, so this is a strict total order.
inline bool before(const Event& a, const Event& b) {
  return a.t < b.t || (a.t == b.t && a.seq < b.seq);
}
}  // namespace

void Simulator::push(const Event& e) {
  // 4-ary min-heap on (t, seq).
  heap_.push_back(e);
  size_t i = heap_.size() - 1;
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    const Event& p = heap_[parent];
    if (before(p, e)) break;
    heap_[i] = p;
    i = parent;
  }
  heap_[i] = e;
}

Event Simulator::pop() {
  const Event top = heap_[0];
  const Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n == 0) return top;
  Event* h = heap_.data();
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

void Simulator::schedule_timer(NodeId n, Time at, uint64_t token) {
  Event e;
  e.t = at < now_ ? now_ : at;
  e.seq = seq_++;
  e.token = token;
  e.node = n;
  e.kind = EvKind::Timer;
  push(e);
}

void Simulator::route(NodeId from, Packet* p) {
  p->h.src = p->h.src == kNoNode ? from : p->h.src;
  uint32_t li = kNoLink;
  const uint32_t row = row_[from];
  if (row == kNoRow) {  // a host (or a switch before build_routes, whose host_link_ is kNoLink)
    li = host_link_[from];
  } else if (p->h.dst < route_n_) {
    li = route_[p->h.dst * route_rows_ + row];
    if (li >= kManyHops && li != kNoLink) {  // equal-cost candidates: one per flow
      const uint32_t* c = &ecmp_[li & ~kManyHops];
      li = c[1 + ecmp_index(p->h.src, p->h.dst, from, c[0])];
    }
  }
  if (li == kNoLink) {
    ++misrouted_;
    pool_.put(p);
    return;
  }
  transmit(li, p);
}

// The link's queue: drop-tail above queue_time of backlog, ECN marking above
// ecn_time; else the packet is serialized once the link is free. Returns its
// serialization time, or -1 if it was dropped (and freed).
inline Time Simulator::admit(Link& l, Packet* p) {
  const Time backlog = l.busy_until > now_ ? l.busy_until - now_ : 0;
  if (backlog > l.queue_time) {
    ++l.st.drop_queue;
    pool_.put(p);
    return -1;
  }
  if (ecn_mark(p->h, backlog > l.ecn_time)) ++l.st.ecn_marked;  // every packet type (proto/ecn.hpp)
  const uint32_t bytes = wire_bytes(*p);
  if (bytes != l.ser_bytes) {  // a 128-bit division; packets of a link mostly have one size
    l.ser_bytes = bytes;
    l.ser_time = serialization_time(bytes, l.bps);
  }
  l.busy_until = (backlog ? l.busy_until : now_) + l.ser_time;
  l.st.busy += l.ser_time;
  return l.ser_time;
}

void Simulator::transmit(uint32_t link_id, Packet* p) {
  Link& l = links_[link_id];
  if (l.p.loss > 0 || l.p.dup > 0 || l.p.reorder > 0) [[unlikely]] {
    transmit_faulty(link_id, p);
    return;
  }
  // A link without loss, duplication or reordering (no random draw either
  // way): transmit_faulty()'s steps without those, in one function.
  if (admit(l, p) < 0) return;
  ++l.st.packets;
  l.st.bytes += l.ser_bytes;  // (this packet's size, after admit)
  const bool was_empty = l.wire.empty();
  l.wire.push(l.busy_until + l.p.delay, p);
  if (was_empty) key_link(link_id);
}

void Simulator::transmit_faulty(uint32_t link_id, Packet* p) {
  Link& l = links_[link_id];
  if (l.p.loss > 0 && l.rng.bernoulli(l.p.loss)) {
    ++l.st.drop_loss;
    if (loss_observer_) loss_observer_(*p);
    pool_.put(p);
    return;
  }
  const Time ser = admit(l, p);
  if (ser < 0) return;
  const Time arrival = l.busy_until + l.p.delay;
  Packet* copy = nullptr;
  if (l.p.dup > 0 && l.rng.bernoulli(l.p.dup)) {
    ++l.st.duplicated;
    copy = pool_.clone(*p);
    copy->mcast = p->mcast;  // a multicast copy serves the same members (0 would mean all of them)
    l.busy_until += ser;  // the copy takes the wire too
    l.st.busy += ser;
  }
  if (l.p.reorder > 0 && l.rng.bernoulli(l.p.reorder)) {
    ++l.st.reordered;
    const Time extra = static_cast<Time>(l.rng.uniform() * static_cast<double>(l.p.reorder_delay)) + 1;
    enqueue_on_wire(link_id, p, arrival + extra, false);
  } else {
    enqueue_on_wire(link_id, p, arrival, true);
  }
  if (copy) enqueue_on_wire(link_id, copy, l.busy_until + l.p.delay, true);
}

void Simulator::enqueue_on_wire(uint32_t link_id, Packet* p, Time arrival, bool in_order) {
  Link& l = links_[link_id];
  ++l.st.packets;
  l.st.bytes += wire_bytes(*p);
  if (!in_order) {
    Event e;
    e.t = arrival;
    e.seq = seq_++;
    e.pkt = p;
    e.node = l.to;
    e.kind = EvKind::Deliver;
    push(e);
    return;
  }
  const bool was_empty = l.wire.empty();
  l.wire.push(arrival, p);
  if (was_empty) key_link(link_id);
}

void Simulator::build_tree() {
  leaves_ = 1;
  while (leaves_ < links_.size()) leaves_ *= 2;
  leaf_.assign(leaves_, LeafKey{});
  win_.assign(2 * leaves_, 0);
  for (size_t l = 0; l < leaves_; ++l) win_[leaves_ + l] = static_cast<uint32_t>(l);
  for (size_t n = leaves_ - 1; n >= 1; --n) win_[n] = win_[2 * n];  // all empty: any is the least
  for (size_t l = 0; l < links_.size(); ++l)
    if (!links_[l].wire.empty()) key_link(static_cast<uint32_t>(l));
}

namespace {
// (t, seq) as one unsigned 128-bit number (t >= 0): one compare, no branch.
inline unsigned __int128 order_key(Time t, uint64_t seq) {
  return static_cast<unsigned __int128>(static_cast<uint64_t>(t)) << 64 | seq;
}
}  // namespace

void Simulator::key_link(uint32_t link_id) { key_link_inline(link_id); }

inline void Simulator::key_link_inline(uint32_t link_id) {
  const Link& l = links_[link_id];
  LeafKey& leaf = leaf_[link_id];
  if (l.wire.empty()) {
    leaf = LeafKey{};
  } else {
    leaf.t = l.wire.front_time();
    leaf.seq = seq_++;
  }
  const LeafKey* keys = leaf_.data();
  uint32_t* win = win_.data();
  uint32_t w = link_id;
  unsigned __int128 k = order_key(leaf.t, leaf.seq);
  for (size_t n = leaves_ + link_id; n > 1; n >>= 1) {
    const uint32_t sw = win[n ^ 1];
    const unsigned __int128 sk = order_key(keys[sw].t, keys[sw].seq);
    // Keys are unique (only empty links' tie). Either way is as likely: the
    // hint makes GCC select without a branch (cmov), as one would mispredict.
    if (__builtin_expect_with_probability(sk < k, 1, 0.5)) {
      w = sw;
      k = sk;
    }
    win[n >> 1] = w;
  }
}

inline void Simulator::deliver(NodeId to, Packet* p) {
  ++hops_;
  const Header& h = p->h;
  digest_ = (digest_ ^ static_cast<uint64_t>(now_) ^ (static_cast<uint64_t>(to) << 48) ^
             (static_cast<uint64_t>(h.psn) << 16) ^ (static_cast<uint64_t>(h.type) << 8) ^ h.rank) *
            0x100000001b3ULL;
  if (trace_) trace_->push_back({now_, to, false, h.type, h.job, h.flags, h.psn, h.src, h.dst, h.rank, h.bitmap, 0});
  fx_.current = to;
  nodes_[to]->on_packet(p, now_, fx_);
}

void Simulator::call(NodeId n, Time at, const std::function<void(Effects&)>& f) {
  now_ = std::max(now_, at);
  fx_.current = n;
  f(fx_);
}

void Simulator::run(Time until) {
  if (!started_) {
    started_ = true;
    for (auto& n : nodes_) {
      fx_.current = n->id();
      n->on_start(now_, fx_);
    }
  }
  for (;;) {
    const uint32_t li = win_[1];
    const LeafKey& top = leaf_[li];
    const bool have_link = top.t != kNever;
    const bool have_heap = !heap_.empty();
    if (!have_link && !have_heap) break;
    const bool link_first = have_link && (!have_heap || order_key(top.t, top.seq) < order_key(heap_[0].t, heap_[0].seq));
    const Time t = link_first ? top.t : heap_[0].t;
    if (t > until) break;
    now_ = t;
    ++events_;
    if (link_first) {
      Link& l = links_[li];
      Packet* p = l.wire.front();
      l.wire.pop();  // (prefetches the link's next packet)
      key_link_inline(li);
      deliver(l.to, p);
      continue;
    }
    const Event e = pop();
    if (e.kind == EvKind::Deliver) {
      deliver(static_cast<NodeId>(e.node), e.pkt);
    } else {
      digest_ = (digest_ ^ static_cast<uint64_t>(e.t) ^ e.token ^ (static_cast<uint64_t>(e.node) << 48)) * 0x100000001b3ULL;
      if (trace_)
        trace_->push_back({now_, static_cast<NodeId>(e.node), true, PktType{}, 0, 0, 0, kNoNode, kNoNode, 0, 0, e.token});
      fx_.current = static_cast<NodeId>(e.node);
      nodes_[e.node]->on_timer(e.token, now_, fx_);
    }
  }
  if (until != kNever && now_ < until && heap_.empty()) now_ = until;
}

}  // namespace ina::sim
