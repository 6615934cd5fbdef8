#include "runtime/net.hpp"

#include "core/json_depth.hpp"
#include "runtime/auth.hpp"
#include "runtime/wait_notice.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace ina::rt {

std::string errno_text(int err) { return std::strerror(err); }

Endpoint Endpoint::parse(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    throw InputError(fmt::format("invalid address '{}': expected ip:port, e.g. 127.0.0.1:7700", text));
  std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || ptr != port_text.data() + port_text.size() || port > 65535)
    throw InputError(fmt::format("invalid address '{}': port '{}' is not a number in 0..65535", text, port_text));
  try {
    return parse_ip(host, static_cast<uint16_t>(port));
  } catch (const InputError& e) {
    throw InputError(fmt::format("invalid address '{}': {}", text, e.what()));
  }
}

Endpoint Endpoint::parse_ip(std::string_view ip, uint16_t port) {
  const std::string host = ip == "localhost" ? "127.0.0.1" : std::string(ip);
  Endpoint e;
  e.sa.sin_family = AF_INET;
  e.sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &e.sa.sin_addr) != 1)
    throw InputError(fmt::format("'{}' is not an IPv4 address", ip));
  return e;
}

Endpoint Endpoint::any(uint16_t port) {
  Endpoint e;
  e.sa.sin_family = AF_INET;
  e.sa.sin_port = htons(port);
  e.sa.sin_addr.s_addr = htonl(INADDR_ANY);
  return e;
}

std::string Endpoint::ip() const {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
  return buf;
}

std::string Endpoint::str() const { return fmt::format("{}:{}", ip(), port()); }

Endpoint Endpoint::with_port(uint16_t port) const {
  Endpoint e = *this;
  e.sa.sin_port = htons(port);
  return e;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Time monotonic_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Time>(ts.tv_sec) * kSec + static_cast<Time>(ts.tv_nsec) * kNs;
}

void set_udp_segment(msghdr& m, void* ctl, uint16_t segment) {
  std::memset(ctl, 0, kUdpCmsgBytes);
  m.msg_control = ctl;
  m.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
}

size_t udp_gro_segment(const msghdr& m) {
  for (const cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&m), const_cast<cmsghdr*>(c)))
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      return v > 0 ? static_cast<size_t>(v) : 0;
    }
  return 0;
}

UniqueFd bind_udp(const Endpoint& at, int buffer_bytes, bool reuseport) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw RuntimeError(fmt::format("cannot create a UDP socket: {}", errno_text(errno)));
  // SO_REUSEPORT before the bind, except for an ephemeral port: there the
  // kernel would count a port held by another reuseport group of this user
  // as free and could put this socket in that group; bound alone first, the
  // socket gets a port nobody holds and opens its group right after.
  const int one = 1;
  auto set_reuseport = [&] {
    if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
      throw RuntimeError(fmt::format("cannot set SO_REUSEPORT on the UDP socket for {}: {}", at.str(), errno_text(errno)));
  };
  if (reuseport && at.port() != 0) set_reuseport();
  // Best effort: the kernel caps these at net.core.{r,w}mem_max.
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa) != 0)
    throw RuntimeError(fmt::format("cannot bind UDP socket to {}: {}", at.str(), errno_text(errno)));
  if (reuseport && at.port() == 0) set_reuseport();
  return fd;
}

bool has_reuseport(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &len) == 0 && on != 0;
}

void attach_reuseport_steering(int fd, uint32_t offset, unsigned n) {
  if (n == 0) throw RuntimeError("reuseport steering: a group needs at least one socket");
  // Loads in classic BPF are big-endian (network order) and a load beyond the
  // packet would end the program with 0 anyway; the length test says so.
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, offset + 2, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, 0),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, offset),
      BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
      BPF_STMT(BPF_RET | BPF_A, 0),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0)
    throw RuntimeError(fmt::format("cannot attach the steering program to the UDP socket bound to {}: {}",
                                   local_endpoint(fd).str(), errno_text(errno)));
}

UniqueFd listen_tcp(const Endpoint& at) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw RuntimeError(fmt::format("cannot create a TCP socket: {}", errno_text(errno)));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart while old connections linger
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa) != 0)
    throw RuntimeError(fmt::format("cannot bind TCP control socket to {}: {}", at.str(), errno_text(errno)));
  if (::listen(fd.get(), 256) != 0)
    throw RuntimeError(fmt::format("cannot listen on {}: {}", at.str(), errno_text(errno)));
  return fd;
}

