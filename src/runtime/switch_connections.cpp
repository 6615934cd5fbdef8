// The switch's TCP control connections: accepting them within the
// ControlLimits, reading their lines, answering and closing them.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/switch_impl.hpp"

namespace ina::rt {

// A visitor (not a job's member) is closed at its deadline and held to the
// visitor limits; a member has no deadline and the member limits. Applied
// when a connection's membership may have changed (after its messages, and
// at each sweep: a finished job's members become visitors).
void SwitchDaemon::Impl::refresh_role(Conn& c, Time now) {
  if (c.job && c.deadline != 0) {
    c.deadline = 0;
    c.ch.set_limits(LineChannel::kMaxLine, LineChannel::kMaxPendingOutput);
  } else if (!c.job && c.deadline == 0) {
    c.deadline = now + limits.visitor_timeout;
    c.ch.set_limits(limits.max_visitor_line, limits.max_visitor_output);
  }
}

// Closes the oldest visitor (of `source`, or of any address): room for a
// newcomer at a limit. False if there is none.
bool SwitchDaemon::Impl::evict_oldest_visitor(const uint32_t* source) {
  Conn* oldest = nullptr;
  for (auto& [fd, c] : conns)
    if (!c->job && (!source || c->source == *source) && (!oldest || c->opened < oldest->opened)) oldest = c.get();
  if (!oldest) return false;
  ++limit_counts.evicted;
  close_visitor(*oldest, fmt::format("closed to make room for a newer connection (at most {} {}); join or ask "
                                     "within {:.1f} s of connecting", source ? limits.max_per_source : limits.max_connections,
                                     source ? "connections from one address" : "connections in all",
                                     to_ms(limits.visitor_timeout) / 1000));
  return true;
}

// Tells a connection closed by a limit why (one non-blocking attempt), then
// drops it. Not logged one by one (a flood would flood the log): counted,
// and summed up in the log at most once a second (log_limits).
void SwitchDaemon::Impl::close_visitor(Conn& c, const std::string& why) {
  try {
    c.ch.send({{"op", "error"}, {"message", why}});
  } catch (const std::exception&) {
  }
  drop(c, "was closed by a connection limit", /*told=*/true);
}

void SwitchDaemon::Impl::pause_accept() {
  if (!accepting) return;
  engine->unwatch(listener.get());
  accepting = false;
  ++limit_counts.accept_pauses;
}

void SwitchDaemon::Impl::resume_accept() {
  // Lingering connections make room for newcomers (accept_all).
  if (accepting || conns.size() >= limits.max_connections) return;
  engine->watch(listener.get(), EPOLLIN, [this](uint32_t) { accept_all(); });
  accepting = true;
}

void SwitchDaemon::Impl::accept_all() {
  // Bounded per readiness event (level-triggered: the rest comes next).
  for (int taken = 0; taken < 1024; ++taken) {
    // At the limit a newcomer replaces the oldest visitor; with only members
    // left the listener is not watched (no busy loop on a full switch)
    // until one closes.
    bool full = open_connections() >= limits.max_connections;
    if (full && end_oldest_linger(nullptr)) full = open_connections() >= limits.max_connections;
    if (full && std::none_of(conns.begin(), conns.end(), [](const auto& kv) { return kv.second->job == nullptr; }))
      return pause_accept();
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      const int err = errno;
      ++limit_counts.accept_failures;
      last_accept_error = errno_text(err);
      // Out of descriptors: the oldest visitor makes room, as at the
      // connection limit. Without one (or out of memory) the pending
      // connection stays in the backlog and the listener stays readable, so
      // it is not watched until a connection closes or the next sweep.
      if ((err == EMFILE || err == ENFILE) && (end_oldest_linger(nullptr) || evict_oldest_visitor(nullptr))) continue;
      return pause_accept();
    }
    UniqueFd guard(fd);
    const int one = 1;  // answers go out whole, not held for an acknowledgement
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const uint32_t src = from.sin_addr.s_addr;
    if (per_source[src] >= limits.max_per_source && !end_oldest_linger(&src) && !evict_oldest_visitor(&src)) {
      ++limit_counts.refused_per_source;
      const std::string why = fmt::format("{{\"op\":\"error\",\"message\":\"too many connections from {} (at most {} "
                                          "from one address)\"}}\n", Endpoint{from}.ip(), limits.max_per_source);
      [[maybe_unused]] auto r = ::send(fd, why.data(), why.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    if (full && open_connections() >= limits.max_connections) evict_oldest_visitor(nullptr);
    auto c = std::make_unique<Conn>();
    c->ch = LineChannel(std::move(guard));
    c->peer = Endpoint{from};
    c->source = src;
    c->opened = monotonic_now();
    refresh_role(*c, c->opened);
    c->nonce = to_hex(random_key());
    engine->watch(fd, EPOLLIN, [this, fd](uint32_t ev) { on_conn(fd, ev); });
    ++per_source[src];
    Conn& ref = *c;
    conns.emplace(fd, std::move(c));
    send(ref, {{"op", "hello"}, {"version", 2}, {"nonce", ref.nonce}});
  }
}

// Every tick: visitors past their deadline and members whose incomplete
// line has waited as long are closed; the listener is watched again if it
// was paused and there is room (after a failed accept: retried here).
void SwitchDaemon::Impl::sweep() {
  uint64_t v;
  [[maybe_unused]] auto r = ::read(sweep_fd.get(), &v, sizeof v);
  const Time now = monotonic_now();
  std::vector<int> late, slow;
  for (auto& [fd, c] : conns) {
    refresh_role(*c, now);
    if (c->deadline != 0 && now >= c->deadline) late.push_back(fd);
    else if (c->deadline == 0 && c->partial_since != 0 && now - c->partial_since >= limits.visitor_timeout) slow.push_back(fd);
  }
  for (int fd : late)
    if (auto it = conns.find(fd); it != conns.end()) {
      ++limit_counts.timed_out;
      close_visitor(*it->second, fmt::format("no job joined within {:.1f} s of connecting (or of the job's end)",
                                             to_ms(limits.visitor_timeout) / 1000));
    }
  for (int fd : slow)
    if (auto it = conns.find(fd); it != conns.end()) {
      ++limit_counts.timed_out;
      reject(*it->second, fmt::format("a control line incomplete for {:.1f} s", to_ms(limits.visitor_timeout) / 1000));
    }
  std::vector<int> over;
  for (const auto& [fd, l] : lingering)
    if (now >= l.until) over.push_back(fd);
  for (int fd : over) end_linger(fd);
  resume_accept();
  log_limits(now);
}

// What the limits refused or closed since the last such line, at most one a second.
void SwitchDaemon::Impl::log_limits(Time now) {
  if (now < next_limit_log) return;
  const LimitCounts& a = limit_counts;
  LimitCounts& b = limit_logged;
  if (a.refused_per_source == b.refused_per_source && a.evicted == b.evicted && a.timed_out == b.timed_out &&
      a.accept_failures == b.accept_failures && a.accept_pauses == b.accept_pauses)
    return;
  log("control connections: {} refused (at most {} from one address), {} closed for newer ones, {} timed out "
      "(visitor timeout {:.1f} s), {} accept pauses (at most {} connections){}; {} open",
      a.refused_per_source - b.refused_per_source, limits.max_per_source, a.evicted - b.evicted,
      a.timed_out - b.timed_out, to_ms(limits.visitor_timeout) / 1000, a.accept_pauses - b.accept_pauses,
      limits.max_connections,
      a.accept_failures == b.accept_failures
          ? std::string()
          : fmt::format(", {} failed accepts ({})", a.accept_failures - b.accept_failures, last_accept_error),
      conns.size());
  b = a;
  next_limit_log = now + kSec;
}

void SwitchDaemon::Impl::on_conn(int fd, uint32_t ev) {
  auto it = conns.find(fd);
  if (it == conns.end()) return;
  Conn& c = *it->second;
  std::vector<nlohmann::json> msgs;
  bool open = true;
  try {
    if (ev & EPOLLOUT) flush(c);
    open = c.ch.receive(msgs);
    for (const auto& m : msgs) {
      if (!conns.count(fd)) return;  // closed while handling an earlier message
      handle(c, m);
    }
  } catch (const LineTooLong& e) {
    ++limit_counts.oversized;
    if (conns.count(fd)) reject(c, e.what());
    return;
  } catch (const std::exception& e) {
    // A bad message closes this connection with the reason; the daemon and
    // every other job go on.
    if (conns.count(fd)) reject(c, e.what());
    return;
  } catch (...) {
    if (conns.count(fd)) reject(c, "internal error handling a control message");
    return;
  }
  if (!open && conns.count(fd)) return drop(c, "disconnected");
  if (!conns.count(fd)) return;
  const Time now = monotonic_now();
  refresh_role(c, now);
  if (c.ch.partial_bytes() == 0) c.partial_since = 0;
  else if (c.partial_since == 0) c.partial_since = now;
}

void SwitchDaemon::Impl::flush(Conn& c) {
  bool all = true;
  try {
    all = c.ch.flush();
  } catch (const RuntimeError&) {
  }
  engine->rewatch(c.ch.fd(), EPOLLIN | (all ? 0u : EPOLLOUT));
}

// A broken connection, or one whose peer does not read its answers, is
// shut down here and dropped by its own readiness event (end of stream).
void SwitchDaemon::Impl::send(Conn& c, const nlohmann::json& m) {
  try {
    c.ch.send(m);
  } catch (const std::exception& e) {
    log("closing {}: {}", c.peer.str(), e.what());
    ::shutdown(c.ch.fd(), SHUT_RDWR);
    return;
  }
  if (c.ch.pending_output()) engine->rewatch(c.ch.fd(), EPOLLIN | EPOLLOUT);
}

// Tells the peer why, then closes its connection (and leaves its job).
void SwitchDaemon::Impl::reject(Conn& c, const std::string& why) {
  ++joins_rejected;
  log("rejected {}: {}", c.peer.str(), why);
  try {
    // One non-blocking attempt: a peer that does not read loses the reason,
    // and never stalls the loop (the data plane runs on this thread).
    c.ch.send({{"op", "error"}, {"message", why}});
  } catch (const std::exception&) {
  }
  drop(c, "was rejected", /*told=*/true);
}

// Closes a connection; a member leaving a live job that is not finished
// aborts it. One `told` why (an error line) lingers until the peer has read it.
void SwitchDaemon::Impl::drop(Conn& c, const std::string& how, bool told) {
  const int fd = c.ch.fd();
  if (Job* j = c.job) {
    if (live(*j)) {
      abort_job(*j, fmt::format("{} of job {} {}", describe(c), j->id, how), &c);
    } else {
      leave_pending(*j, c);
    }
  }
  engine->unwatch(fd);
  if (told) {
    linger(c);
  } else if (auto it = per_source.find(c.source); it != per_source.end() && --it->second == 0) {
    per_source.erase(it);
  }
  conns.erase(fd);
  resume_accept();
}

// A socket closed with input unread, or input still arriving, sends a reset,
// and a reset can make the peer's stack discard the error line it has not
// read yet. So a connection told why is half-closed instead (the peer reads
// the line, then the end of stream) and its input is read and discarded
// until the peer closes, for at most kLingerTime and kLingerBytes: then it is
// closed whatever the peer does. It still counts against the connection
// limits, and is the first to go when a newcomer needs room.
void SwitchDaemon::Impl::linger(Conn& c) {
  static constexpr Time kLingerTime = 2 * kSec;
  Lingering l;
  l.fd = c.ch.take_fd();
  l.source = c.source;
  l.until = monotonic_now() + std::min(kLingerTime, limits.visitor_timeout);
  const int fd = l.fd.get();
  ::shutdown(fd, SHUT_WR);
  lingering.emplace(fd, std::move(l));
  engine->watch(fd, EPOLLIN, [this, fd](uint32_t) { on_lingering(fd); });
  on_lingering(fd);
}

void SwitchDaemon::Impl::on_lingering(int fd) {
  static constexpr size_t kLingerBytes = 256 << 10;
  auto it = lingering.find(fd);
  if (it == lingering.end()) return;
  char sink[16 << 10];
  for (;;) {
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n > 0) {
      it->second.discarded += static_cast<size_t>(n);
      if (it->second.discarded <= kLingerBytes) continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return;
    }
    return end_linger(fd);  // the peer closed, failed, or sent too much
  }
}

void SwitchDaemon::Impl::end_linger(int fd) {
  auto it = lingering.find(fd);
  if (it == lingering.end()) return;
  engine->unwatch(fd);
  if (auto s = per_source.find(it->second.source); s != per_source.end() && --s->second == 0) per_source.erase(s);
  lingering.erase(it);
  resume_accept();
}

// Room for a newcomer: the oldest lingering connection (of `source`, or of
// any address) is closed. False if there is none.
bool SwitchDaemon::Impl::end_oldest_linger(const uint32_t* source) {
  int oldest = -1;
  Time until = 0;
  for (const auto& [fd, l] : lingering)
    if ((!source || l.source == *source) && (oldest < 0 || l.until < until)) {
      oldest = fd;
      until = l.until;
    }
  if (oldest < 0) return false;
  end_linger(oldest);
  return true;
}

std::string SwitchDaemon::Impl::describe(const Conn& c) {
  return c.role == Role::Worker ? fmt::format("worker rank {}", c.rank) : std::string("the PS");
}

}  // namespace ina::rt
