#include "runtime/udp_engine.hpp"

#include <algorithm>

#include <linux/sock_diag.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace ina::rt {

namespace {
constexpr int kMaxRxRounds = 16;  // recvmmsg batches per readiness event, so timers stay punctual
constexpr uint64_t kSocketTag = ~0ULL;

bool same(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}
}  // namespace

void FaultConfig::validate() const {
  auto rate = [](double v, const char* name) {
    if (!(v >= 0 && v < 1)) throw RuntimeError(fmt::format("fault injection: {} must be in [0, 1), got {}", name, v));
  };
  rate(loss, "loss");
  rate(duplicate, "duplicate");
  rate(reorder, "reorder");
  if (reorder_delay < 0) throw RuntimeError("fault injection: reorder delay must be >= 0");
  if (delay < 0) throw RuntimeError("fault injection: delay must be >= 0");
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
          {"tx_bytes", tx_bytes}, {"rx_malformed", rx_malformed}, {"rx_foreign", rx_foreign}, {"rx_late", rx_late},
          {"rx_unknown_dst", rx_unknown_dst}, {"tx_unroutable", tx_unroutable}, {"tx_overflow", tx_overflow},
          {"tx_errors", tx_errors}, {"fault_lost", fault_lost}, {"fault_duplicated", fault_duplicated},
          {"fault_reordered", fault_reordered}, {"fault_delayed", fault_delayed}, {"ecn_marked", ecn_marked},
          {"timers_fired", timers_fired}, {"loop_iterations", loop_iterations}, {"decode_errors", errs}};
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
  slot_bytes_ = kHeaderBytes + 4u * cfg.payload_values + 4u;
  const unsigned b = cfg.batch;
  rxbuf_.resize(slot_bytes_ * b);
  rxaddr_.resize(b);
  rxmsg_.resize(b);
  rxiov_.resize(b);
  for (unsigned i = 0; i < b; ++i) {
    rxiov_[i] = {rxbuf_.data() + i * slot_bytes_, slot_bytes_};
    std::memset(&rxmsg_[i], 0, sizeof rxmsg_[i]);
  }
  txmsg_.resize(b);
  txiov_.resize(b);
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
  routes_[id] = {to.sa, true};
}

void UdpEngine::add_relay(const Endpoint& from) { relays_.push_back(from.sa); }

void UdpEngine::clear_route(NodeId id) {
  if (id < routes_.size() && routes_[id].valid) routes_[id] = Route{routes_[id].sa, false, true};
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

void UdpEngine::enqueue_tx(const Packet& p, const sockaddr_in& to) {
  if (txq_.size() - tx_head_ >= cfg_.max_tx_queue) {
    ++st_.tx_overflow;
    return;
  }
  const size_t i = txq_.size();
  if (txbuf_.size() < (i + 1) * slot_bytes_) txbuf_.resize(std::max<size_t>(2 * txbuf_.size(), (i + 1) * slot_bytes_));
  const size_t len = encode(p, std::span<std::byte>(txbuf_.data() + i * slot_bytes_, slot_bytes_));
  txq_.push_back({to, static_cast<uint32_t>(len)});
  if (txq_.size() - tx_head_ >= cfg_.batch && !tx_blocked_) flush_tx();
}

void UdpEngine::flush_tx() {
  if (!current_) deliver_local();
  while (tx_head_ < txq_.size() && !tx_blocked_) {
    const size_t n = std::min<size_t>(cfg_.batch, txq_.size() - tx_head_);
    for (size_t k = 0; k < n; ++k) {
      TxItem& it = txq_[tx_head_ + k];
      txiov_[k] = {txbuf_.data() + (tx_head_ + k) * slot_bytes_, it.len};
      std::memset(&txmsg_[k], 0, sizeof txmsg_[k]);
      txmsg_[k].msg_hdr.msg_name = &it.to;
      txmsg_[k].msg_hdr.msg_namelen = sizeof it.to;
      txmsg_[k].msg_hdr.msg_iov = &txiov_[k];
      txmsg_[k].msg_hdr.msg_iovlen = 1;
    }
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
      ++st_.tx_errors;  // e.g. EPERM from a firewall: skip that datagram
      ++tx_head_;
      continue;
    }
    for (int k = 0; k < sent; ++k) st_.tx_bytes += txq_[tx_head_ + k].len;
    st_.tx_datagrams += static_cast<uint64_t>(sent);
    tx_head_ += static_cast<size_t>(sent);
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
      h.msg_control = nullptr;
      h.msg_controllen = 0;
      h.msg_flags = 0;
    }
    const int n = recvmmsg(sock_.get(), rxmsg_.data(), b, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    const bool mark = cfg_.mode == EngineMode::Router && cfg_.ecn_backlog_bytes > 0 &&
                      receive_backlog() > cfg_.ecn_backlog_bytes;
    now_ = clock();
    for (int i = 0; i < n; ++i)
      handle_datagram(rxbuf_.data() + static_cast<size_t>(i) * slot_bytes_, rxmsg_[i].msg_len, rxaddr_[i],
                      (rxmsg_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0, mark);
    flush_tx();
    if (static_cast<unsigned>(n) < b) return;
  }
}

void UdpEngine::handle_datagram(const std::byte* data, size_t len, const sockaddr_in& from, bool truncated,
                                bool mark_ecn) {
  ++st_.rx_datagrams;
  st_.rx_bytes += len;
  Packet* p = pool_.get();
  const DecodeError err = truncated ? DecodeError::PayloadTooLarge : decode(std::span<const std::byte>(data, len), *p);
  if (err != DecodeError::None) {
    ++st_.rx_malformed;
    ++st_.decode_errors[static_cast<size_t>(err)];
    pool_.put(p);
    return;
  }
  Node* to = nullptr;
  if (cfg_.mode == EngineMode::Router) {
    const NodeId s = p->h.src;
    const bool relayed = std::any_of(relays_.begin(), relays_.end(), [&](const sockaddr_in& r) { return same(r, from); });
    if (!relayed && (s >= routes_.size() || !routes_[s].valid || !same(routes_[s].sa, from))) {
      if (s < routes_.size() && routes_[s].retired && same(routes_[s].sa, from)) ++st_.rx_late;
      else ++st_.rx_foreign;
      pool_.put(p);
      return;
    }
    to = nodes_.empty() ? nullptr : nodes_.front();
    if (mark_ecn && (p->h.type == PktType::Data || p->h.type == PktType::KvData) && !(p->h.flags & flag::kEcn)) {
      p->h.flags |= flag::kEcn;
      ++st_.ecn_marked;
    }
  } else {
    if (!same(from, cfg_.gateway.sa)) {
      ++st_.rx_foreign;
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