std::pair<uint16_t, uint16_t> local_port_range() {
  unsigned lo = 32768, hi = 60999;  // Linux's default
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    unsigned a = 0, b = 0;
    if (std::fscanf(f, "%u %u", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535) lo = a, hi = b;
    std::fclose(f);
  }
  return {static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
}

namespace {

// One attempt at a port pair on `ip` (port 0: the kernel picks TCP's): a TCP
// socket bound without SO_REUSEADDR (so the port is one no TCP socket holds,
// not even in TIME_WAIT) and listening, then UDP on the same number. Empty
// when either port is taken; throws on any other failure.
std::optional<DataAndControl> try_port_pair(const Endpoint& ip, uint16_t port, int udp_buffer_bytes, bool reuseport) {
  DataAndControl s;
  s.tcp = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.tcp) throw RuntimeError(fmt::format("cannot create a TCP socket: {}", errno_text(errno)));
  const Endpoint at = ip.with_port(port);
  if (::bind(s.tcp.get(), reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa) != 0) {
    if (errno == EADDRINUSE) return std::nullopt;
    throw RuntimeError(fmt::format("cannot bind TCP control socket to {}: {}", at.str(), errno_text(errno)));
  }
  const Endpoint bound = local_endpoint(s.tcp.get());
  s.udp = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.udp) throw RuntimeError(fmt::format("cannot create a UDP socket: {}", errno_text(errno)));
  setsockopt(s.udp.get(), SOL_SOCKET, SO_RCVBUF, &udp_buffer_bytes, sizeof udp_buffer_bytes);
  setsockopt(s.udp.get(), SOL_SOCKET, SO_SNDBUF, &udp_buffer_bytes, sizeof udp_buffer_bytes);
  if (::bind(s.udp.get(), reinterpret_cast<const sockaddr*>(&bound.sa), sizeof bound.sa) != 0) {
    if (errno == EADDRINUSE) return std::nullopt;
    throw RuntimeError(fmt::format("cannot bind UDP socket to {}: {}", bound.str(), errno_text(errno)));
  }
  // After the bind, as bind_udp does for port 0: the socket opens a group of its own.
  const int one = 1;
  if (reuseport && setsockopt(s.udp.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    throw RuntimeError(fmt::format("cannot set SO_REUSEPORT on the UDP socket for {}: {}", bound.str(), errno_text(errno)));
  if (::listen(s.tcp.get(), 256) != 0) {
    if (errno == EADDRINUSE) return std::nullopt;
    throw RuntimeError(fmt::format("cannot listen on {}: {}", bound.str(), errno_text(errno)));
  }
  return s;
}

}  // namespace

DataAndControl bind_data_and_control(const Endpoint& at, int udp_buffer_bytes, bool reuseport) {
  if (at.port() != 0) {
    DataAndControl s;
    s.udp = bind_udp(at, udp_buffer_bytes, reuseport);
    s.tcp = listen_tcp(at);
    return s;
  }
  constexpr int kKernelPicks = 64;
  for (int attempt = 0; attempt < kKernelPicks; ++attempt)
    if (auto s = try_port_pair(at, 0, udp_buffer_bytes, reuseport)) return std::move(*s);
  const auto [lo, hi] = local_port_range();
  const unsigned span = unsigned{hi} - lo + 1;
  Key r = random_key();
  const unsigned first = (unsigned{r[0]} << 8 | r[1]) % span;
  for (unsigned k = 0; k < span; ++k)
    if (auto s = try_port_pair(at, static_cast<uint16_t>(lo + (first + k) % span), udp_buffer_bytes, reuseport))
      return std::move(*s);
  throw RuntimeError(fmt::format("cannot bind the switch's sockets on {}: no port of the local port range {}..{} "
                                 "(net.ipv4.ip_local_port_range) is free for both UDP data and TCP control",
                                 at.ip(), lo, hi));
}

int pending_stop_signal() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  for (const int s : {SIGINT, SIGTERM})
    if (sigismember(&pending, s) == 1) return s;
  return 0;
}

void throw_if_stop_requested(const std::string& doing) {
  if (const int s = pending_stop_signal())
    throw StopRequested(s, fmt::format("stopped by signal {} ({}) while {}", s, strsignal(s), doing));
}

UniqueFd connect_tcp(const Endpoint& to, Time timeout, const std::string& what, WaitNotice* notice) {
  const Time deadline = monotonic_now() + timeout;
  std::string last = "no attempt";
  for (;;) {
    // (A join's connect, which announces its wait, gives up on a stop
    // signal; a launcher reading statistics while it stops does not.)
    if (notice) throw_if_stop_requested(fmt::format("connecting to {} at {}", what, to.str()));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) throw RuntimeError(fmt::format("cannot create a TCP socket: {}", errno_text(errno)));
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.sa), sizeof to.sa) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        const Time left = deadline - monotonic_now();
        const int ms = static_cast<int>(std::max<Time>(0, std::min<Time>(left, kSec)) / kMs);
        const int r = ::poll(&p, 1, ms);
        if (r > 0) {
          socklen_t len = sizeof err;
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = ETIMEDOUT;
        }
      }
    }
    if (err == 0) {
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last = errno_text(err);
    const Time left = deadline - monotonic_now();
    if (left <= 0)
      throw RuntimeError(fmt::format("timed out after {:.1f} s connecting to {} at {} ({})", to_ms(timeout) / 1000,
                                     what, to.str(), last));
    if (notice) notice->tick(timeout, [&] { return fmt::format("waiting for {} at {} ({}; retrying)", what, to.str(), last); });
    const Time nap = std::min<Time>(left, 50 * kMs);
    timespec ts{static_cast<time_t>(nap / kSec), static_cast<long>(nap % kSec / kNs)};
    nanosleep(&ts, nullptr);
  }
}

