// `ina bench udpio` (measure both and keep what wins):
// which kernel I/O mechanism moves a switch's datagrams fastest, measured
// apart from the protocol.
//
// The pattern is a switch's: a reflector thread receives datagrams on one
// UDP socket from G = 4 generator sockets (loopback) and, for every datagram
// it receives, sends one datagram of the same size back to its sender (as a
// switch sends a result per aggregated packet). The reflector reads each
// datagram's tag (generator, length, sequence number) and echoes the bytes in
// place, so the figures are the I/O path's alone. Reflector methods:
//
//  - mmsg: epoll + recvmmsg/sendmmsg in batches of 64 (the runtime's
//    UdpEngine today: up to 16 receive rounds per readiness event, each
//    followed by one sendmmsg of its replies).
//  - gso: the same loop with UDP_GRO on receive (a coalesced datagram is
//    split by the gso_size of its UDP_GRO cmsg) and UDP_SEGMENT on send:
//    consecutive replies to the same sender are coalesced into one GSO send
//    of up to 64 segments and 65 507 bytes. Loopback coalesces on receive
//    only what the sender sent with GSO, so the generator sends with
//    UDP_SEGMENT too (and receives with UDP_GRO).
//  - uring: io_uring; receive with one multishot recvmsg over a provided
//    buffer ring, send with one sendmsg SQE per reply from the received
//    buffer (which returns to the ring when its send completes), one
//    io_uring_submit per batch of completions.
//  - uring_gso: the same with UDP_GRO on receive and one UDP_SEGMENT sendmsg
//    per received (coalesced) buffer; the generator as for gso.
//
// One generator thread (this benchmark's thread, busy polling) drives the G
// sockets: each keeps W datagrams outstanding and sends a new one per reply,
// with W chosen so that G x W datagrams fit in half the reflector's receive
// buffer (8 MB requested; the kernel grants twice that, for overhead). It checks every reply's generator, length and
// sequence number; a gap is a lost datagram, nothing is resent, and any loss
// or wrong reply fails the case. A case runs ~1.2 s of traffic, then drains.
//
// Reported per case: reflector datagrams received per second, Gbit/s of
// payload received, the reflector thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
// per byte received and over the wall time (1 = one core busy), its sleeps
// (voluntary context switches: waits for datagrams) and preemptions
// (involuntary ones: other threads on its core, the noise of a shared
// machine) per second, the generator's CPU and preemptions, CPU of any other
// thread of the process (io_uring workers), datagrams per wake-up of the
// reflector and lost datagrams.
#include <benchmark/benchmark.h>

#include <fmt/format.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/net.hpp"

namespace {

using namespace ina;

constexpr unsigned kGenerators = 4;
constexpr unsigned kBatch = 64;            // datagrams (or GSO sends) per recvmmsg / sendmmsg
constexpr unsigned kMaxRxRounds = 16;      // recvmmsg rounds per readiness event, as in UdpEngine
constexpr unsigned kMaxSegments = 64;      // segments per GSO send
constexpr size_t kMaxUdpPayload = 65507;   // IPv4: 65535 - 20 - 8
constexpr size_t kGroSlot = 65536;         // a receive buffer that holds any coalesced datagram
constexpr int kSocketBuffer = 8 << 20;     // SO_RCVBUF / SO_SNDBUF requested
constexpr double kTrafficSeconds = 1.2;

enum class Method { Mmsg, Gso, Uring, UringGso };

bool uses_gso(Method m) { return m == Method::Gso || m == Method::UringGso; }

// The tag at the start of every datagram.
struct Tag {
  uint32_t gen;
  uint32_t len;
  uint64_t seq;
};

double clock_s(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double thread_cpu_s() { return clock_s(CLOCK_THREAD_CPUTIME_ID); }
double process_cpu_s() { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }
double now_s() { return clock_s(CLOCK_MONOTONIC); }

// A thread's CPU time and context switches: voluntary ones are its sleeps
// (waits for datagrams), involuntary ones preemptions by other threads.
struct Usage {
  double cpu_s = 0;
  long sleeps = 0, preempted = 0;
  static Usage of_this_thread() {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    return {thread_cpu_s(), ru.ru_nvcsw, ru.ru_nivcsw};
  }
  Usage operator-(const Usage& o) const { return {cpu_s - o.cpu_s, sleeps - o.sleeps, preempted - o.preempted}; }
  Usage& operator+=(const Usage& o) {
    cpu_s += o.cpu_s, sleeps += o.sleeps, preempted += o.preempted;
    return *this;
  }
};

// A UDP socket on loopback with 8 MB buffers (forced past net.core.*mem_max
// when permitted) and UDP_GRO if asked; returns the receive buffer the kernel
// granted (bytes of truesize it holds).
rt::UniqueFd udp_socket(bool gro, int& rcvbuf) {
  rt::UniqueFd fd = rt::bind_udp(rt::Endpoint::parse("127.0.0.1:0"), kSocketBuffer);
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &kSocketBuffer, sizeof kSocketBuffer);
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &kSocketBuffer, sizeof kSocketBuffer);
  socklen_t l = sizeof rcvbuf;
  getsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, &l);
  const int one = 1;
  if (gro && setsockopt(fd.get(), SOL_UDP, UDP_GRO, &one, sizeof one) != 0)
    throw rt::RuntimeError(fmt::format("setsockopt(UDP_GRO): {}", rt::errno_text(errno)));
  return fd;
}

