// `ina bench switch`: what one `ina switch` serves.
//
// A load generator plays N workers' gradient streams into one software
// switch (rt::SwitchDaemon on its own thread, in this process, the very
// program `ina switch` runs), over loopback UDP, in the runtime's wire
// format, and checks every result it gets back against the exact sum.
//
//  - The workers are real job members: each joins through the switch's
//    control plane (rt::join_job) and sends from the UDP socket it
//    advertised. A scheme with a PS (dsa, atp) gets a real rt::PsDaemon on a
//    thread of its own, which serves the collisions.
//  - One generator thread drives all N sockets (sendmmsg / recvmmsg, busy
//    polling; N per job, every job's). Each worker keeps a window of PSNs in
//    flight: the switch's window cap (switchml's slots per pool) or a quarter
//    of a switch thread's aggregators over the jobs it serves (shared pools),
//    at most 2 MiB / (workers a switch thread serves) of datagrams (a switch
//    thread's socket buffer is 4 MB); PSN p of every worker carries the same
//    template payload (p mod 16), so a result is checked with one memcmp
//    against the precomputed sum. A PSN still without a result 20 ms after
//    its last send is sent again with the resend flag (counted; the switch
//    answers from its shadow copy or the PS).
//  - Reported, per case (scheme, workers, values per packet; the
//    switch_threads family also jobs and switch threads, job J on thread J mod T):
//    gradient_Gbit_per_s = jobs x N x packets x payload bits / wall time (the
//    gradient the switch aggregated per second), switch_dgrams_per_s
//    (datagrams the switch received and sent, per second), switch_cpu_ns_per_byte
//    (the switch threads' CPU time, summed, over the gradient bytes they aggregated),
//    switch_cpu_util (that CPU time over the wall time: 1 = one core busy),
//    switch_cpu_util_busiest_thread, resends and verified results.
//  - The switch_auth family runs the same load with datagram authentication
//    off and on (`ina switch --datagram-auth`, runtime/datagram_tag.hpp): the
//    generator then tags every datagram it sends with its job's datagram key
//    and checks the tag of every result before its values.
//
// The generator shares the machine with the switch: on a 2-core host it
// takes one core and the switch the other, so the figures are what one
// switch core serves while the other core feeds it.
#include <benchmark/benchmark.h>

#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <string>
#include <thread>
#include <vector>

#include "runtime/auth.hpp"
#include "runtime/control.hpp"
#include "runtime/datagram_tag.hpp"
#include "runtime/net.hpp"
#include "runtime/ps_daemon.hpp"
#include "runtime/switch_daemon.hpp"
#include "schemes/registry.hpp"
#include "wire/packet.hpp"
#include "wire/patch.hpp"