Endpoint local_endpoint(int fd) {
  Endpoint e;
  socklen_t len = sizeof e.sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&e.sa), &len);
  return e;
}

Endpoint peer_endpoint(int fd) {
  Endpoint e;
  socklen_t len = sizeof e.sa;
  getpeername(fd, reinterpret_cast<sockaddr*>(&e.sa), &len);
  return e;
}

// ---------------------------------------------------------------- LineChannel

void LineChannel::set_limits(size_t max_line, size_t max_pending_output) {
  max_line_ = std::min(max_line, kMaxLine);
  max_pending_ = max_pending_output;
}

void LineChannel::send(const nlohmann::json& msg) {
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  }
  // A peer that does not read its answers cannot make us buffer without bound:
  // at most max_pending_ bytes and one message.
  if (out_.size() - out_off_ > max_pending_)
    throw RuntimeError(fmt::format("control peer does not read: more than {} bytes of answers pending", max_pending_));
  // Invalid UTF-8 in a string (e.g. quoted from a peer) is replaced, never thrown.
  out_ += msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out_ += '\n';
  flush();
}

bool LineChannel::flush() {
  while (out_off_ < out_.size()) {
    const ssize_t n = ::send(fd_.get(), out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      throw RuntimeError(fmt::format("control connection broken: {}", errno_text(errno)));
    }
    out_off_ += static_cast<size_t>(n);
  }
  return true;
}

std::string printable(std::string_view s, size_t max, bool keep_backslash) {
  std::string out;
  out.reserve(std::min(s.size(), max) + 8);
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && (c != '\\' || keep_backslash)) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > max) out += "...";
  return out;
}

std::string quote_json(const nlohmann::json& v, size_t max) {
  std::string s = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return s;
}

nlohmann::json LineChannel::parse_line(std::string_view line) {
  if (line.size() > kMaxLine) throw RuntimeError(fmt::format("control message longer than {} bytes", kMaxLine));
  // Control messages are flat objects; a deep one is refused before the
  // (recursive) parser sees it.
  if (const size_t d = json_nesting_depth(line); d > kMaxDepth)
    throw RuntimeError(fmt::format("control message nested {} levels deep (at most {})", d, kMaxDepth));
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw RuntimeError(fmt::format("malformed control message: '{}'", printable(line, 80)));
  return j;
}

bool LineChannel::receive(std::vector<nlohmann::json>& msgs) {
  if (&msgs != &backlog_ && !backlog_.empty()) {  // left over by wait_message
    for (auto& m : backlog_) msgs.push_back(std::move(m));
    backlog_.clear();
  }
  bool eof = false;
  char buf[16384];
  // At most kMaxLine bytes per call: a flooding peer cannot keep the loop here
  // (the rest stays in the socket and is read at its next readiness event).
  // Lines are taken out as they complete, and a read never brings the
  // incomplete one beyond max_line_ + 1 bytes: that is all a peer can make
  // this channel hold.
  for (size_t taken = 0; taken < kMaxLine;) {
    const size_t room = std::min(sizeof buf, max_line_ + 1 - in_.size());
    const ssize_t n = ::recv(fd_.get(), buf, room, 0);
    if (n > 0) {
      taken += static_cast<size_t>(n);
      const size_t scan_from = in_.size();
      in_.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl = in_.find('\n', scan_from); nl != std::string::npos; nl = in_.find('\n', start)) {
        const std::string_view line(in_.data() + start, nl - start);
        start = nl + 1;
        if (!line.empty()) msgs.push_back(parse_line(line));
      }
      in_.erase(0, start);
      if (in_.size() > max_line_)
        throw LineTooLong(fmt::format("control message longer than {} bytes", max_line_));
      continue;
    }
    if (n == 0) { eof = true; break; }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    eof = true;  // reset by peer and the like: the connection is gone
    break;
  }
  if (in_.empty() && in_.capacity() > sizeof buf) in_.shrink_to_fit();
  return !eof;
}

bool LineChannel::wait_message(nlohmann::json& msg, Time deadline, const std::string& peer) {
  for (;;) {
    if (!backlog_.empty()) {
      msg = std::move(backlog_.front());
      backlog_.erase(backlog_.begin());
      return true;
    }
    const bool open = receive(backlog_);
    if (!backlog_.empty()) continue;
    if (!open) throw RuntimeError(fmt::format("{} closed the control connection", peer));
    const Time left = deadline - monotonic_now();
    if (left <= 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<Time>(left, kSec) / kMs) + 1);
  }
}

}  // namespace ina::rt