// The segment size of a received datagram: the UDP_GRO cmsg's gso_size when
// the kernel coalesced several, else the whole length.
size_t gro_segment(const msghdr& h, size_t len) {
  const size_t seg = rt::udp_gro_segment(h);
  return seg ? seg : len;
}

// Calls fn(data, len) for every segment of a (possibly coalesced) datagram.
template <class Fn>
void for_each_segment(std::byte* data, size_t len, size_t seg, Fn&& fn) {
  for (size_t off = 0; off < len; off += seg) fn(data + off, std::min(seg, len - off));
}

constexpr size_t kCtlBytes = rt::kUdpCmsgBytes;

// A UDP_SEGMENT cmsg (in `ctl`, kCtlBytes) on h: the kernel cuts the send
// into datagrams of `seg` bytes (the last may be shorter).
void set_segment_size(msghdr& h, std::byte* ctl, size_t seg) { rt::set_udp_segment(h, ctl, static_cast<uint16_t>(seg)); }

// Buffers for one recvmmsg of up to 64 datagrams (with `gro`, each slot
// holds a coalesced datagram and its UDP_GRO cmsg).
class RxBatch {
 public:
  RxBatch(bool gro, size_t size)
      : gro_(gro), slot_(gro ? kGroSlot : size), buf_(kBatch * slot_), ctl_(kBatch * kCtlBytes), mm_(kBatch),
        iov_(kBatch), from_(kBatch) {}

  // One non-blocking recvmmsg: the datagrams received (0 if none).
  int receive(int fd) {
    for (unsigned i = 0; i < kBatch; ++i) {
      iov_[i] = {buf_.data() + i * slot_, slot_};
      msghdr& h = mm_[i].msg_hdr;
      h = {};
      h.msg_name = &from_[i];
      h.msg_namelen = sizeof from_[i];
      h.msg_iov = &iov_[i];
      h.msg_iovlen = 1;
      if (gro_) h.msg_control = ctl_.data() + i * kCtlBytes, h.msg_controllen = kCtlBytes;
    }
    return std::max(0, recvmmsg(fd, mm_.data(), kBatch, MSG_DONTWAIT, nullptr));
  }
  const sockaddr_in* from(int i) const { return &from_[i]; }
  // Calls fn(segment, length) for each segment of datagram i; false (and
  // nothing called) if the datagram or its cmsg was truncated.
  template <class Fn>
  bool segments(int i, Fn&& fn) {
    const msghdr& h = mm_[i].msg_hdr;
    if (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return false;
    const size_t len = mm_[i].msg_len;
    for_each_segment(buf_.data() + static_cast<size_t>(i) * slot_, len, gro_ ? gro_segment(h, len) : len, fn);
    return true;
  }

 private:
  bool gro_;
  size_t slot_;
  std::vector<std::byte> buf_, ctl_;
  std::vector<mmsghdr> mm_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_in> from_;
};

// Datagrams to send with sendmmsg: with `gso`, consecutive datagrams of one
// size to one destination are coalesced into one UDP_SEGMENT send (up to 64
// segments, 65 507 bytes; contiguous ones into one iovec).
class TxBatch {
 public:
  TxBatch(bool gso, size_t max_datagrams) : gso_(gso), mm_(max_datagrams), iov_(max_datagrams), msg_(max_datagrams) {
    ctl_.resize(max_datagrams * kCtlBytes);
  }
  bool full() const { return iovs_ == iov_.size(); }
  bool empty() const { return n_ == 0; }

