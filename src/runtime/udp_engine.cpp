#include "runtime/udp_engine.hpp"

#include <algorithm>

#include <linux/sock_diag.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "proto/ecn.hpp"
#include "wire/patch.hpp"

namespace ina::rt {

namespace {
constexpr int kMaxRxRounds = 16;  // recvmmsg batches per readiness event, so timers stay punctual
constexpr uint64_t kSocketTag = ~0ULL;
// Segmentation offload: datagrams per segmented send (the kernel's
// UDP_MAX_SEGMENTS) and bytes per segmented send (below the 64 KB IPv4 limit).
constexpr size_t kMaxSegments = 64;
constexpr size_t kMaxGsoBytes = 65000;
constexpr size_t kMaxTxGroups = 256;  // destinations grouped per send round

bool same(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

uint64_t addr_key(const sockaddr_in& a) { return (uint64_t{a.sin_addr.s_addr} << 16) | a.sin_port; }
}  // namespace

void FaultConfig::validate() const {
  auto rate = [](double v, const char* name) {
    if (!(v >= 0 && v < 1)) throw InputError(fmt::format("fault injection: {} must be in [0, 1), got {}", name, v));
  };
  rate(loss, "loss");
  rate(duplicate, "duplicate");
  rate(reorder, "reorder");
  if (reorder_delay < 0) throw InputError("fault injection: reorder delay must be >= 0");
  if (delay < 0) throw InputError("fault injection: delay must be >= 0");
}

nlohmann::json FaultConfig::to_json() const {
  return {{"loss", loss}, {"duplicate", duplicate}, {"reorder", reorder}, {"reorder_us", to_us(reorder_delay)},
          {"delay_us", to_us(delay)}, {"delay_node", delay_node == kNoNode ? -1 : int{delay_node}}, {"seed", seed}};
}

nlohmann::json EngineStats::to_json() const {
  nlohmann::json errs = nlohmann::json::object();
  for (size_t i = 1; i < decode_errors.size(); ++i)
    if (decode_errors[i]) errs[to_string(static_cast<DecodeError>(i))] = decode_errors[i];
  return {{"rx_datagrams", rx_datagrams}, {"rx_bytes", rx_bytes}, {"tx_datagrams", tx_datagrams},
          {"tx_bytes", tx_bytes}, {"rx_malformed", rx_malformed}, {"rx_foreign", rx_foreign},
          {"rx_unattributed", rx_unattributed}, {"rx_late", rx_late},
          {"rx_unknown_dst", rx_unknown_dst}, {"tx_unroutable", tx_unroutable}, {"tx_overflow", tx_overflow},
          {"tx_errors", tx_errors}, {"fault_lost", fault_lost}, {"fault_duplicated", fault_duplicated},
          {"fault_reordered", fault_reordered}, {"fault_delayed", fault_delayed}, {"ecn_marked", ecn_marked},
          {"timers_fired", timers_fired}, {"loop_iterations", loop_iterations}, {"tx_messages", tx_messages},
          {"tx_gso_refused", tx_gso_refused}, {"rx_gro_batches", rx_gro_batches}, {"rx_truncated", rx_truncated},
          {"tx_shared_copies", tx_shared_copies}, {"rx_bad_tag", rx_bad_tag}, {"tx_no_key", tx_no_key}, {"tx_tagged", tx_tagged},
          {"decode_errors", errs}};
}

UdpEngine::UdpEngine(const EngineConfig& cfg, UniqueFd bound)
    : cfg_(cfg), epoch_(monotonic_now()),
      // Slabs of about 1 MB whatever the payload (at least 16 packets).
      pool_(cfg.payload_values, std::max<size_t>(16, (1u << 20) / (sizeof(Packet) + 4u * cfg.payload_values))),
      fault_rng_(mix(cfg.faults.seed, 0xFA17)) {
  if (cfg.payload_values == 0) throw RuntimeError("engine: payload_values must be > 0");
  if (cfg.batch == 0 || cfg.batch > 1024) throw RuntimeError("engine: batch must be in 1..1024");
  cfg.faults.validate();
  sock_ = bound ? std::move(bound) : bind_udp(cfg.bind, cfg.socket_buffer_bytes);
  local_ = local_endpoint(sock_.get());
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw RuntimeError(fmt::format("epoll_create1: {}", errno_text(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kSocketTag;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sock_.get(), &ev) != 0)
    throw RuntimeError(fmt::format("epoll_ctl: {}", errno_text(errno)));

  // One extra int32 of room: a datagram longer than the largest valid one
  // arrives whole enough to be recognised (decode reports its length).
  // With datagram tags, room for the tag too (a multicast copy's slot holds
  // its header and its own tag; the payload is the first copy's).
  tag_bytes_ = cfg.datagram_tags ? kTagBytes : 0;
  slot_bytes_ = kHeaderBytes + 4u * cfg.payload_values + 4u + tag_bytes_;
  rx_slot_bytes_ = slot_bytes_;
  if (cfg.offload) {
    const int on = 1;
    gro_ = setsockopt(sock_.get(), SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
    if (gro_) rx_slot_bytes_ = std::max(slot_bytes_, cfg.gro_buffer_bytes);
    gso_max_ = kMaxGsoBytes / 2;  // at least two datagrams per segmented send
  }
  const unsigned b = cfg.batch;
  rxbuf_.reset(new std::byte[rx_slot_bytes_ * b]);
  rxaddr_.resize(b);
  rxmsg_.resize(b);
  rxiov_.resize(b);
  rxctl_.resize(b);
  for (unsigned i = 0; i < b; ++i) {
    rxiov_[i] = {rxbuf_.get() + i * rx_slot_bytes_, rx_slot_bytes_};
    std::memset(&rxmsg_[i], 0, sizeof rxmsg_[i]);
  }
  txmsg_.resize(b);
  txiov_.resize(3 * b * (cfg.offload ? kMaxSegments : 1));
  txitem_.resize(b * (cfg.offload ? kMaxSegments : 1));
  txfirst_.resize(b + 1);
  txctl_.resize(b);
}

UdpEngine::~UdpEngine() {
  for (auto& [n, p] : internal_) pool_.put(p);
  internal_.clear();
  flush_tx();
  while (!delayed_.empty()) {
    pool_.put(delayed_.top().p);
    delayed_.pop();
  }
}

void UdpEngine::add_node(Node& n) {
  if (n.id() == kNoNode) throw RuntimeError("engine: a node needs an id before it is added");
  if (cfg_.mode == EngineMode::Router && !nodes_.empty())
    throw RuntimeError("engine: a router engine hosts exactly one switch node");
  nodes_.push_back(&n);
  if (started_) invoke(n, [&](Time now, Effects& fx) { n.on_start(now, fx); });
}

void UdpEngine::attach(Node& n) {
  if (cfg_.mode != EngineMode::Router) throw RuntimeError("engine: only a router engine has an internal port");
  if (n.id() == kNoNode) throw RuntimeError("engine: a node needs an id before it is attached");
  if (attached_) throw RuntimeError("engine: a node is already attached to the internal port");
  attached_ = &n;
  if (started_) invoke(n, [&](Time now, Effects& fx) { n.on_start(now, fx); });
}

void UdpEngine::deliver_local() {
  while (!internal_.empty()) {
    auto [n, p] = internal_.front();
    internal_.pop_front();
    current_ = n;
    n->on_packet(p, now_, *this);
    current_ = nullptr;
  }
}

void UdpEngine::set_route(NodeId id, const Endpoint& to) {
  if (id >= kMulticast) throw RuntimeError(fmt::format("engine: node id {} cannot be routed", id));
  if (routes_.size() <= id) routes_.resize(id + 1);
  if (routes_[id].valid || routes_[id].retired)
    if (auto it = member_addrs_.find(addr_key(routes_[id].sa)); it != member_addrs_.end() && --it->second == 0)
      member_addrs_.erase(it);
  routes_[id] = {to.sa, true};
  ++member_addrs_[addr_key(to.sa)];
}

void UdpEngine::add_relay(const Endpoint& from) {
  relays_.push_back(from.sa);
  ++member_addrs_[addr_key(from.sa)];
}

// A route's address stays a member's after clear_route (its late packets are a
// finished job's, not noise); set_route over the id replaces it.
bool UdpEngine::from_member(const sockaddr_in& from) const {
  if (cfg_.mode == EngineMode::Router) return member_addrs_.count(addr_key(from)) != 0;
  return same(from, cfg_.gateway.sa);
}

void UdpEngine::set_datagram_key(uint16_t job, const DatagramKey& k) { tag_keys_[job] = k; }

void UdpEngine::clear_datagram_key(uint16_t job) { tag_keys_.erase(job); }

const DatagramKey* UdpEngine::key_of(uint16_t job) const {
  const auto it = tag_keys_.find(job);
  return it == tag_keys_.end() ? nullptr : &it->second;
}

void UdpEngine::clear_route(NodeId id) {
  if (id < routes_.size() && routes_[id].valid) routes_[id] = Route{routes_[id].sa, false, true};
}

void UdpEngine::set_group(uint16_t job, std::vector<NodeId> members) {
  if (cfg_.mode != EngineMode::Router) throw RuntimeError("engine: only a router engine has multicast groups");
  if (members.size() > kMaxWireWorkers)
    throw RuntimeError(fmt::format("engine: a multicast group holds at most {} members, got {}", kMaxWireWorkers, members.size()));
  groups_[job] = std::move(members);
}

void UdpEngine::clear_group(uint16_t job) { groups_.erase(job); }

bool UdpEngine::multicast(Packet* p) {
  if (cfg_.faults.any() || (attached_ && current_ == attached_)) return false;
  const auto g = groups_.find(p->h.job);
  if (g == groups_.end() || g->second.empty()) return false;
  const std::vector<NodeId>& members = g->second;
  if (p->h.src == kNoNode && current_) p->h.src = current_->id();
  const RankBits pending = p->mcast ? p->mcast : RankBits::first(static_cast<unsigned>(members.size()));
  if (tag_bytes_ && !key_of(p->h.job)) {
    for (unsigned r = 0; r < members.size(); ++r) st_.tx_no_key += pending.test(r);
    pool_.put(p);
    return true;
  }
  long first = -1;
  bool full = false;
  for (unsigned r = 0; r < members.size(); ++r) {
    if (!pending.test(r)) continue;
    const NodeId d = members[r];
    if (d >= routes_.size() || !routes_[d].valid) {
      ++st_.tx_unroutable;
    } else if (full) {
      ++st_.tx_overflow;  // the queue was full for the first copy: so it is for this one
    } else if (first < 0) {
      p->h.dst = d;
      first = enqueue_tx(*p, routes_[d].sa, false);
      full = first < 0;
    } else {
      enqueue_copy(static_cast<size_t>(first), d, routes_[d].sa);
    }
  }
  pool_.put(p);
  if (txq_.size() - tx_head_ >= cfg_.batch && !tx_blocked_) flush_tx();
  return true;
}

void UdpEngine::watch(int fd, uint32_t events, FdHandler handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = static_cast<uint64_t>(fd);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    throw RuntimeError(fmt::format("epoll_ctl(add {}): {}", fd, errno_text(errno)));
  watches_[fd] = std::make_shared<FdHandler>(std::move(handler));
}

void UdpEngine::rewatch(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = static_cast<uint64_t>(fd);
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void UdpEngine::unwatch(int fd) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  watches_.erase(fd);
}

void UdpEngine::start() {
  if (started_) return;
  started_ = true;
  for (Node* n : nodes_) invoke(*n, [&](Time now, Effects& fx) { n->on_start(now, fx); });
  if (attached_) invoke(*attached_, [&](Time now, Effects& fx) { attached_->on_start(now, fx); });
}

Node* UdpEngine::node_for(NodeId dst) const {
  for (Node* n : nodes_)
    if (n->id() == dst) return n;
  return nullptr;
}

void UdpEngine::set_timer(Time at, uint64_t token) {
  timers_.push({at, seq_++, current_, token});
}

void UdpEngine::send(Packet* p) {
  if (p->h.src == kNoNode && current_) p->h.src = current_->id();
  if (attached_) {
    if (current_ == attached_) {
      internal_.emplace_back(nodes_.empty() ? nullptr : nodes_.front(), p);
      if (!internal_.back().first) {
        internal_.pop_back();
        ++st_.tx_unroutable;
        pool_.put(p);
      }
      return;
    }
    if (p->h.dst == attached_->id()) {
      internal_.emplace_back(attached_, p);
      return;
    }
  }
  if (tag_bytes_ && !key_of(p->h.job)) {
    ++st_.tx_no_key;
    pool_.put(p);
    return;
  }
  sockaddr_in to;
  if (cfg_.mode == EngineMode::Host) {
    to = cfg_.gateway.sa;
  } else if (p->h.dst < routes_.size() && routes_[p->h.dst].valid) {
    to = routes_[p->h.dst].sa;
  } else {
    ++st_.tx_unroutable;
    pool_.put(p);
    return;
  }
  const FaultConfig& f = cfg_.faults;
  if (!f.any()) {
    enqueue_tx(*p, to);
    pool_.put(p);
    return;
  }
  if (f.loss > 0 && fault_rng_.bernoulli(f.loss)) {
    ++st_.fault_lost;
    pool_.put(p);
    return;
  }
  const int copies = f.duplicate > 0 && fault_rng_.bernoulli(f.duplicate) ? 2 : 1;
  st_.fault_duplicated += copies - 1;
  for (int c = 0; c < copies; ++c) {
    Time extra = 0;
    if (f.delay > 0 && (f.delay_node == kNoNode || p->h.src == f.delay_node || p->h.dst == f.delay_node)) {
      extra += f.delay;
      ++st_.fault_delayed;
    }
    if (f.reorder > 0 && fault_rng_.bernoulli(f.reorder)) {
      extra += static_cast<Time>(fault_rng_.uniform() * static_cast<double>(f.reorder_delay));
      ++st_.fault_reordered;
    }
    if (extra > 0) {
      Packet* q = c + 1 < copies ? pool_.clone(*p) : p;
      delayed_.push({now_ + extra, seq_++, q, to});
      if (q == p) return;
    } else {
      enqueue_tx(*p, to);
    }
  }
  pool_.put(p);
}

// The index of the next queue item, its send slot allocated; -1 (counted) if the queue is full.
long UdpEngine::next_tx_slot() {
  if (txq_.size() - tx_head_ >= cfg_.max_tx_queue) {
    ++st_.tx_overflow;
    return -1;
  }
  const size_t i = txq_.size();
  if (txbuf_.size() < (i + 1) * slot_bytes_) txbuf_.resize(std::max<size_t>(2 * txbuf_.size(), (i + 1) * slot_bytes_));
  return static_cast<long>(i);
}

void UdpEngine::set_egress_port(NodeId dst, double gbps) {
  if (egress_of_.size() <= dst) egress_of_.resize(static_cast<size_t>(dst) + 1, 0);
  if (egress_of_[dst] == 0) {
    egress_of_[dst] = static_cast<int32_t>(egress_.size());
    egress_.push_back({});
  }
  egress_[static_cast<size_t>(egress_of_[dst])].bytes_per_s = gbps * 1e9 / 8;
}
void UdpEngine::set_egress_default(double gbps) { egress_[0].bytes_per_s = gbps * 1e9 / 8; }
void UdpEngine::set_egress_ecn(uint64_t ecn_bytes) { egress_ecn_ = ecn_bytes; }

bool UdpEngine::egress_congested(NodeId dst, size_t datagram_bytes) {
  if (egress_ecn_ == 0 || cfg_.mode != EngineMode::Router) return false;
  Egress& e = egress_[dst < egress_of_.size() ? static_cast<size_t>(egress_of_[dst]) : 0];
  if (e.bytes_per_s <= 0) return false;
  const Time now = clock();
  e.backlog = std::max(0.0, e.backlog - static_cast<double>(now - e.at) / static_cast<double>(kSec) * e.bytes_per_s);
  e.at = now;
  const bool congested = e.backlog > static_cast<double>(egress_ecn_);
  e.backlog += static_cast<double>(datagram_bytes + kLinkOverheadBytes);
  if (congested) ++st_.ecn_marked;
  return congested;
}

long UdpEngine::enqueue_tx(const Packet& p, const sockaddr_in& to, bool flush) {
  const long slot = next_tx_slot();
  if (slot < 0) return -1;
  const auto i = static_cast<size_t>(slot);
  std::byte* d = txbuf_.data() + i * slot_bytes_;
  size_t len = encode(p, std::span<std::byte>(d, slot_bytes_));
  mcast_ecn_ = p.h.has(flag::kEcn);
  if (egress_congested(p.h.dst, len + tag_bytes_)) set_wire_flags(d, wire_flags(d) | flag::kEcn);
  if (tag_bytes_) {
    const DatagramKey* k = key_of(p.h.job);
    if (!k) {  // its key went while it was held back (fault injection's delay)
      ++st_.tx_no_key;
      return -1;
    }
    set_wire_flags(d, wire_flags(d) | flag::kTagged);
    mcast_state_ = payload_state(*k, d, len);
    put_tag(d + len, finish_tag(mcast_state_, d));
    len += kTagBytes;
  }
  txq_.push_back({to, static_cast<uint32_t>(len), false, static_cast<uint32_t>(i)});
  if (flush && txq_.size() - tx_head_ >= cfg_.batch && !tx_blocked_) flush_tx();
  return static_cast<long>(i);
}

// A multicast copy of queued item `of` (not yet sent: the queue is not
// flushed between the copies, and `of` was the last enqueue_tx): its header
// with another destination, and the payload of `of` itself.
void UdpEngine::enqueue_copy(size_t of, NodeId dst, const sockaddr_in& to) {
  const long slot = next_tx_slot();
  if (slot < 0) return;
  const auto i = static_cast<size_t>(slot);
  std::byte* h = txbuf_.data() + i * slot_bytes_;
  std::memcpy(h, txbuf_.data() + of * slot_bytes_, kHeaderBytes);
  set_wire_dst(h, dst);
  // Its own port's mark, not the first copy's.
  const bool ce = egress_congested(dst, txq_[of].len) || mcast_ecn_;  // the copy joins its port's backlog either way
  set_wire_flags(h, static_cast<uint16_t>((wire_flags(h) & ~flag::kEcn) | (ce ? flag::kEcn : 0)));
  // Its own tag (the header differs), from the payload state the first copy left.
  if (tag_bytes_) put_tag(h + kHeaderBytes, finish_tag(mcast_state_, h));
  txq_.push_back({to, txq_[of].len, false, static_cast<uint32_t>(of)});
  ++st_.tx_shared_copies;
}

// Lays out at most `batch` messages of pending queue items in txmsg_: one
// datagram each, or (max_segments > 1) the pending items of each destination
// in queue order, cut into runs of one length (a run's last datagram may be
// shorter, as UDP_SEGMENT allows) of at most max_segments datagrams and
// kMaxGsoBytes. Returns the number of messages.
size_t UdpEngine::build_tx(size_t max_segments) {
  const size_t b = cfg_.batch;
  size_t nmsg = 0, niov = 0, nitem = 0, first_iov = 0;
  // One datagram: its slot, or (a multicast copy) its header, the payload of
  // the copy it shares and (datagram tags) its own tag.
  auto add_iov = [&](uint32_t item) {
    const TxItem& it = txq_[item];
    std::byte* slot = txbuf_.data() + size_t{item} * slot_bytes_;
    if (it.payload_of == item) {
      txiov_[niov++] = {slot, it.len};
    } else {
      txiov_[niov++] = {slot, kHeaderBytes};
      txiov_[niov++] = {txbuf_.data() + size_t{it.payload_of} * slot_bytes_ + kHeaderBytes,
                        it.len - kHeaderBytes - tag_bytes_};
      if (tag_bytes_) txiov_[niov++] = {slot + kHeaderBytes, tag_bytes_};  // its own tag
    }
    txitem_[nitem++] = item;
  };
  auto close_msg = [&](const sockaddr_in& to, size_t first, size_t segment) {
    ::mmsghdr& m = txmsg_[nmsg];
    std::memset(&m, 0, sizeof m);
    m.msg_hdr.msg_name = const_cast<sockaddr_in*>(&to);
    m.msg_hdr.msg_namelen = sizeof to;
    m.msg_hdr.msg_iov = &txiov_[first_iov];
    m.msg_hdr.msg_iovlen = niov - first_iov;
    first_iov = niov;
    if (nitem - first > 1) set_udp_segment(m.msg_hdr, txctl_[nmsg].buf, static_cast<uint16_t>(segment));
    txfirst_[nmsg] = static_cast<uint32_t>(first);
    txfirst_[++nmsg] = static_cast<uint32_t>(nitem);
  };
  if (max_segments <= 1) {
    for (size_t i = tx_head_; i < txq_.size() && nmsg < b; ++i) {
      if (txq_[i].sent) continue;
      const size_t first = nitem;
      add_iov(static_cast<uint32_t>(i));
      close_msg(txq_[i].to, first, 0);
    }
    return nmsg;
  }
  // Pending items by destination, in order of first appearance.
  size_t ngroups = 0, last = 0;
  const size_t scan_end = std::min(txq_.size(), tx_head_ + b * max_segments);
  for (size_t i = tx_head_; i < scan_end; ++i) {
    if (txq_[i].sent) continue;
    // Result copies go round the workers: try the group after the last one first.
    size_t g = last + 1 < ngroups ? last + 1 : 0;
    if (g >= ngroups || !same(txgroups_[g].first, txq_[i].to))
      for (g = 0; g < ngroups && !same(txgroups_[g].first, txq_[i].to);) ++g;
    last = g;
    if (g == ngroups) {
      if (ngroups == kMaxTxGroups) continue;  // next round
      if (txgroups_.size() == ngroups) txgroups_.emplace_back();
      txgroups_[g].first = txq_[i].to;
      txgroups_[g].second.clear();
      ++ngroups;
    }
    txgroups_[g].second.push_back(static_cast<uint32_t>(i));
  }
  for (size_t g = 0; g < ngroups && nmsg < b; ++g) {
    const sockaddr_in& to = txgroups_[g].first;
    const auto& items = txgroups_[g].second;
    for (size_t k = 0; k < items.size() && nmsg < b;) {
      const size_t first = nitem;
      const size_t seg = txq_[items[k]].len;
      size_t bytes = 0;
      // A run: datagrams of length seg, the last possibly shorter.
      while (k < items.size() && nitem - first < max_segments) {
        const size_t len = txq_[items[k]].len;
        if (len > seg || bytes + len > kMaxGsoBytes || (nitem > first && seg > gso_max_)) break;
        add_iov(items[k++]);
        bytes += len;
        if (len < seg) break;
      }
      close_msg(to, first, seg);
    }
  }
  return nmsg;
}

void UdpEngine::flush_tx() {
  if (!current_) deliver_local();
  while (tx_head_ < txq_.size() && !tx_blocked_) {
    const size_t n = build_tx(gso_max_ > 0 ? kMaxSegments : 1);
    const int sent = sendmmsg(sock_.get(), txmsg_.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        tx_blocked_ = true;  // wait for EPOLLOUT
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u64 = kSocketTag;
        epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, sock_.get(), &ev);
        break;
      }
      const size_t segs = txfirst_[1] - txfirst_[0];
      if (segs > 1 && (errno == EINVAL || errno == EMSGSIZE || errno == EIO)) {
        // The kernel refuses this segmented send: a segment longer than the
        // path MTU allows (EINVAL), or no checksum offload on the way (EIO).
        // Datagrams this long go one by one from now on.
        ++st_.tx_gso_refused;
        const size_t seg = txq_[txitem_[0]].len;
        gso_max_ = errno == EIO ? 0 : std::min(gso_max_, seg - 1);
        continue;
      }
      // e.g. EPERM from a firewall: skip that message's datagrams.
      st_.tx_errors += segs;
      for (size_t v = txfirst_[0]; v < txfirst_[1]; ++v) txq_[txitem_[v]].sent = true;
    } else {
      st_.tx_messages += static_cast<uint64_t>(sent);
      for (size_t v = 0; v < txfirst_[static_cast<size_t>(sent)]; ++v) {
        TxItem& it = txq_[txitem_[v]];
        it.sent = true;
        st_.tx_bytes += it.len;
        ++st_.tx_datagrams;
        st_.tx_tagged += tag_bytes_ != 0;
      }
    }
    while (tx_head_ < txq_.size() && txq_[tx_head_].sent) ++tx_head_;
  }
  if (tx_head_ == txq_.size()) {
    txq_.clear();
    tx_head_ = 0;
  }
}

uint64_t UdpEngine::receive_backlog() const {
  uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof mem;
  if (getsockopt(sock_.get(), SOL_SOCKET, SO_MEMINFO, mem, &len) != 0) return 0;
  return mem[SK_MEMINFO_RMEM_ALLOC];
}

void UdpEngine::on_readable() {
  const unsigned b = cfg_.batch;
  for (int round = 0; round < kMaxRxRounds; ++round) {
    for (unsigned i = 0; i < b; ++i) {
      auto& h = rxmsg_[i].msg_hdr;
      h.msg_name = &rxaddr_[i];
      h.msg_namelen = sizeof rxaddr_[i];
      h.msg_iov = &rxiov_[i];
      h.msg_iovlen = 1;
      h.msg_control = gro_ ? rxctl_[i].buf : nullptr;
      h.msg_controllen = gro_ ? sizeof rxctl_[i].buf : 0;
      h.msg_flags = 0;
    }
    const int n = recvmmsg(sock_.get(), rxmsg_.data(), b, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    const bool mark = cfg_.mode == EngineMode::Router && cfg_.ecn_backlog_bytes > 0 &&
                      receive_backlog() > cfg_.ecn_backlog_bytes;
    now_ = clock();
    for (int i = 0; i < n; ++i) handle_message(rxmsg_[i], rxbuf_.get() + static_cast<size_t>(i) * rx_slot_bytes_, mark);
    flush_tx();
    if (static_cast<unsigned>(n) < b) return;
  }
}

// One received message: a datagram, or (UDP_GRO) a batch of datagrams of the
// segment size, the last possibly shorter. A message cut short by the buffer
// (MSG_TRUNC) loses its last, partial datagram: counted as malformed, never
// decoded; the whole datagrams before it are good.
void UdpEngine::handle_message(const ::mmsghdr& m, std::byte* data, bool mark_ecn) {
  const sockaddr_in& from = *static_cast<const sockaddr_in*>(m.msg_hdr.msg_name);
  const size_t len = m.msg_len;
  const bool cut = (m.msg_hdr.msg_flags & MSG_TRUNC) != 0;
  if (cut) ++st_.rx_truncated;
  const size_t seg = gro_ ? udp_gro_segment(m.msg_hdr) : 0;
  if (seg == 0 || seg >= len) {
    // One datagram; cut short, it was longer than any valid one.
    handle_datagram(data, len, from, cut ? DecodeError::PayloadTooLarge : DecodeError::None, mark_ecn);
    return;
  }
  ++st_.rx_gro_batches;
  for (size_t off = 0; off < len; off += seg) {
    const size_t l = std::min(seg, len - off);
    // The buffer ended inside this datagram: its tail is gone.
    const bool partial = cut && off + seg > len;
    handle_datagram(data + off, l, from, partial ? DecodeError::Truncated : DecodeError::None, mark_ecn);
  }
}

void UdpEngine::handle_datagram(std::byte* data, size_t len, const sockaddr_in& from, DecodeError forced,
                                bool mark_ecn) {
  ++st_.rx_datagrams;
  st_.rx_bytes += len;
  // Datagram tags: the tag and its header bit come off before decoding (a
  // node never sees them); the tag is checked once the datagram is known to
  // come from a member's address, so malformed, foreign and late datagrams
  // are counted as such.
  bool tagged = false;
  if (tag_bytes_ && forced == DecodeError::None && len >= kHeaderBytes + kTagBytes &&
      (wire_flags(data) & flag::kTagged)) {
    tagged = true;
    len -= kTagBytes;
    set_wire_flags(data, wire_flags(data) & ~flag::kTagged);
  }
  auto tag_ok = [&](uint16_t job) {
    if (!tag_bytes_) return true;
    if (!tagged) return false;
    set_wire_flags(data, wire_flags(data) | flag::kTagged);  // the tag covers the header as sent
    const DatagramKey* k = key_of(job);
    return k && tag_matches(*k, data, len + kTagBytes);
  };
  Packet* p = pool_.get();
  const DecodeError err = forced != DecodeError::None ? forced : decode(std::span<const std::byte>(data, len), *p, pool_);
  if (err != DecodeError::None) {
    ++st_.rx_malformed;
    ++st_.decode_errors[static_cast<size_t>(err)];
    if (!from_member(from)) ++st_.rx_unattributed;
    pool_.put(p);
    return;
  }
  Node* to = nullptr;
  if (cfg_.mode == EngineMode::Router) {
    const NodeId s = p->h.src;
    const bool relayed = std::any_of(relays_.begin(), relays_.end(), [&](const sockaddr_in& r) { return same(r, from); });
    if (!relayed && (s >= routes_.size() || !routes_[s].valid || !same(routes_[s].sa, from))) {
      if (s < routes_.size() && routes_[s].retired && same(routes_[s].sa, from)) {
        ++st_.rx_late;
      } else {
        ++st_.rx_foreign;
        if (!from_member(from)) ++st_.rx_unattributed;
      }
      pool_.put(p);
      return;
    }
    if (!tag_ok(p->h.job)) {
      ++st_.rx_bad_tag;
      pool_.put(p);
      return;
    }
    to = nodes_.empty() ? nullptr : nodes_.front();
    if (ecn_mark(p->h, mark_ecn)) ++st_.ecn_marked;  // every packet type (proto/ecn.hpp)
  } else {
    if (!same(from, cfg_.gateway.sa)) {
      ++st_.rx_foreign;
      ++st_.rx_unattributed;  // the gateway is a host engine's only peer
      pool_.put(p);
      return;
    }
    if (!tag_ok(p->h.job)) {
      ++st_.rx_bad_tag;
      pool_.put(p);
      return;
    }
    to = node_for(p->h.dst);
  }
  if (!to) {
    ++st_.rx_unknown_dst;
    pool_.put(p);
    return;
  }
  current_ = to;
  to->on_packet(p, now_, *this);
  current_ = nullptr;
}

void UdpEngine::fire_timers() {
  while (!timers_.empty() && timers_.top().at <= now_) {
    const Timer t = timers_.top();
    timers_.pop();
    ++st_.timers_fired;
    if (!t.node) continue;
    current_ = t.node;
    t.node->on_timer(t.token, now_, *this);
    current_ = nullptr;
  }
}

void UdpEngine::release_delayed() {
  while (!delayed_.empty() && delayed_.top().at <= now_) {
    const Delayed d = delayed_.top();
    delayed_.pop();
    enqueue_tx(*d.p, d.to);
    pool_.put(d.p);
  }
}

void UdpEngine::poll(Time max_wait) {
  ++st_.loop_iterations;
  now_ = clock();
  flush_tx();
  Time wait = std::max<Time>(0, max_wait);
  if (!timers_.empty()) wait = std::min(wait, std::max<Time>(0, timers_.top().at - now_));
  if (!delayed_.empty()) wait = std::min(wait, std::max<Time>(0, delayed_.top().at - now_));
  const timespec ts{static_cast<time_t>(wait / kSec), static_cast<long>(wait % kSec / kNs)};
  epoll_event evs[32];
  // epoll_pwait2 (Linux >= 5.11) waits with nanosecond resolution; before
  // that, epoll_wait with the wait rounded up to whole milliseconds.
  static std::atomic<bool> have_pwait2{true};
  int n = have_pwait2 ? epoll_pwait2(epoll_.get(), evs, 32, &ts, nullptr) : -1;
  if (n < 0 && (!have_pwait2 || errno == ENOSYS)) {
    have_pwait2 = false;
    n = epoll_wait(epoll_.get(), evs, 32, static_cast<int>(std::min<Time>((wait + kMs - 1) / kMs, INT32_MAX)));
  }
  if (n < 0 && errno != EINTR) throw RuntimeError(fmt::format("epoll wait: {}", errno_text(errno)));
  now_ = clock();
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.u64 == kSocketTag) {
      if (evs[i].events & EPOLLOUT) {
        tx_blocked_ = false;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = kSocketTag;
        epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, sock_.get(), &ev);
        flush_tx();
      }
      if (evs[i].events & (EPOLLIN | EPOLLERR)) on_readable();
      continue;
    }
    // Look the handler up now: an earlier handler of this batch may have removed it.
    auto it = watches_.find(static_cast<int>(evs[i].data.u64));
    if (it == watches_.end()) continue;
    auto handler = it->second;  // keeps it alive while it runs, even if it unwatches itself
    (*handler)(evs[i].events);
  }
  now_ = clock();
  fire_timers();
  release_delayed();
  flush_tx();
}

}  // namespace ina::rt