namespace {

using namespace ina;

constexpr unsigned kTemplates = 16;  // distinct payloads, by PSN mod 16
constexpr unsigned kBatch = 64;      // datagrams per sendmmsg / recvmmsg
constexpr Time kResendAfter = 20 * kMs;

// Rank r's value k of template t; every value and every sum of up to 64
// ranks fits in int32 without saturation.
int32_t value(unsigned r, unsigned t, unsigned k) {
  return static_cast<int32_t>((k * 2654435761u + t * 40503u + r * 97u) % 200001u) - 100000;
}

struct Outcome {
  double seconds = 0, switch_cpu_s = 0, switch_cpu_max_thread_s = 0;
  uint64_t packets = 0, resends = 0, verified = 0, wrong = 0, window = 0;
  uint64_t switch_rx = 0, switch_tx = 0, switch_malformed = 0;
  std::string error;
};

// One run: a switch of `threads` threads, `jobs` jobs (ids 1..jobs; job J on
// thread J mod threads) of N joined workers each (and a PS each), `packets`
// PSNs per worker; segmentation offload on the switch and the generator, or
// off; datagram tags (authentication) on both, or off.
Outcome run_once(const std::string& scheme, unsigned n, uint16_t payload, uint64_t packets, bool offload,
                 unsigned jobs = 1, unsigned threads = 1, bool tags = false) {
  Outcome out;
  const schemes::Scheme& spec = schemes::find(scheme, schemes::Engine::Runtime);
  // Jobs on the busiest thread (regions of the isolated policy are per thread).
  const unsigned per_thread = (jobs + threads - 1) / threads;
  rt::SwitchDaemonConfig sc;
  sc.listen = rt::Endpoint::parse("127.0.0.1:0");
  sc.scheme = scheme;
  sc.threads = threads;
  sc.program.payload_values = payload;
  sc.program.memory_bytes = 64ull << 20;
  sc.isolated_regions = per_thread;
  sc.ecn_backlog_bytes = 0;  // nothing to slow down: the generator's window is the only limit
  sc.log = false;
  sc.offload = offload;
  sc.datagram_auth = tags;
  sc.key = rt::random_key();
  sc.has_key = true;
  rt::SwitchDaemon sw(sc);
  const rt::Endpoint at = sw.endpoint();
  std::thread sw_thread([&] { sw.run(); });

  // A PS per job (schemes that have one), each on a thread of its own.
  struct Ps {
    std::unique_ptr<rt::PsDaemon> d;
    std::thread t;
    std::atomic<bool> ready{false};
    std::string error;
  };
  std::vector<Ps> pses(spec.has_ps ? jobs : 0);
  for (unsigned j = 0; j < pses.size(); ++j) {
    Ps& ps = pses[j];
    ps.t = std::thread([&, j] {
      try {
        rt::PsDaemonConfig pc;
        pc.sw = at;
        pc.job = static_cast<uint16_t>(j + 1);
        pc.nworkers = n;
        pc.key = rt::job_key(sc.key, pc.job);
        pc.has_key = true;
        pc.datagram_auth = tags;
        pc.log = false;
        ps.d = std::make_unique<rt::PsDaemon>(pc);
        ps.ready = true;
        ps.d->run();
      } catch (const std::exception& e) {
        ps.error = e.what();
        ps.ready = true;
      }
    });
  }
  // Members by (job - 1) * n + rank.
  const unsigned total = jobs * n;
  std::vector<std::optional<rt::Joined>> members(total);
  std::vector<std::string> join_errors(total);
  {
    std::vector<std::thread> joins;
    for (unsigned m = 0; m < total; ++m)
      joins.emplace_back([&, m] {
        try {
          rt::JoinOptions o;
          o.sw = at;
          o.job = static_cast<uint16_t>(m / n + 1);
          o.rank = m % n;
          o.nworkers = n;
          o.payload_values = payload;
          o.key = rt::job_key(sc.key, o.job);
          o.retain_ops = 4;
          o.udp_buffer_bytes = 16 << 20;
          members[m].emplace(rt::join_job(o));
        } catch (const std::exception& e) {
          join_errors[m] = e.what();
        }
      });
    for (auto& t : joins) t.join();
  }
  auto stop_all = [&] {
    sw.request_stop();
    sw_thread.join();
    for (Ps& ps : pses) {
      while (!ps.ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ps.d) ps.d->request_stop();
      ps.t.join();
    }
  };
  for (unsigned m = 0; m < total; ++m)
    if (!members[m]) {
      out.error = "join failed: " + join_errors[m];
      stop_all();
      return out;
    }

  const rt::JobAssignment& a0 = members[0]->job;
  // The window: the switch's cap (isolated regions) or a quarter of a
  // thread's aggregators shared by its jobs, and at most what a switch
  // thread's 4 MB socket buffer holds for all the workers it serves at once
  // with room to spare (2 MiB; a datagram costs the kernel at least ~1 KB of
  // buffer however small): beyond that the switch's socket drops datagrams
  // faster than it reads them, and the run measures resends instead of the switch.
  const uint64_t aggregators = sc.program.memory_bytes / threads / (4ull * payload);
  const size_t dgram = kHeaderBytes + 4u * payload + (tags ? rt::kTagBytes : 0);
  uint64_t window = a0.window_cap ? a0.window_cap : std::max<uint64_t>(1, aggregators / 4 / per_thread);
  window = std::min<uint64_t>(
      {window, std::max<uint64_t>(8, (2ull << 20) / (n * per_thread) / std::max<size_t>(dgram, 1024)), packets});

  // Templates: each rank's payloads and the expected sums.
  std::vector<std::vector<std::vector<int32_t>>> tmpl(n, std::vector<std::vector<int32_t>>(kTemplates));
  std::vector<std::vector<int32_t>> sums(kTemplates, std::vector<int32_t>(payload, 0));
  for (unsigned r = 0; r < n; ++r)
    for (unsigned t = 0; t < kTemplates; ++t) {
      tmpl[r][t].resize(payload);
      for (unsigned k = 0; k < payload; ++k) {
        tmpl[r][t][k] = value(r, t, k);
        sums[t][k] += tmpl[r][t][k];
      }
    }

  struct Worker {
    int fd;
    Header h;
    rt::DatagramKey key;  // its job's (datagram tags)
    uint64_t next = 0, low = 0, done = 0;
    bool finished = false;
    std::vector<uint8_t> got;   // by PSN: result received
    std::vector<Time> sent_at;  // by PSN: last send
  };
  std::vector<Worker> ws(total);
  for (unsigned m = 0; m < total; ++m) {
    const unsigned r = m % n;
    Worker& w = ws[m];
    w.fd = members[m]->udp.get();
    // Connected to the switch: sendmmsg needs no address, and only the switch's datagrams arrive.
    if (::connect(w.fd, reinterpret_cast<const sockaddr*>(&at.sa), sizeof at.sa) != 0) {
      out.error = fmt::format("connect: {}", std::strerror(errno));
      stop_all();
      return out;
    }
    const rt::JobAssignment& a = members[m]->job;
    w.h.type = PktType::Data;
    w.h.job = a.job;
    w.h.src = a.self;
    w.h.dst = a.sw;
    w.h.rank = static_cast<uint8_t>(r);
    w.h.nworkers = static_cast<uint8_t>(n);
    w.h.bitmap = RankBits::bit(r);
    w.h.priority = 1;
    w.h.count = payload;
    w.key = rt::datagram_key(rt::job_key(sc.key, a.job), a.datagram_salt);
    w.got.assign(packets, 0);
    w.sent_at.assign(packets, 0);
  }
  // With offload the generator sends as the runtime's engine does: up to
  // 64 datagrams (64 KB) per segmented send, and takes the switch's
  // segmented results as coalesced batches (UDP_GRO).
  const size_t per_send = offload ? std::min<size_t>(kBatch, std::max<size_t>(1, 65000 / dgram)) : 1;
  const size_t rx_slot = offload ? std::max<size_t>(dgram, 65536) : dgram;
  if (offload)
    for (Worker& w : ws) {
      const int on = 1;
      if (setsockopt(w.fd, SOL_UDP, UDP_GRO, &on, sizeof on) != 0) {
        out.error = fmt::format("UDP_GRO: {}", std::strerror(errno));
        stop_all();
        return out;
      }
    }
  std::vector<std::byte> txbuf(kBatch * dgram), rxbuf(kBatch * rx_slot);
  std::vector<iovec> iov(kBatch), rxiov(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<std::array<std::byte, rt::kUdpCmsgBytes>> ctl(kBatch);
  std::vector<int32_t> vals(payload);

  auto send_batch = [&](Worker& w, const std::vector<uint32_t>& psns, bool resend) {
    for (size_t b = 0; b < psns.size(); b += kBatch) {
      const size_t m = std::min<size_t>(kBatch, psns.size() - b);
      for (size_t i = 0; i < m; ++i) {
        Header h = w.h;
        h.psn = psns[b + i];
        h.flags = resend ? flag::kResend : 0;
        std::span<std::byte> slot(txbuf.data() + i * dgram, dgram);
        size_t len = encode(h, tmpl[h.rank][h.psn % kTemplates], slot);
        if (tags) {  // as a tagging engine sends it
          set_wire_flags(slot.data(), wire_flags(slot.data()) | flag::kTagged);
          rt::put_tag(slot.data() + len, rt::datagram_tag(w.key, slot.data(), len));
          len += rt::kTagBytes;
        }
        iov[i] = {slot.data(), len};
      }
      // Messages of per_send datagrams each (one datagram each without offload).
      size_t nmsg = 0;
      for (size_t i = 0; i < m; i += per_send, ++nmsg) {
        const size_t segs = std::min(per_send, m - i);
        msgs[nmsg] = {};
        msgs[nmsg].msg_hdr.msg_iov = &iov[i];
        msgs[nmsg].msg_hdr.msg_iovlen = segs;
        if (segs > 1) rt::set_udp_segment(msgs[nmsg].msg_hdr, ctl[nmsg].data(), static_cast<uint16_t>(dgram));
      }
      size_t off = 0;
      const Time blocked_since = rt::monotonic_now();
      while (off < nmsg) {
        const int k = ::sendmmsg(w.fd, msgs.data() + off, static_cast<unsigned>(nmsg - off), 0);
        if (k > 0) {
          off += static_cast<size_t>(k);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return false;
        } else if (rt::monotonic_now() - blocked_since > 10 * kSec) {
          // A send that never gets room: end the case with an error, not a hang.
          errno = ETIMEDOUT;
          return false;
        } else {
          pollfd pf{w.fd, POLLOUT, 0};
          ::poll(&pf, 1, 10);
        }
      }
      const Time t = rt::monotonic_now();
      for (size_t i = 0; i < m; ++i) w.sent_at[psns[b + i]] = t;
    }
    return true;
  };

  // One result datagram: verified against the expected sum (and its tag first).
  auto take = [&](Worker& w, std::byte* data, size_t len) {
    if (tags) {
      if (len < kHeaderBytes + rt::kTagBytes || !(wire_flags(data) & flag::kTagged) || !rt::tag_matches(w.key, data, len)) {
        ++out.wrong;
        return false;
      }
      set_wire_flags(data, wire_flags(data) & ~flag::kTagged);
      len -= rt::kTagBytes;
    }
    Header h;
    if (decode(std::span<const std::byte>(data, len), h, vals) != DecodeError::None || h.type != PktType::Ack ||
        !h.has(flag::kResult) || h.psn >= packets)
      return false;  // not a result of this stream (the switch sends nothing else here)
    if (w.got[h.psn]) return false;  // a second copy (a resend answered twice)
    w.got[h.psn] = 1;
    ++w.done;
    if (h.count == payload && std::memcmp(vals.data(), sums[h.psn % kTemplates].data(), 4u * payload) == 0) ++out.verified;
    else ++out.wrong;
    return true;
  };

  const std::vector<double> cpu0 = sw.cpu_seconds();  // by switch thread
  const auto t0 = std::chrono::steady_clock::now();
  unsigned workers_done = 0;
  Time last_result = rt::monotonic_now(), last_resend = last_result;
  std::vector<uint32_t> batch;
  while (workers_done < total && out.error.empty()) {
    for (Worker& w : ws) {
      batch.clear();
      while (w.next < packets && w.next < w.low + window && batch.size() < kBatch) batch.push_back(static_cast<uint32_t>(w.next++));
      if (!batch.empty() && !send_batch(w, batch, false)) out.error = fmt::format("sendmmsg: {}", std::strerror(errno));
    }
    bool progress = false;
    for (Worker& w : ws) {
      for (;;) {
        for (unsigned i = 0; i < kBatch; ++i) {
          rxiov[i] = {rxbuf.data() + i * rx_slot, rx_slot};
          msgs[i] = {};
          msgs[i].msg_hdr.msg_iov = &rxiov[i];
          msgs[i].msg_hdr.msg_iovlen = 1;
          if (offload) {
            msgs[i].msg_hdr.msg_control = ctl[i].data();
            msgs[i].msg_hdr.msg_controllen = ctl[i].size();
          }
        }
        const int k = ::recvmmsg(w.fd, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
        if (k <= 0) break;
        for (int i = 0; i < k; ++i) {
          std::byte* data = rxbuf.data() + i * rx_slot;
          const size_t len = msgs[i].msg_len;
          const size_t gro = offload ? rt::udp_gro_segment(msgs[i].msg_hdr) : 0;
          const size_t seg = gro ? gro : len;
          for (size_t o = 0; o < len; o += seg) progress |= take(w, data + o, std::min(seg, len - o));
        }
        while (w.low < packets && w.got[w.low]) ++w.low;
        if (k < static_cast<int>(kBatch)) break;
      }
      if (!w.finished && w.done == packets) {
        w.finished = true;
        ++workers_done;
      }
    }
    const Time t = rt::monotonic_now();
    if (progress) last_result = t;
    if (t - last_result > 60 * kSec) out.error = "no result for 60 s";
    else if (t - std::max(last_result, last_resend) > kResendAfter) {
      for (Worker& w : ws) {
        batch.clear();
        for (uint64_t p = w.low; p < w.next; ++p)
          if (!w.got[p] && t - w.sent_at[p] > kResendAfter) batch.push_back(static_cast<uint32_t>(p));
        out.resends += batch.size();
        if (!batch.empty() && !send_batch(w, batch, true)) out.error = fmt::format("sendmmsg (resend): {}", std::strerror(errno));
      }
      last_resend = t;
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double> cpu1 = sw.cpu_seconds();
  for (size_t k = 0; k < cpu1.size(); ++k) {
    out.switch_cpu_s += cpu1[k] - cpu0[k];
    out.switch_cpu_max_thread_s = std::max(out.switch_cpu_max_thread_s, cpu1[k] - cpu0[k]);
  }
  out.packets = packets;
  out.window = window;
  stop_all();
  const nlohmann::json st = sw.stats();  // after run(): every shard's, summed
  out.switch_rx = st["engine"]["rx_datagrams"].get<uint64_t>();
  out.switch_tx = st["engine"]["tx_datagrams"].get<uint64_t>();
  out.switch_malformed = st["engine"]["rx_malformed"].get<uint64_t>() + st["engine"]["rx_foreign"].get<uint64_t>() +
                         st["engine"]["rx_bad_tag"].get<uint64_t>();
  for (const Ps& ps : pses)
    if (!ps.error.empty() && out.error.empty()) out.error = "PS: " + ps.error;
  return out;
}

// One case: `jobs` jobs of n workers on a switch of `threads` threads.
void measure(benchmark::State& state, const char* scheme, unsigned n, uint16_t payload, bool offload, unsigned jobs,
             unsigned threads, bool tags = false) {
  // About 256 MB of gradient per worker at 8 KB packets, fewer packets for
  // small ones (the threads family: the same gradient over its jobs).
  const uint64_t packets = std::clamp<uint64_t>((64ull << 20) / (4ull * payload) / jobs, 20000 / jobs, 200000);
  Outcome total;
  for (auto _ : state) {
    Outcome o = run_once(scheme, n, payload, packets, offload, jobs, threads, tags);
    if (!o.error.empty() || o.wrong || o.switch_malformed) {
      state.SkipWithError(fmt::format("{} (wrong results {}, malformed, foreign or badly tagged at the switch {})", o.error, o.wrong,
                                      o.switch_malformed)
                              .c_str());
      return;
    }
    state.SetIterationTime(o.seconds);
    total.seconds += o.seconds;
    total.switch_cpu_s += o.switch_cpu_s;
    total.switch_cpu_max_thread_s += o.switch_cpu_max_thread_s;
    total.packets += o.packets;
    total.resends += o.resends;
    total.window = o.window;
    total.verified += o.verified;
    total.switch_rx += o.switch_rx;
    total.switch_tx += o.switch_tx;
  }
  const double grad_bytes = static_cast<double>(total.packets) * jobs * n * 4.0 * payload;
  state.counters["gradient_Gbit_per_s"] = grad_bytes * 8 / total.seconds / 1e9;
  state.counters["switch_dgrams_per_s"] = static_cast<double>(total.switch_rx + total.switch_tx) / total.seconds;
  state.counters["switch_cpu_ns_per_byte"] = total.switch_cpu_s * 1e9 / grad_bytes;
  state.counters["switch_cpu_util"] = total.switch_cpu_s / total.seconds;
  state.counters["switch_cpu_util_busiest_thread"] = total.switch_cpu_max_thread_s / total.seconds;
  state.counters["resends"] = static_cast<double>(total.resends);
  state.counters["verified_results"] = static_cast<double>(total.verified);
  state.counters["switch_threads"] = threads;
  state.counters["jobs"] = jobs;
  state.counters["window"] = static_cast<double>(total.window);
  state.counters["tags"] = tags;
}

// Arguments: workers, values per packet, offload (one job, one switch thread).
void BM_Switch(benchmark::State& state, const char* scheme) {
  measure(state, scheme, static_cast<unsigned>(state.range(0)), static_cast<uint16_t>(state.range(1)), state.range(2) != 0,
          1, 1);
}

// Arguments: workers per job, values per packet, jobs, switch threads (offload on).
void BM_SwitchThreads(benchmark::State& state, const char* scheme) {
  measure(state, scheme, static_cast<unsigned>(state.range(0)), static_cast<uint16_t>(state.range(1)), true,
          static_cast<unsigned>(state.range(2)), static_cast<unsigned>(state.range(3)));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int n : {2, 4, 8})
    for (int v : {64, 256, 1024, 2048, 8192})
      for (int o : {0, 1}) b->Args({n, v, o});
  b->ArgNames({"workers", "values", "offload"})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

// The threads axis: 2 and 4 jobs of 2 workers on 1 and 2 switch threads, at
// 256 B and 8 KB of values. One generator thread drives every job's workers.
// SwitchML only: the generator does not answer a PS's GradRequests, and DSA
// jobs of equal priority sharing one thread's pool (T = 1 with 2 jobs, 64
// values) stalled it for minutes, every PS sending reminders, so a DSA case
// there would measure the generator; `ina run --switch-threads` runs DSA jobs
// with real workers.
void ThreadArgs(benchmark::internal::Benchmark* b) {
  for (int v : {64, 2048})
    for (int jobs : {2, 4})
      for (int t : {1, 2}) b->Args({2, v, jobs, t});
  b->ArgNames({"workers", "values", "jobs", "threads"})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

// Arguments: workers, values per packet, datagram tags (one job, one switch thread, offload on).
void BM_SwitchAuth(benchmark::State& state, const char* scheme) {
  measure(state, scheme, static_cast<unsigned>(state.range(0)), static_cast<uint16_t>(state.range(1)), true, 1, 1,
          state.range(2) != 0);
}

// Datagram authentication's cost: 256 B and 8 KB of values, tags off and on
// back to back in one run (docs/results/runtime.md has the ratios).
void AuthArgs(benchmark::internal::Benchmark* b) {
  for (int v : {64, 2048})
    for (int tags : {0, 1}) b->Args({2, v, tags});
  b->ArgNames({"workers", "values", "tags"})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

// The MAC alone, per datagram of `range(0)` bytes (a 256 B and an 8 KB
// payload with the header): SipHash-2-4 as the runtime computes it, and the
// alternative, Poly1305 from libcrypto. Poly1305 is a one-time MAC: each
// datagram needs its own key, here the first 32 bytes of ChaCha20's
// keystream under the job's key and a per-datagram nonce (as in RFC 8439's
// AEAD), so its cost includes that block.
void BM_MacSipHash(benchmark::State& state) {
  std::vector<std::byte> d(static_cast<size_t>(state.range(0)), std::byte{7});
  rt::DatagramKey k;
  uint64_t sink = 0, i = 0;
  for (auto _ : state) {
    d[kHeaderBytes] = static_cast<std::byte>(++i);
    sink ^= rt::datagram_tag(k, d.data(), d.size());
  }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_MacPoly1305(benchmark::State& state) {
  std::vector<uint8_t> d(static_cast<size_t>(state.range(0)), 7);
  const rt::Key key = rt::random_key();
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  EVP_MAC_CTX* mc = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  EVP_CIPHER_CTX* cc = EVP_CIPHER_CTX_new();
  if (!mc || !cc) {
    state.SkipWithError("libcrypto has no Poly1305");
  } else {
    uint8_t nonce[16] = {}, zero[32] = {}, otk[32], tag[16];
    uint64_t i = 0;
    for (auto _ : state) {
      ++i;
      std::memcpy(nonce + 4, &i, sizeof i);  // a unique nonce per datagram
      int ol = 0;
      size_t tl = 0;
      EVP_EncryptInit_ex(cc, EVP_chacha20(), nullptr, key.data(), nonce);
      EVP_EncryptUpdate(cc, otk, &ol, zero, sizeof zero);
      EVP_MAC_init(mc, otk, sizeof otk, nullptr);
      EVP_MAC_update(mc, d.data(), d.size());
      EVP_MAC_final(mc, tag, &tl, sizeof tag);
      benchmark::DoNotOptimize(tag);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  }
  EVP_CIPHER_CTX_free(cc);
  EVP_MAC_CTX_free(mc);
  EVP_MAC_free(mac);
}

BENCHMARK_CAPTURE(BM_Switch, switchml, "switchml")->Name("switch/switchml")->Apply(Args);
BENCHMARK_CAPTURE(BM_Switch, dsa, "dsa")->Name("switch/dsa")->Apply(Args);
BENCHMARK_CAPTURE(BM_SwitchThreads, switchml, "switchml")->Name("switch_threads/switchml")->Apply(ThreadArgs);
BENCHMARK_CAPTURE(BM_SwitchAuth, switchml, "switchml")->Name("switch_auth/switchml")->Apply(AuthArgs);
BENCHMARK(BM_MacSipHash)->Name("switch_auth/mac_siphash24")->Arg(kHeaderBytes + 256)->Arg(kHeaderBytes + 8192)->ArgName("bytes");
BENCHMARK(BM_MacPoly1305)->Name("switch_auth/mac_chacha20_poly1305")->Arg(kHeaderBytes + 256)->Arg(kHeaderBytes + 8192)->ArgName("bytes");

}  // namespace
