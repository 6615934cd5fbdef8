#pragma once
// Socket plumbing for the UDP runtime: IPv4 endpoints, owned file
// descriptors, UDP/TCP socket setup with errors that name the address, and a
// newline-delimited JSON channel used by the control plane (job rendezvous,
// barrier, stats). Nothing here knows the INA protocol.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.hpp"

namespace ina::rt {

// Every runtime failure the user should read (bad address, bind failure,
// timeout, rejected join, aborted job) is a RuntimeError with a full message.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A RuntimeError in what the user gave a command before it runs: a flag,
// its configuration, layout or key file, the environment. The commands
// exit 2 on it, as on a command line that does not parse; 1 on any other.
struct InputError : RuntimeError {
  using RuntimeError::RuntimeError;
};
// SIGINT or SIGTERM came while the process blocks them to read them later
// (the commands' signalfd): a wait that would hold the process for seconds
// (joining a job, and the connect of a join) gives up at once. The commands
// exit 128 + the signal, as a shell reports a process the signal ended.
struct StopRequested : RuntimeError {
  StopRequested(int signal, const std::string& what) : RuntimeError(what), signo(signal) {}
  int signo;
};
inline int exit_status(const RuntimeError& e) {
  if (const auto* s = dynamic_cast<const StopRequested*>(&e)) return 128 + s->signo;
  return dynamic_cast<const InputError*>(&e) ? 2 : 1;
}
// The pending SIGINT or SIGTERM (blocked, so not yet delivered), else 0.
int pending_stop_signal();
// Throws StopRequested if one is pending; `doing` says what was given up.
void throw_if_stop_requested(const std::string& doing);

// "ip:port" (IPv4, numeric or "localhost").
struct Endpoint {
  sockaddr_in sa{};

  static Endpoint parse(std::string_view text);  // throws InputError naming the text
  // An IPv4 address (or "localhost") alone, at `port`; throws InputError naming it.
  static Endpoint parse_ip(std::string_view ip, uint16_t port = 0);
  static Endpoint any(uint16_t port = 0);
  std::string str() const;
  std::string ip() const;
  uint16_t port() const { return ntohs(sa.sin_port); }
  bool is_wildcard() const { return sa.sin_addr.s_addr == htonl(INADDR_ANY); }
  Endpoint with_port(uint16_t port) const;
  bool operator==(const Endpoint& o) const {
    return sa.sin_addr.s_addr == o.sa.sin_addr.s_addr && sa.sin_port == o.sa.sin_port;
  }
};

// An owned file descriptor (closed on destruction).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) { reset(); fd_ = std::exchange(o.fd_, -1); }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

std::string errno_text(int err);

// Non-blocking UDP socket bound to `at` (port 0: ephemeral), with large
// socket buffers. Throws "cannot bind UDP socket to <at>: <reason>".
// `reuseport`: SO_REUSEPORT is set, so more sockets (of this user) can bind
// the same address and share its datagrams (a reuseport group; a socket's
// index in the group is its order of binding). Before the bind, except for
// port 0: then right after it, so the socket gets a port no other group holds.
UniqueFd bind_udp(const Endpoint& at, int buffer_bytes, bool reuseport = false);

// UDP segmentation offload's ancillary data (Linux UDP GSO/GRO).
// Room for one UDP_SEGMENT or UDP_GRO control message.
constexpr size_t kUdpCmsgBytes = CMSG_SPACE(sizeof(int));
// Puts a UDP_SEGMENT control message in `ctl` (kUdpCmsgBytes, aligned for a
// cmsghdr) and makes it m's: the kernel cuts the send into datagrams of
// `segment` bytes, the last possibly shorter.
void set_udp_segment(msghdr& m, void* ctl, uint16_t segment);
// The segment size of a message received on a UDP_GRO socket (its UDP_GRO
// control message); 0 when the message holds a single datagram.
size_t udp_gro_segment(const msghdr& m);
// Whether SO_REUSEPORT is set on `fd`.
bool has_reuseport(int fd);
// Steers each datagram that reaches `fd`'s reuseport group of `n` sockets to
// the socket of index (big-endian u16 at byte `offset` of the UDP payload) mod n,
// with a classic BPF program (SO_ATTACH_REUSEPORT_CBPF; the kernel runs it with
// the packet starting at the UDP payload). A datagram shorter than offset + 2
// goes to index 0. Throws RuntimeError naming the socket on failure.
void attach_reuseport_steering(int fd, uint32_t offset, unsigned n);
// Non-blocking listening TCP socket (SO_REUSEADDR: a fixed port can be bound
// again while the connections of an earlier run linger in TIME_WAIT).
UniqueFd listen_tcp(const Endpoint& at);
// A switch's two sockets: UDP data and TCP control on one port number.
struct DataAndControl {
  UniqueFd udp, tcp;
};
// A fixed port: UDP bound to `at`, then TCP. Port 0: a port free for both.
// TCP is bound first, to a port the kernel picks among those no TCP socket
// holds (on a busy host TCP connections hold most of the ephemeral range,
// UDP sockets few), then UDP on the same number; if UDP holds it, another
// pick (64 of them), then every port of the local port range in turn
// (net.ipv4.ip_local_port_range) from a random one. So it fails only when no
// port of the range is free for both, and then says so.
// `reuseport`: the UDP socket is the first of a reuseport group (bind_udp; its
// SO_REUSEPORT is set after the bind, so it never joins another group).
DataAndControl bind_data_and_control(const Endpoint& at, int udp_buffer_bytes, bool reuseport = false);
// The kernel's local (ephemeral) port range, inclusive.
std::pair<uint16_t, uint16_t> local_port_range();

// At most `max` bytes of `s` as printable ASCII: bytes outside 0x20..0x7e,
// and the backslash (unless `keep_backslash`: text already escaped), appear
// as \xNN; "..." marks a cut. What every message that quotes a peer's or a
// file's text goes through (no raw control bytes, no terminal escapes, no
// forged log lines).
std::string printable(std::string_view s, size_t max = 80, bool keep_backslash = false);
// A JSON value as at most `max` characters of its ASCII-only text (control
// bytes and non-ASCII as JSON escapes), "..." marking a cut: how error
// messages quote a value from a peer or a file, however large or deep.
std::string quote_json(const nlohmann::json& v, size_t max = 80);
// Connects to `to`, retrying refused connections until `timeout` has passed
// (the peer may not be up yet). The result is non-blocking. Throws
// "timed out after X s connecting to <what> at <to> (<last error>)".
class WaitNotice;
// (notice: if given, says on stderr now and then that the connection is being retried.)
UniqueFd connect_tcp(const Endpoint& to, Time timeout, const std::string& what, WaitNotice* notice = nullptr);
Endpoint local_endpoint(int fd);
Endpoint peer_endpoint(int fd);
// Monotonic clock in picoseconds (CLOCK_MONOTONIC).
Time monotonic_now();
// CPU time (user + system) of this process so far, all threads, in seconds.
double process_cpu_seconds();

// A control line longer than its channel allows (LineChannel::set_limits).
struct LineTooLong : RuntimeError {
  using RuntimeError::RuntimeError;
};

// Newline-delimited JSON messages over a non-blocking stream socket.
class LineChannel {
 public:
  static constexpr size_t kMaxLine = 64 << 10;  // a control message is a few hundred bytes (a hot_set chunk ~45 KB)
  static constexpr size_t kMaxDepth = 8;         // control messages are objects a few levels deep at most
  static constexpr size_t kMaxPendingOutput = 1 << 20;  // unsent answers beyond this: the peer is not reading