  // `to` null: the socket is connected.
  void add(const sockaddr_in* to, std::byte* data, size_t len) {
    if (gso_ && n_ > 0) {
      Msg& m = msg_[n_ - 1];
      if (m.seg == len && m.segs < kMaxSegments && m.bytes + len <= kMaxUdpPayload &&
          (to ? m.has_to && std::memcmp(&m.to, to, sizeof *to) == 0 : !m.has_to)) {
        iovec& last = iov_[m.iov0 + m.iovs - 1];
        if (static_cast<std::byte*>(last.iov_base) + last.iov_len == data) last.iov_len += len;
        else iov_[iovs_++] = {data, len}, ++m.iovs;
        ++m.segs;
        m.bytes += len;
        return;
      }
    }
    Msg& m = msg_[n_++];
    m = {};
    if (to) m.to = *to, m.has_to = true;
    m.seg = len;
    m.segs = 1;
    m.bytes = len;
    m.iov0 = iovs_;
    m.iovs = 1;
    iov_[iovs_++] = {data, len};
  }

  // Sends everything (retrying while the socket's buffer is full); returns
  // the datagrams sent or -errno.
  long flush(int fd, uint64_t& calls) {
    for (size_t i = 0; i < n_; ++i) {
      Msg& m = msg_[i];
      msghdr& h = mm_[i].msg_hdr;
      h = {};
      if (m.has_to) h.msg_name = &m.to, h.msg_namelen = sizeof m.to;
      h.msg_iov = &iov_[m.iov0];
      h.msg_iovlen = m.iovs;
      if (m.segs > 1) set_segment_size(h, ctl_.data() + i * kCtlBytes, m.seg);
    }
    long sent = 0;
    size_t off = 0;
    while (off < n_) {
      ++calls;
      const int k = ::sendmmsg(fd, mm_.data() + off, static_cast<unsigned>(n_ - off), MSG_DONTWAIT);
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR) continue;
        const int e = errno;
        n_ = iovs_ = 0;
        return -e;
      }
      for (int i = 0; i < k; ++i) sent += static_cast<long>(msg_[off + i].segs);
      off += static_cast<size_t>(k);
    }
    n_ = iovs_ = 0;
    return sent;
  }

 private:
  struct Msg {
    sockaddr_in to;
    bool has_to;
    size_t seg, segs, bytes, iov0, iovs;
  };
  bool gso_;
  std::vector<mmsghdr> mm_;
  std::vector<iovec> iov_;
  std::vector<Msg> msg_;
  std::vector<std::byte> ctl_;
  size_t n_ = 0, iovs_ = 0;
};

struct ReflectorResult {
  uint64_t dgrams = 0, bytes = 0, bad = 0, wakeups = 0, calls = 0;
  Usage use;
  std::string error;
};

struct Shared {
  std::atomic<bool> ready{false}, stop{false};
};

// Checks a segment's tag against its length (the reflector's share of the
// per-datagram work: it must look at every datagram).
void reflect_segment(const std::byte* d, size_t len, ReflectorResult& r) {
  Tag t;
  if (len < sizeof t) {
    ++r.bad;
    return;
  }
  std::memcpy(&t, d, sizeof t);
  if (t.len != len || t.gen >= kGenerators) ++r.bad;
  ++r.dgrams;
  r.bytes += len;
}

// mmsg and gso: epoll + recvmmsg/sendmmsg.
void reflect_mmsg(int fd, bool gso, size_t size, Shared& sh, ReflectorResult& r) {
  RxBatch rx(gso, size);
  TxBatch tx(gso, kBatch * (gso ? kMaxSegments : 1));
  rt::UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev);
  sh.ready = true;
  const Usage u0 = Usage::of_this_thread();
  while (!sh.stop.load(std::memory_order_relaxed)) {
    epoll_event evs[4];
    const int ne = epoll_wait(ep.get(), evs, 4, 5);
    if (ne <= 0) continue;
    ++r.wakeups;
    for (unsigned round = 0; round < kMaxRxRounds; ++round) {
      ++r.calls;
      const int n = rx.receive(fd);
      if (n == 0) break;
      for (int i = 0; i < n; ++i)
        if (!rx.segments(i, [&](std::byte* s, size_t l) {
              reflect_segment(s, l, r);
              tx.add(rx.from(i), s, l);
            }))
          ++r.bad;
      const long s = tx.flush(fd, r.calls);
      if (s < 0) {
        r.error = fmt::format("sendmmsg: {}", rt::errno_text(static_cast<int>(-s)));
        sh.stop = true;
      }
      if (static_cast<unsigned>(n) < kBatch) break;
    }
  }
  r.use = Usage::of_this_thread() - u0;
}

