// The switch's TCP control connections: accepting them within the
// ControlLimits, reading their lines, answering and closing them.
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
  drop(c, "was closed by a connection limit");
}

void SwitchDaemon::Impl::pause_accept() {
  if (!accepting) return;
  engine->unwatch(listener.get());
  accepting = false;
  ++limit_counts.accept_pauses;
}

void SwitchDaemon::Impl::resume_accept() {
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
    const bool full = conns.size() >= limits.max_connections;
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
      if ((err == EMFILE || err == ENFILE) && evict_oldest_visitor(nullptr)) continue;
      return pause_accept();
    }
    UniqueFd guard(fd);
    const uint32_t src = from.sin_addr.s_addr;
    if (per_source[src] >= limits.max_per_source && !evict_oldest_visitor(&src)) {
      ++limit_counts.refused_per_source;
      const std::string why = fmt::format("{{\"op\":\"error\",\"message\":\"too many connections from {} (at most {} "
                                          "from one address)\"}}\n", Endpoint{from}.ip(), limits.max_per_source);
      [[maybe_unused]] auto r = ::send(fd, why.data(), why.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    if (full && conns.size() >= limits.max_connections) evict_oldest_visitor(nullptr);
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
  drop(c, "was rejected");
}

// Closes a connection; a member leaving a live job that is not finished aborts it.
void SwitchDaemon::Impl::drop(Conn& c, const std::string& how) {
  const int fd = c.ch.fd();
  if (Job* j = c.job) {
    if (live(*j)) {
      abort_job(*j, fmt::format("{} of job {} {}", describe(c), j->id, how), &c);
    } else {
      leave_pending(*j, c);
    }
  }
  engine->unwatch(fd);
  // Input left unread makes close() send a reset, which can discard an
  // error line (a refusal, a limit) before the peer has read it: take what
  // has arrived (at most 1 MiB, non-blocking) so that the close is an
  // orderly end of stream.
  char sink[16 << 10];
  for (int i = 0; i < 64 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  if (auto it = per_source.find(c.source); it != per_source.end() && --it->second == 0) per_source.erase(it);
  conns.erase(fd);
  resume_accept();
}

std::string SwitchDaemon::Impl::describe(const Conn& c) {
  return c.role == Role::Worker ? fmt::format("worker rank {}", c.rank) : std::string("the PS");
}

}  // namespace ina::rt