  LineChannel() = default;
  explicit LineChannel(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }
  bool open() const { return static_cast<bool>(fd_); }
  void close() { fd_.reset(); }
  // The socket, out of the channel (which is closed after).
  UniqueFd take_fd() { return std::move(fd_); }

  // The longest line this channel takes (at most kMaxLine; a longer one
  // throws LineTooLong before more than max_line + 1 bytes of it are held),
  // and the unsent output beyond which send() throws (one more message may
  // always be queued below it). Defaults: kMaxLine, kMaxPendingOutput.
  void set_limits(size_t max_line, size_t max_pending_output);
  size_t max_line() const { return max_line_; }
  // Received bytes of a line not yet complete (no newline yet).
  size_t partial_bytes() const { return in_.size(); }

  // Queues a message and writes as much as the socket takes.
  void send(const nlohmann::json& msg);
  // Writes queued bytes; returns true when nothing is left. Throws on a broken connection.
  bool flush();
  bool pending_output() const { return out_off_ < out_.size(); }
  // Reads what is available and appends complete messages to `msgs`. Returns
  // false at end of stream. Throws RuntimeError on an oversized line or bad JSON.
  bool receive(std::vector<nlohmann::json>& msgs);
  // One line (without its newline) -> a JSON object, or RuntimeError: too
  // long, nested too deep, not JSON, not an object.
  static nlohmann::json parse_line(std::string_view line);
  // Blocks (with poll) until one message arrives or `deadline` (monotonic) passes;
  // returns false on timeout. Throws if the peer closes the connection.
  bool wait_message(nlohmann::json& msg, Time deadline, const std::string& peer);

 private:
  UniqueFd fd_;
  std::string in_, out_;
  size_t out_off_ = 0;
  size_t max_line_ = kMaxLine, max_pending_ = kMaxPendingOutput;
  std::vector<nlohmann::json> backlog_;  // parsed but not yet handed out by wait_message
};

}  // namespace ina::rt