// uring and uring_gso: multishot recvmsg over a provided buffer ring; each
// received buffer is sent back (one sendmsg SQE, with UDP_SEGMENT when it
// holds several segments) and returns to the ring when that send completes.
void reflect_uring(int fd, bool gso, size_t size, unsigned nbufs, Shared& sh, ReflectorResult& r) {
  io_uring ring;
  io_uring_params p{};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int e = io_uring_queue_init_params(1024, &ring, &p);
  if (e == -EINVAL) {  // a kernel before 6.1: no deferred task work
    p = {};
    e = io_uring_queue_init_params(1024, &ring, &p);
  }
  if (e < 0) {
    r.error = fmt::format("io_uring_queue_init: {}", rt::errno_text(-e));
    sh.ready = true;
    return;
  }
  const size_t ctl_len = gso ? kCtlBytes : 0;
  const size_t payload = gso ? kGroSlot : size;
  const size_t bufsz = sizeof(io_uring_recvmsg_out) + sizeof(sockaddr_in) + ctl_len + payload;
  const unsigned mask = nbufs - 1;
  const uint16_t bgid = 1;
  const size_t ring_bytes = nbufs * sizeof(io_uring_buf);
  void* ring_mem = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::vector<std::byte> bufs(nbufs * bufsz);
  auto* br = static_cast<io_uring_buf_ring*>(ring_mem);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(ring_mem);
  reg.ring_entries = nbufs;
  reg.bgid = bgid;
  e = ring_mem == MAP_FAILED ? -errno : io_uring_register_buf_ring(&ring, &reg, 0);
  if (e < 0) {
    r.error = fmt::format("io_uring_register_buf_ring: {}", rt::errno_text(-e));
    if (ring_mem != MAP_FAILED) munmap(ring_mem, ring_bytes);
    io_uring_queue_exit(&ring);
    sh.ready = true;
    return;
  }
  io_uring_buf_ring_init(br);
  for (unsigned b = 0; b < nbufs; ++b) io_uring_buf_ring_add(br, bufs.data() + b * bufsz, static_cast<unsigned>(bufsz), static_cast<uint16_t>(b), mask, static_cast<int>(b));
  io_uring_buf_ring_advance(br, static_cast<int>(nbufs));

  msghdr rx_tmpl{};
  rx_tmpl.msg_namelen = sizeof(sockaddr_in);
  rx_tmpl.msg_controllen = ctl_len;
  // Per buffer: the send's msghdr, iovec and UDP_SEGMENT cmsg (alive until its completion).
  struct Tx {
    msghdr h;
    iovec iov;
    alignas(cmsghdr) std::byte ctl[kCtlBytes];
  };
  std::vector<Tx> txs(nbufs);
  constexpr uint64_t kRecvTag = ~0ull, kCancelTag = ~1ull;

  auto get_sqe = [&] {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    while (!sqe) {
      io_uring_submit(&ring);
      sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
  };
  auto arm = [&] {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recvmsg_multishot(sqe, fd, &rx_tmpl, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = bgid;
    io_uring_sqe_set_data64(sqe, kRecvTag);
  };
  arm();
  io_uring_submit(&ring);
  sh.ready = true;
  const Usage u0 = Usage::of_this_thread();
  bool armed = true, stopping = false;
  uint64_t sending = 0;  // sends submitted and not completed
  double drain_until = 0;
  for (;;) {
    // On stop: cancel the receive and wait for it and every send to
    // complete, so that the kernel writes nothing into `bufs` once freed.
    if (!stopping && (sh.stop.load(std::memory_order_relaxed) || !r.error.empty())) {
      stopping = true;
      r.use = Usage::of_this_thread() - u0;
      if (armed) {
        io_uring_sqe* sqe = get_sqe();
        io_uring_prep_cancel64(sqe, kRecvTag, 0);
        io_uring_sqe_set_data64(sqe, kCancelTag);
      }
      drain_until = now_s() + 2;
    }
    if (stopping && !armed && sending == 0) break;
    if (stopping && now_s() > drain_until) {
      // Never seen; the buffers stay allocated (leaked) rather than freed under the kernel.
      if (r.error.empty()) r.error = "io_uring: the receive or a send did not complete within 2 s of the stop";
      std::make_unique<std::vector<std::byte>>(std::move(bufs)).release();
      break;
    }
    if (!stopping && !armed) arm(), armed = true;
    __kernel_timespec ts{0, 5'000'000};
    io_uring_cqe* first = nullptr;
    ++r.calls;
    const int w = io_uring_submit_and_wait_timeout(&ring, &first, 1, &ts, nullptr);
    if (w < 0 && w != -ETIME && w != -EINTR && r.error.empty()) r.error = fmt::format("io_uring wait: {}", rt::errno_text(-w));
    if (!first) continue;
    if (!stopping) ++r.wakeups;
    unsigned seen = 0, returned = 0;
    auto give_back = [&](uint16_t b) {
      io_uring_buf_ring_add(br, bufs.data() + b * bufsz, static_cast<unsigned>(bufsz), b, mask, static_cast<int>(returned++));
    };
    io_uring_cqe* cqe;
    unsigned head;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag == kCancelTag) continue;
      if (tag != kRecvTag) {  // a send completed: its buffer returns to the ring
        --sending;
        if (cqe->res < 0 && r.error.empty()) r.error = fmt::format("io_uring sendmsg: {}", rt::errno_text(-cqe->res));
        give_back(static_cast<uint16_t>(tag));
        continue;
      }
      if (!(cqe->flags & IORING_CQE_F_MORE)) armed = false;
      if (cqe->res < 0) {
        // Out of buffers: re-armed once sends return some (the datagrams wait in the socket).
        if (cqe->res != -ENOBUFS && !(stopping && cqe->res == -ECANCELED) && r.error.empty())
          r.error = fmt::format("io_uring recvmsg: {}", rt::errno_text(-cqe->res));
        continue;
      }
      if (!(cqe->flags & IORING_CQE_F_BUFFER)) {
        r.error = "io_uring recvmsg completed without a buffer";
        continue;
      }
      const auto b = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
      std::byte* base = bufs.data() + b * bufsz;
      io_uring_recvmsg_out* o = io_uring_recvmsg_validate(base, cqe->res, &rx_tmpl);
      if (stopping || !o || (o->flags & (MSG_TRUNC | MSG_CTRUNC)) || o->namelen != sizeof(sockaddr_in)) {
        if (!stopping) ++r.bad;
        give_back(b);
        continue;
      }
      auto* d = static_cast<std::byte*>(io_uring_recvmsg_payload(o, &rx_tmpl));
      const size_t len = io_uring_recvmsg_payload_length(o, cqe->res, &rx_tmpl);
      size_t seg = len;
      if (gso) {
        msghdr view = rx_tmpl;
        view.msg_control = reinterpret_cast<std::byte*>(o + 1) + rx_tmpl.msg_namelen;
        view.msg_controllen = o->controllen;
        seg = gro_segment(view, len);
      }
      for_each_segment(d, len, seg, [&](std::byte* s, size_t l) { reflect_segment(s, l, r); });
      Tx& t = txs[b];
      t.h = {};
      t.h.msg_name = io_uring_recvmsg_name(o);
      t.h.msg_namelen = sizeof(sockaddr_in);
      t.iov = {d, len};
      t.h.msg_iov = &t.iov;
      t.h.msg_iovlen = 1;
      if (seg < len) set_segment_size(t.h, t.ctl, seg);
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_sendmsg(sqe, fd, &t.h, 0);
      io_uring_sqe_set_data64(sqe, b);
      ++sending;
    }
    io_uring_cq_advance(&ring, seen);
    if (returned) io_uring_buf_ring_advance(br, static_cast<int>(returned));
  }
  io_uring_unregister_buf_ring(&ring, bgid);
  io_uring_queue_exit(&ring);
  munmap(ring_mem, ring_bytes);
}

struct Outcome {
  double seconds = 0, other_cpu_s = 0;
  Usage gen;
  uint64_t sent = 0, received = 0, lost = 0, wrong = 0, window = 0;
  ReflectorResult refl;
  std::string error;
};

// One run: a reflector thread with `method`, G generator sockets with W
// datagrams of `size` bytes outstanding each, ~kTrafficSeconds of traffic.
Outcome run_once(Method method, size_t size) {
  Outcome out;
  const bool gso = uses_gso(method);
  int refl_rcvbuf = 0, gen_rcvbuf = 0;
  rt::UniqueFd refl = udp_socket(gso, refl_rcvbuf);
  const rt::Endpoint at = rt::local_endpoint(refl.get());
  std::vector<rt::UniqueFd> gens;
  for (unsigned g = 0; g < kGenerators; ++g) {
    int rb = 0;
    gens.push_back(udp_socket(gso, rb));
    gen_rcvbuf = g == 0 ? rb : std::min(gen_rcvbuf, rb);
    if (::connect(gens.back().get(), reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa) != 0) {
      out.error = fmt::format("connect: {}", rt::errno_text(errno));
      return out;
    }
  }
  // The window: all G x W datagrams fit in half the smallest receive buffer,
  // counting a datagram's kernel truesize as 2 x size + 2 KB (generous for
  // every size here); 4..1024 per socket.
  const size_t truesize = 2 * size + 2048;
  const size_t budget = static_cast<size_t>(std::min(refl_rcvbuf, gen_rcvbuf)) / 2;
  const size_t window = std::clamp<size_t>(budget / (kGenerators * truesize), 4, 1024);
  out.window = window;
  const size_t per_send = gso ? std::min<size_t>(kMaxSegments, kMaxUdpPayload / size) : 1;  // segments per GSO send

  // The reflector's provided buffers (io_uring): enough for every datagram in
  // flight (fewer when they arrive coalesced), a power of two.
  unsigned nbufs = 1;
  while (nbufs < kGenerators * window / per_send + kBatch) nbufs <<= 1;

  Shared sh;
  std::thread th([&] {
    pthread_setname_np(pthread_self(), "udpio-reflect");  // for perf --sort comm
    try {
      if (method == Method::Mmsg || method == Method::Gso) reflect_mmsg(refl.get(), gso, size, sh, out.refl);
      else reflect_uring(refl.get(), gso, size, nbufs, sh, out.refl);
    } catch (const std::exception& e) {
      out.refl.error = e.what();
    }
    sh.ready = true;
  });
  while (!sh.ready) std::this_thread::yield();
  if (!out.refl.error.empty()) {
    th.join();
    out.error = out.refl.error;
    return out;
  }

  struct Gen {
    int fd;
    uint64_t next = 0, expect = 0, received = 0, lost = 0, credit = 0;
    std::vector<std::byte> tx;  // W datagrams, tags rewritten per send
  };
  std::vector<Gen> gs(kGenerators);
  for (unsigned g = 0; g < kGenerators; ++g) {
    gs[g].fd = gens[g].get();
    gs[g].tx.resize(window * size);
    for (size_t i = 0; i < gs[g].tx.size(); ++i) gs[g].tx[i] = static_cast<std::byte>(i * 131 + g);
    gs[g].credit = window;
  }
  RxBatch rx(gso, size);
  TxBatch tx(gso, window);
  uint64_t gen_calls = 0;

  auto send_credit = [&](unsigned g) {
    Gen& w = gs[g];
    const size_t n = std::min<uint64_t>(w.credit, window);
    if (n == 0) return true;
    for (size_t i = 0; i < n; ++i) {
      std::byte* d = w.tx.data() + i * size;
      const Tag t{g, static_cast<uint32_t>(size), w.next + i};
      std::memcpy(d, &t, sizeof t);
      tx.add(nullptr, d, size);
    }
    const long s = tx.flush(w.fd, gen_calls);
    if (s < 0) {
      out.error = fmt::format("generator sendmmsg: {}", rt::errno_text(static_cast<int>(-s)));
      return false;
    }
    w.next += n;
    w.credit -= n;
    out.sent += n;
    return true;
  };

  const double cpu_p0 = process_cpu_s();
  const Usage g0 = Usage::of_this_thread();
  const double t0 = now_s();
  double last_progress = t0;
  bool sending = true;
  for (;;) {
    const double t = now_s();
    if (sending && t - t0 >= kTrafficSeconds) sending = false;
    bool progress = false;
    uint64_t outstanding = 0;
    for (unsigned g = 0; g < kGenerators && out.error.empty(); ++g) {
      Gen& w = gs[g];
      if (sending && !send_credit(g)) break;
      for (;;) {
        const int k = rx.receive(w.fd);
        if (k == 0) break;
        progress = true;
        for (int i = 0; i < k; ++i)
          if (!rx.segments(i, [&](std::byte* s, size_t l) {
                Tag tg{};
                if (l >= sizeof tg) std::memcpy(&tg, s, sizeof tg);
                if (l != size || tg.gen != g || tg.len != size || tg.seq < w.expect || tg.seq >= w.next) {
                  ++out.wrong;
                  return;
                }
                w.lost += tg.seq - w.expect;  // a gap: lost on the way there or back
                w.expect = tg.seq + 1;
                ++w.received;
                ++w.credit;
              }))
            ++out.wrong;
        if (k < static_cast<int>(kBatch)) break;
      }
      outstanding += w.next - w.received - w.lost;
    }
    if (!out.error.empty() || out.wrong) break;
    if (progress) last_progress = t;
    if (!sending && outstanding == 0) break;
    if (t - last_progress > 0.5) {  // nothing for 0.5 s: what is still out is lost
      for (Gen& w : gs) w.lost += w.next - w.received - w.lost;
      break;
    }
  }
  out.seconds = now_s() - t0;
  out.gen = Usage::of_this_thread() - g0;
  sh.stop = true;
  th.join();
  out.other_cpu_s = std::max(0.0, process_cpu_s() - cpu_p0 - out.gen.cpu_s - out.refl.use.cpu_s);
  for (const Gen& w : gs) {
    out.received += w.received;
    out.lost += w.lost;
  }
  if (out.error.empty()) out.error = out.refl.error;
  return out;
}

void BM_UdpIo(benchmark::State& state, Method method) {
  const auto size = static_cast<size_t>(state.range(0));
  Outcome total;
  for (auto _ : state) {
    Outcome o;
    try {
      o = run_once(method, size);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
    if (!o.error.empty() || o.lost || o.wrong || o.refl.bad) {
      state.SkipWithError(fmt::format("{}{}lost {} of {} datagrams, wrong replies {}, malformed at the reflector {}",
                                      o.error, o.error.empty() ? "" : "; ", o.lost, o.sent, o.wrong, o.refl.bad)
                              .c_str());
      return;
    }
    state.SetIterationTime(o.seconds);
    total.seconds += o.seconds;
    total.gen += o.gen;
    total.other_cpu_s += o.other_cpu_s;
    total.sent += o.sent;
    total.window = o.window;
    total.refl.dgrams += o.refl.dgrams;
    total.refl.bytes += o.refl.bytes;
    total.refl.use += o.refl.use;
    total.refl.wakeups += o.refl.wakeups;
  }
  const double s = total.seconds;
  state.counters["refl_dgrams_per_s"] = static_cast<double>(total.refl.dgrams) / s;
  state.counters["refl_Gbit_per_s"] = static_cast<double>(total.refl.bytes) * 8 / s / 1e9;
  state.counters["refl_cpu_ns_per_byte"] = total.refl.use.cpu_s * 1e9 / static_cast<double>(total.refl.bytes);
  state.counters["refl_cpu_util"] = total.refl.use.cpu_s / s;
  state.counters["refl_sleeps_per_s"] = static_cast<double>(total.refl.use.sleeps) / s;
  state.counters["refl_preempted_per_s"] = static_cast<double>(total.refl.use.preempted) / s;
  state.counters["gen_cpu_util"] = total.gen.cpu_s / s;
  state.counters["gen_preempted_per_s"] = static_cast<double>(total.gen.preempted) / s;
  state.counters["other_cpu_util"] = total.other_cpu_s / s;
  state.counters["dgrams_per_wakeup"] =
      static_cast<double>(total.refl.dgrams) / static_cast<double>(std::max<uint64_t>(1, total.refl.wakeups));
  state.counters["lost"] = 0;
  state.counters["window"] = static_cast<double>(total.window);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int size : {256, 1024, 8192, 60000}) b->Arg(size);
  b->ArgNames({"bytes"})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  // With --benchmark_repetitions: each counter's min and max besides mean, median, stddev.
  b->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
  b->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
}

BENCHMARK_CAPTURE(BM_UdpIo, mmsg, Method::Mmsg)->Name("udpio/mmsg")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_UdpIo, gso, Method::Gso)->Name("udpio/gso")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_UdpIo, uring, Method::Uring)->Name("udpio/uring")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_UdpIo, uring_gso, Method::UringGso)->Name("udpio/uring_gso")->Apply(Sizes);

}  // namespace
