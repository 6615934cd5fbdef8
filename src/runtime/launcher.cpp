#include "runtime/launcher.hpp"

#include "runtime/auth.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <optional>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/resources.hpp"
#include "runtime/control.hpp"
#include "runtime/net.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/ring_worker.hpp"
#include "runtime/supervisor.hpp"
#include "runtime/switch_daemon.hpp"
#include "schemes/registry.hpp"


namespace ina::rt {

namespace {

namespace fs = std::filesystem;

std::string mib(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

struct Failure {
  int status;
  std::string message;
  const Child* child = nullptr;  // the process that failed, if one did
};

// "--workers 64 x --jobs 64" or "--workers 3,2".
std::string workers_flags(const LaunchConfig& c) {
  if (c.job_workers.empty()) return fmt::format("--workers {} x --jobs {}", c.workers, c.jobs);
  std::string list;
  for (unsigned w : c.job_workers) list += (list.empty() ? "" : ",") + std::to_string(w);
  return fmt::format("--workers {} ({} jobs)", list, c.jobs);
}

std::vector<std::string> fault_args(const LaunchConfig& c) {
  std::vector<std::string> a;
  if (c.loss > 0) a.insert(a.end(), {"--loss", fmt::format("{}", c.loss)});
  if (c.duplicate > 0) a.insert(a.end(), {"--duplicate", fmt::format("{}", c.duplicate)});
  if (c.reorder > 0) a.insert(a.end(), {"--reorder", fmt::format("{}", c.reorder)});
  return a;
}

// A TCP port on loopback that is free now (torch.distributed's rendezvous in `ina train-py`).
uint16_t free_loopback_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw RuntimeError(fmt::format("cannot find a free loopback port: {}", errno_text(errno)));
  return ntohs(a.sin_port);
}

// Whether the scheme's jobs have a PS (the registry's word; an unknown name is refused by validate()).
bool has_ps(const std::string& scheme) {
  const schemes::Scheme* s = schemes::lookup(scheme);
  return !s || s->has_ps;
}

// `ina train-py`: the scripts' standard error, passed through to ours line by
// line (lines of different ranks never interleave) while the last lines of each
// are kept, so that a failed script's own error can close the launcher's report.
class StderrTee {
 public:
  StderrTee() = default;
  StderrTee(const StderrTee&) = delete;
  StderrTee& operator=(const StderrTee&) = delete;
  ~StderrTee() { finish(0); }

  // A pipe whose write end becomes the stderr (spawn's stderr_fd) of the child
  // `id` names (a train-py worker's rank); call before start().
  int add(unsigned id) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw RuntimeError(fmt::format("pipe: {}", errno_text(errno)));
    streams_.push_back({UniqueFd(fds[0]), id, {}, {}});
    write_ends_.emplace_back(fds[1]);
    return fds[1];
  }
  // After the children are spawned: closes this process's write ends and starts passing through.
  void start() {
    write_ends_.clear();
    if (!streams_.empty()) thread_ = std::thread([this] { run(); });
  }
  // Waits until every stream has ended (its process and any heir closed it) or `grace` passed.
  void finish(Time grace) {
    if (!thread_.joinable()) return;
    const Time until = monotonic_now() + grace;
    while (!done_.load() && monotonic_now() < until) ::usleep(10'000);
    stop_ = true;
    thread_.join();
  }
  // The last `lines` lines child `id` wrote to its stderr.
  std::string tail(unsigned id, size_t lines = 12) {
    std::lock_guard lk(mu_);
    for (const auto& st : streams_)
      if (st.id == id) {
        std::string t = st.kept + st.partial;
        while (!t.empty() && t.back() == '\n') t.pop_back();
        size_t start = t.size();  // of the last `lines` lines
        for (size_t n = 0; start > 0;) {
          const size_t nl = t.rfind('\n', start - 1);
          if (nl == std::string::npos) {
            start = 0;
          } else {
            start = nl;
            if (++n == lines) ++start;
          }
          if (n == lines) break;
        }
        return t.substr(start);
      }
    return {};
  }

 private:
  struct Stream {
    UniqueFd fd;
    unsigned id;
    std::string partial;  // the current line, not yet passed on
    std::string kept;     // the last few KB passed on
  };
  void emit(Stream& st, std::string_view text) {
    for (size_t off = 0; off < text.size();) {
      const ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    st.kept.append(text);
    if (st.kept.size() > kKeep) st.kept.erase(0, st.kept.size() - kKeep);
  }
  void run() {
    char buf[4096];
    for (;;) {
      std::vector<pollfd> p;
      std::vector<Stream*> of;
      for (auto& st : streams_)
        if (st.fd) {
          p.push_back({st.fd.get(), POLLIN, 0});
          of.push_back(&st);
        }
      if (p.empty() || stop_) break;
      const int r = ::poll(p.data(), p.size(), 100);
      std::lock_guard lk(mu_);
      if (r <= 0) {  // quiet for 100 ms: pass on unfinished lines (prompts, progress bars)
        for (auto* st : of)
          if (!st->partial.empty()) emit(*st, std::exchange(st->partial, {}));
        continue;
      }
      for (size_t i = 0; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Stream& st = *of[i];
        const ssize_t n = ::read(st.fd.get(), buf, sizeof buf);
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          if (!st.partial.empty()) emit(st, std::exchange(st.partial, {}) + "\n");
          st.fd.reset();
          continue;
        }
        st.partial.append(buf, static_cast<size_t>(n));
        const size_t nl = st.partial.rfind('\n');
        if (nl != std::string::npos) {
          emit(st, std::string_view(st.partial).substr(0, nl + 1));
          st.partial.erase(0, nl + 1);
        } else if (st.partial.size() > kKeep) {
          emit(st, std::exchange(st.partial, {}));
        }
      }
    }
    std::lock_guard lk(mu_);
    for (auto& st : streams_)
      if (!st.partial.empty()) emit(st, std::exchange(st.partial, {}) + "\n");
    done_ = true;
  }
  static constexpr size_t kKeep = 4096;
  std::deque<Stream> streams_;
  std::vector<UniqueFd> write_ends_;
  std::thread thread_;
  std::mutex mu_;
  std::atomic<bool> stop_{false}, done_{false};
};

// Datagrams an engine refused (malformed or foreign) that came from a member's
// address: a protocol bug in this run. Those from addresses no member has
// (rx_unattributed) are noise from outside the job, e.g. a stray datagram to
// the switch's port: reported by noise_line, never a failure.
uint64_t member_refused(const nlohmann::json& engine) {
  const uint64_t all = engine.value("rx_malformed", uint64_t{0}) + engine.value("rx_foreign", uint64_t{0});
  return all - std::min(all, engine.value("rx_unattributed", uint64_t{0}));
}

std::string noise_line(uint64_t n) {
  return fmt::format("noise: {} datagram(s) from addresses outside the job were refused and dropped (not the job's; "
                     "not counted against the run)\n", n);
}

Failure interrupted_failure(const Supervisor& sup) {
  const int sig = sup.interrupted();
  return Failure{128 + sig, fmt::format("interrupted by signal {} ({})", sig, strsignal(sig))};
}

Failure child_failure(const Child& c) {
  const int st = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3 ? 3 : 1;
  return Failure{st, fmt::format("{} (pid {}) {}", c.name, c.pid, describe_status(c.status)), &c};
}

// Until every worker has exited (successfully); anything else that exits, a
// worker's failure, a signal or the deadline is the failure returned.
// workers_first (`ina train-py`): among children that failed together, a
// worker (the user's script) is named before a PS or switch that failed
// because of it. While waiting, `progress` (if set) is called after
// progress_after_s and then every progress_every_s with the seconds elapsed,
// the workers finished and all workers; it prints a line.
std::optional<Failure> wait_for_workers(Supervisor& sup, Time deadline, double timeout_s, bool workers_first = false,
                                        double progress_after_s = 0, double progress_every_s = 5,
                                        const std::function<void(double, unsigned, unsigned)>& progress = {},
                                        const std::function<bool(const Child&)>& echo = {}) {
  auto workers_done = [&] {
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Worker && !(c.reaped && exited_ok(c.status))) return false;
    return true;
  };
  const Time t0 = monotonic_now();
  Time next_progress = progress && progress_after_s > 0 ? t0 + static_cast<Time>(progress_after_s * kSec) : kNever;
  for (;;) {
    auto reaped = sup.wait(std::min(deadline, next_progress));
    if (monotonic_now() >= next_progress && reaped.empty() && !sup.interrupted()) {
      unsigned done = 0, all = 0;
      for (const auto& c : sup.kids())
        if (c.kind == Kind::Worker) {
          ++all;
          done += c.reaped && exited_ok(c.status);
        }
      progress(to_ms(monotonic_now() - t0) / 1000, done, all);
      next_progress = monotonic_now() + static_cast<Time>(std::max(0.05, progress_every_s) * kSec);
    }
    // A child that failed without a signal (e.g. a PS whose job the switch
    // aborted) is often the echo of another's death: collect the cascade for
    // a moment, so the root cause is named even when it is reaped later.
    const bool failed = std::any_of(reaped.begin(), reaped.end(),
                                    [](const Child* c) { return !exited_ok(c->status); });
    if (failed && std::none_of(reaped.begin(), reaped.end(), [](const Child* c) { return WIFSIGNALED(c->status); })) {
      const Time settle = std::min(deadline, monotonic_now() + 300 * kMs);
      while (monotonic_now() < settle)
        for (Child* c : sup.wait(settle)) reaped.push_back(c);
    }
    // Among children reaped together, one killed by a signal is the likelier
    // cause: the others typically exited because their job was aborted.
    std::stable_sort(reaped.begin(), reaped.end(),
                     [](const Child* a, const Child* b) { return WIFSIGNALED(a->status) && !WIFSIGNALED(b->status); });
    if (workers_first)
      std::stable_sort(reaped.begin(), reaped.end(), [](const Child* a, const Child* b) {
        return a->kind == Kind::Worker && !exited_ok(a->status) && !(b->kind == Kind::Worker && !exited_ok(b->status));
      });
    // A failed child that says it failed because the switch aborted its job
    // (`echo`: a script's last words) is named after one that does not: the
    // rank that left caused the abort, whichever of them was reaped first.
    if (echo)
      std::stable_sort(reaped.begin(), reaped.end(), [&](const Child* a, const Child* b) { return !echo(*a) && echo(*b); });
    for (Child* c : reaped) {
      // A PS exits 0 only when the switch has told it the job finished (its
      // workers may still be writing their reports); the switch never exits on its own.
      const bool ok = exited_ok(c->status) && c->kind != Kind::Switch;
      if (!ok) {
        Failure f = child_failure(*c);
        if (c->kind == Kind::Switch && exited_ok(c->status))
          f.message = fmt::format("the {} (pid {}) exited while jobs were running", c->name, c->pid);
        return f;
      }
    }
    if (sup.interrupted()) return interrupted_failure(sup);
    if (workers_done()) return std::nullopt;
    if (monotonic_now() >= deadline)
      return Failure{1, fmt::format("timed out after {:.0f} s (--timeout) with workers still running", timeout_s)};
  }
}

// Starts `ina switch` (args + the run's memory, payload, seeds, faults) and
// waits until it reports its port through a pipe once both sockets are bound.
// On failure returns what failed (the caller stops the rest).
std::optional<Failure> start_switch(Supervisor& sup, const LaunchConfig& cfg, std::vector<std::string> args,
                                    const std::string& name, unsigned rank, Time deadline, Child*& sw, uint16_t& port) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) throw RuntimeError(fmt::format("pipe: {}", errno_text(errno)));
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  args.insert(args.end(), {"--memory", std::to_string(cfg.memory_bytes), "--payload", std::to_string(cfg.payload),
                           "--seed", std::to_string(cfg.seed), "--fault-seed", std::to_string(cfg.seed * 7919 + 31 * rank),
                           "--ready-fd", std::to_string(ready_w.get())});
  for (auto& a : fault_args(cfg)) args.push_back(a);
  if (!cfg.verbose) args.push_back("--quiet");
  sw = &sup.spawn(Kind::Switch, name, 0, rank, cfg.binary, args, ready_w.get());
  ready_w.reset();
  std::string port_line;
  const Time ready_deadline = std::min(deadline, monotonic_now() + 15 * kSec);
  for (;;) {
    bool readable = false;
    for (Child* c : sup.wait(ready_deadline, ready_r.get(), &readable))
      if (c == sw) return Failure{1, fmt::format("the {} (pid {}) {} before it was ready", name, c->pid, describe_status(c->status)), c};
    if (sup.interrupted()) return interrupted_failure(sup);
    if (readable) {
      char buf[64];
      const ssize_t n = ::read(ready_r.get(), buf, sizeof buf);
      if (n > 0) port_line.append(buf, static_cast<size_t>(n));
      if (port_line.find('\n') != std::string::npos) break;
      if (n == 0) {  // closed without a port: it is exiting; let the reaper name the status
        const Time until = monotonic_now() + 5 * kSec;
        while (!sw->reaped && monotonic_now() < until) sup.wait(until);
        return Failure{1, sw->reaped ? fmt::format("the {} (pid {}) {} before it was ready", name, sw->pid, describe_status(sw->status))
                                     : fmt::format("the {} closed its ready pipe without reporting a port", name), sw};
      }
    }
    if (monotonic_now() >= ready_deadline) return Failure{1, fmt::format("timed out waiting for the {} to start", name)};
  }
  port = static_cast<uint16_t>(std::stoi(port_line));
  return std::nullopt;
}

// A static layout job (ring_layout.hpp): a ring scheme, or ATP over racks (--racks > 1).
bool uses_layout(const LaunchConfig& c) {
  const schemes::Scheme* s = schemes::lookup(c.scheme);
  return s && (is_ring_scheme(*s) || (is_layout_scheme(*s) && c.racks > 1));
}

// --ina-racks: "" (every rack), "none", or "0,1,...".
std::vector<unsigned> ina_rack_list(const LaunchConfig& c) {
  std::vector<unsigned> v;
  if (c.ina_racks.empty()) {
    for (unsigned q = 0; q < c.racks; ++q) v.push_back(q);
    return v;
  }
  if (c.ina_racks == "none") return v;
  size_t at = 0;
  for (;;) {
    const size_t comma = c.ina_racks.find(',', at);
    const std::string part = c.ina_racks.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    unsigned q = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), q);
    if (part.empty() || ec != std::errc{} || p != part.data() + part.size())
      throw RuntimeError(fmt::format("--ina-racks: expected rack numbers like 0,1 or 'none', got '{}' (bad entry '{}')",
                                     c.ina_racks, part));
    if (std::find(v.begin(), v.end(), q) != v.end())
      throw RuntimeError(fmt::format("--ina-racks '{}' names rack {} twice", c.ina_racks, q));
    v.push_back(q);
    if (comma == std::string::npos) return v;
    at = comma + 1;
  }
}

void validate(const LaunchConfig& c) {
  try {
    schemes::find(c.scheme, schemes::Engine::Runtime);
  } catch (const schemes::UnknownScheme& e) {
    throw RuntimeError(fmt::format("--scheme: {}", e.what()));
  }
  if (c.workers < 1 || c.workers > kMaxWireWorkers)
    throw RuntimeError(fmt::format("--workers must be in 1..{}, got {}", kMaxWireWorkers, c.workers));
  if (c.jobs < 1 || c.jobs > 64) throw RuntimeError(fmt::format("--jobs must be in 1..64, got {}", c.jobs));
  if (!c.job_workers.empty() && c.job_workers.size() != c.jobs)
    throw RuntimeError(fmt::format("--workers gives {} counts for {} jobs: give one count per job", c.job_workers.size(), c.jobs));
  for (unsigned w : c.job_workers)
    if (w < 1 || w > kMaxWireWorkers) throw RuntimeError(fmt::format("--workers: every count must be in 1..{}, got {}", kMaxWireWorkers, w));
  if (c.size_bytes < 4 || c.size_bytes % 4 != 0)
    throw RuntimeError(fmt::format("--size must be a positive multiple of 4 bytes (whole float32 values), got {}", c.size_bytes));
  if (c.memory_bytes < uint64_t{4} * c.payload)
    throw RuntimeError(fmt::format("--memory {} holds no aggregator of --payload {} values ({} bytes each)", c.memory_bytes,
                                   c.payload, 4 * c.payload));
  for (uint32_t p : c.priorities)
    if (p < 1 || p > INT32_MAX) throw RuntimeError(fmt::format("--priorities: every priority must be in 1..{}, got {}", INT32_MAX, p));
  if (!(c.delay_us >= 0 && c.delay_us <= 1e8)) throw RuntimeError(fmt::format("--delay-us must be in [0, 1e8], got {}", c.delay_us));
  if (!(c.window_kb >= 0 && c.window_kb <= 1e6)) throw RuntimeError(fmt::format("--window-kb must be in [0, 1e6], got {}", c.window_kb));
  if (c.iterations < 1) throw RuntimeError("--iterations must be >= 1");
  if (c.payload < 1 || c.payload > 16000) throw RuntimeError("--payload must be in 1..16000 values");
  for (double r : {c.loss, c.duplicate, c.reorder})
    if (!(r >= 0 && r < 1)) throw RuntimeError("--loss, --duplicate and --reorder must be in [0, 1)");
  if (!c.priorities.empty() && c.priorities.size() != c.jobs)
    throw RuntimeError(fmt::format("--priorities needs one value per job ({})", c.jobs));
  if (c.delay_job > c.jobs || (c.delay_job && c.delay_rank >= c.workers_of(c.delay_job)))
    throw RuntimeError(fmt::format("--delay-worker {}:{} names a job or rank that does not exist", c.delay_job, c.delay_rank));
  if (!(c.timeout_s > 0 && c.timeout_s <= 1e6)) throw RuntimeError(fmt::format("--timeout must be in (0, 1e6] seconds, got {}", c.timeout_s));
  const schemes::Scheme& s = schemes::find(c.scheme);
  if (c.fail_at_op >= 0 && c.fail_rank < 0) throw RuntimeError(fmt::format("--fail-at-op {}: give --fail-rank too", c.fail_at_op));
  if (c.fail_rank >= 0) {
    if (!uses_layout(c) || !is_ring_scheme(s) || s.collective == schemes::Collective::Hierarchical)
      throw RuntimeError(fmt::format("--fail-rank {}: --scheme {} does not survive a failure (rar and rina do{})", c.fail_rank,
                                     c.scheme,
                                     s.collective == schemes::Collective::Hierarchical
                                         ? "; h-ar needs racks of equal size, which a failure breaks"
                                         : ""));
    if (c.fail_rank >= static_cast<int>(c.workers))
      throw RuntimeError(fmt::format("--fail-rank {}: the job has ranks 0..{}", c.fail_rank, c.workers - 1));
    if (c.workers < 3) throw RuntimeError(fmt::format("--fail-rank {}: a ring of {} workers cannot lose one", c.fail_rank, c.workers));
    if (c.fail_at_op < 0) throw RuntimeError(fmt::format("--fail-rank {}: give --fail-at-op K too", c.fail_rank));
    if (c.fail_at_op >= static_cast<int>(c.iterations))
      throw RuntimeError(fmt::format("--fail-at-op {}: the job runs ops 0..{} (--iterations {})", c.fail_at_op,
                                     c.iterations - 1, c.iterations));
    if (!(c.fail_detect_ms >= kMinFailDetectMs && c.fail_detect_ms <= 1e6))
      throw RuntimeError(fmt::format("--fail-detect-ms {}: must be in [{}, 1e6] ms (heartbeats are looked at every "
                                     "10 ms; a shorter time would never detect anything)", c.fail_detect_ms, kMinFailDetectMs));
  }
  if (!c.command.empty()) {
    if (c.jobs != 1 || !c.job_workers.empty())
      throw RuntimeError(fmt::format("train-py runs one job: got {}", workers_flags(c)));
    if (uses_layout(c))
      throw RuntimeError(fmt::format("--scheme {}: train-py runs a scheme with one switch (not a ring layout)", c.scheme));
    if (c.command[0].empty() || c.command[0][0] != '/')
      throw RuntimeError(fmt::format("the worker command '{}' must be an absolute path", c.command[0]));
  }
  if (c.switch_threads < 1 || c.switch_threads > kMaxSwitchThreads)
    throw RuntimeError(fmt::format("--switch-threads must be in 1..{}, got {}", kMaxSwitchThreads, c.switch_threads));
  if (c.switch_threads > 1)
    if (const std::string why = why_not_threaded(s, uses_layout(c)); !why.empty())
      throw RuntimeError(fmt::format("--switch-threads {}: {}; give --switch-threads 1", c.switch_threads, why));
  if (!uses_layout(c)) {
    if (c.racks != 1 || !c.ina_racks.empty())
      throw RuntimeError(fmt::format("--racks / --ina-racks apply to the ring schemes ({}) and --racks to atp and dsa, not to "
                                     "--scheme {}", "rar, h-ar, rina", c.scheme));
    return;
  }
  if (c.jobs != 1) throw RuntimeError(fmt::format("--scheme {} runs one job, got --jobs {}", c.scheme, c.jobs));
  if (c.workers < 2 || c.workers > kMaxRingWorkers)
    throw RuntimeError(fmt::format("--scheme {}: --workers must be in 2..{}, got {}", c.scheme, kMaxRingWorkers, c.workers));
  if (c.delay_job || !c.priorities.empty() || c.window_kb > 0)
    throw RuntimeError(fmt::format("--scheme {}: --delay-worker, --priorities and --window-kb are not supported for ring schemes", c.scheme));
  if (!c.ina_racks.empty() && s.collective != schemes::Collective::RingIna)
    throw RuntimeError(fmt::format("--ina-racks {}: only --scheme rina has INA racks, not {}{}", c.ina_racks, c.scheme,
                                   s.collective == schemes::Collective::PsIna ? " (ATP over racks runs at every ToR)" : ""));
  (void)split_racks(c.workers, c.racks, ina_rack_list(c));  // throws naming --racks / --ina-racks
}

// `ina run` for a ring scheme: one job of `ina ring-worker`s (and Rina's ToR
// switches) on loopback, the layout generated here (ring_layout.hpp).
int launch_ring(const LaunchConfig& cfg, Supervisor& sup, Time t_start, Time deadline, std::ostream& out,
                const std::function<int(Failure)>& fail, const std::function<void(const nlohmann::json&)>& write_json) {
  const fs::path dir(cfg.work_dir);
  RingLayout L;
  L.scheme = schemes::find(cfg.scheme).name;
  L.payload = cfg.payload;
  L.memory_bytes = cfg.memory_bytes;
  L.racks = split_racks(cfg.workers, cfg.racks, ina_rack_list(cfg));
  const bool tree = L.tree();  // ATP over racks: every ToR aggregates, a PS behind rack 0's
  UniqueFd ps_sock;
  if (tree) {
    for (auto& rk : L.racks) rk.ina = true;
    ps_sock = bind_udp(Endpoint::parse("127.0.0.1:0"), 8 << 20);
    L.ps = local_endpoint(ps_sock.get());
  }
  // Every worker's socket is bound here and handed to it: the layout holds real addresses before anyone starts.
  std::vector<UniqueFd> socks;
  for (unsigned r = 0; r < cfg.workers; ++r) {
    socks.push_back(bind_udp(Endpoint::parse("127.0.0.1:0"), 4 << 20));
    L.workers.push_back(local_endpoint(socks.back().get()));
  }
  // Each ToR's sockets are bound here too and handed over, so the one layout
  // every process reads names every ToR (a ToR forwards to the next rack's).
  std::vector<DataAndControl> tor_socks(L.racks.size());
  for (size_t q = 0; q < L.racks.size(); ++q)
    if (L.serving_tor(q)) {
      tor_socks[q] = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 8 << 20);
      L.racks[q].sw = local_endpoint(tor_socks[q].udp.get());
    }
  // Datagram tags: this run's salt in the layout; every process derives the key from it and the job's key.
  if (cfg.datagram_auth) L.datagram_salt = random_key();
  const std::string layout = (dir / "layout.json").string();
  L.write(layout);
  const Key switch_key = random_key();
  const fs::path key_file = dir / "switch.key";
  write_key_file(key_file.string(), switch_key);
  std::vector<std::pair<Child*, Endpoint>> switches;
  for (size_t q = 0; q < L.racks.size(); ++q) {
    if (!L.serving_tor(q)) continue;
    Child* sw = nullptr;
    uint16_t port = 0;
    const int udp = tor_socks[q].udp.get(), tcp = tor_socks[q].tcp.get();
    fcntl(udp, F_SETFD, 0);  // inherited by this switch only: closed here right after
    fcntl(tcp, F_SETFD, 0);
    std::vector<std::string> sw_args{"switch", "--key-file", key_file.string(), "--udp-fd", std::to_string(udp), "--tcp-fd",
                                     std::to_string(tcp), "--policy", L.scheme, "--layout", layout, "--rack", std::to_string(q)};
    if (cfg.datagram_auth) sw_args.push_back("--datagram-auth");
    auto f = start_switch(sup, cfg, std::move(sw_args), fmt::format("switch of rack {}", q), static_cast<unsigned>(q), deadline,
                          sw, port);
    tor_socks[q] = {};
    if (f) return fail(*f);
    if (port != L.racks[q].sw->port())
      return fail({1, fmt::format("the {} reports port {}, not the {} it was given", sw->name, port, L.racks[q].sw->port()), sw});
    switches.emplace_back(sw, *L.racks[q].sw);
  }
  const fs::path barrier = dir / "barrier";
  fs::remove_all(barrier);
  fs::create_directories(barrier);
  auto report_of = [&](unsigned r) { return (dir / fmt::format("rank{}.json", r)).string(); };
  const std::string ps_report = (dir / "ps.json").string();
  // A rank that cannot finish says where it stopped before `ina run` gives up on it.
  const double worker_timeout = std::max(0.5, cfg.timeout_s - std::min(1.0, cfg.timeout_s / 4));
  // The job's key, for tagged datagrams (every worker and the PS) and, after
  // an injected failure, for the control node's calls to the ToRs.
  const bool failover = cfg.fail_rank >= 0;
  const fs::path job_key_file = dir / "job.key";
  std::vector<std::string> key_args;
  if (failover || cfg.datagram_auth) {
    write_key_file(job_key_file.string(), job_key(switch_key, L.job));
    key_args = {"--key-file", job_key_file.string()};
  }
  if (cfg.datagram_auth) key_args.push_back("--datagram-auth");
  if (tree) {
    const int fd = ps_sock.get();
    std::vector<std::string> a{"ring-worker", "--layout", layout, "--ps", "--size", std::to_string(cfg.size_bytes),
                               "--barrier", barrier.string(), "--udp-fd", std::to_string(fd), "--report", ps_report,
                               "--timeout", fmt::format("{}", worker_timeout), "--fault-seed",
                               std::to_string(cfg.seed * 7919 + 99)};
    a.insert(a.end(), key_args.begin(), key_args.end());
    for (auto& f : fault_args(cfg)) a.push_back(f);
    if (!cfg.verbose) a.push_back("--quiet");
    sup.spawn(Kind::Worker, "PS", 1, cfg.workers, cfg.binary, a, fd);
    ps_sock.reset();
  }
  for (unsigned r = 0; r < cfg.workers; ++r) {
    const int fd = socks[r].get();
    std::vector<std::string> a{"ring-worker", "--layout", layout, "--rank", std::to_string(r), "--size",
                               std::to_string(cfg.size_bytes), "--iterations", std::to_string(cfg.iterations), "--seed",
                               std::to_string(cfg.seed), "--barrier", barrier.string(), "--udp-fd", std::to_string(fd),
                               "--report", report_of(r), "--timeout", fmt::format("{}", worker_timeout),
                               "--fault-seed", std::to_string(cfg.seed * 7919 + 100 + r)};
    a.insert(a.end(), key_args.begin(), key_args.end());
    if (failover) {  // every rank watches heartbeats
      a.insert(a.end(), {"--fail-detect-ms", fmt::format("{}", cfg.fail_detect_ms)});
      if (static_cast<int>(r) == cfg.fail_rank) a.insert(a.end(), {"--crash-at-op", std::to_string(cfg.fail_at_op)});
    }
    for (auto& f : fault_args(cfg)) a.push_back(f);
    if (!cfg.verbose) a.push_back("--quiet");
    sup.spawn(Kind::Worker, fmt::format("worker rank {}", r), 1, r, cfg.binary, a, fd);
    socks[r].reset();
  }
  auto progress = [](double secs, unsigned done, unsigned all) {
    std::cerr << fmt::format("ina run: {:.0f} s: {} of {} ranks finished\n", secs, done, all);
  };
  if (auto f = wait_for_workers(sup, deadline, cfg.timeout_s, false, cfg.progress_after_s, cfg.progress_every_s, progress)) {
    // What the ToRs saw, for the diagnosis (drops and refusals by reason).
    for (auto& [sw, ep] : switches) {
      try {
        const auto st = query_switch_stats(ep, 1 * kSec, &switch_key, 0);
        std::fprintf(stderr, "ina run: the %s at failure: %s\n", sw->name.c_str(), st.dump().c_str());
      } catch (const RuntimeError&) {
      }
    }
    return fail(*f);
  }

  // The switches' statistics (every aggregator must be free again), then stop them.
  nlohmann::json sw_stats = nlohmann::json::array();
  std::vector<std::string> problems;
  for (auto& [sw, ep] : switches) {
    try {
      sw_stats.push_back(query_switch_stats(ep, 5 * kSec, &switch_key, 0));
    } catch (const RuntimeError& e) {
      return fail({1, fmt::format("cannot read the statistics of the {}: {}", sw->name, e.what()), sw});
    }
    kill(sw->pid, SIGTERM);
  }
  for (auto& [sw, ep] : switches) {
    const Time until = monotonic_now() + 5 * kSec;
    while (!sw->reaped && monotonic_now() < until) sup.wait(until);
    if (!sw->reaped) return fail({1, fmt::format("the {} (pid {}) did not stop on SIGTERM", sw->name, sw->pid), sw});
    if (!exited_ok(sw->status)) return fail(child_failure(*sw));
  }
  const double wall = to_ms(monotonic_now() - t_start) / 1000;
  nlohmann::json reports = nlohmann::json::array();
  double slowest = 0;
  uint64_t verified = 0, mismatches = 0, retransmits = 0, refused = 0, steps = 0;
  uint64_t noise = 0;  // datagrams from outside the job, refused by a worker's or ToR's engine
  uint64_t expected = 0;  // values the ranks that finished had to check (after a failure: from the restart op on)
  unsigned survivors = 0;
  nlohmann::json failover_j;
  for (unsigned r = 0; r < cfg.workers; ++r) {
    std::ifstream in(report_of(r));
    auto rep = nlohmann::json::parse(in, nullptr, false);
    if (rep.is_discarded()) return fail({1, fmt::format("worker rank {} left no readable report {}", r, report_of(r))});
    if (rep.value("crashed", false)) {
      if (static_cast<int>(r) != cfg.fail_rank) problems.push_back(fmt::format("worker rank {} crashed, uninjected", r));
      reports.push_back(std::move(rep));
      continue;
    }
    ++survivors;
    expected += rep.value("expected", uint64_t{0});
    if (rep.contains("failover")) {
      const auto& f = rep["failover"];
      if (failover && f.value("epoch", 0) != 1)
        problems.push_back(fmt::format("worker rank {} ended in epoch {}, not 1", r, f.value("epoch", 0)));
      if (failover_j.is_null()) failover_j = {{"failed", f["failed"]}, {"restart_op", f["restart_op"]}, {"epoch", f["epoch"]},
                                              {"survivors", f["survivors"]}, {"control_node", f["control_node"]}};
      else if (f["restart_op"] != failover_j["restart_op"] || f["survivors"] != failover_j["survivors"])
        problems.push_back(fmt::format("worker rank {} has another membership than the other survivors", r));
    }
    slowest = std::max(slowest, rep.at("allreduce_seconds").get<double>());
    verified += rep.at("verified").get<uint64_t>() - rep.at("mismatches").get<uint64_t>();
    mismatches += rep.at("mismatches").get<uint64_t>();
    retransmits += rep["stats"]["ring"].value("retransmits", uint64_t{0});
    refused += rep["stats"]["transport"].value("malformed", uint64_t{0}) + rep["stats"]["transport"].value("foreign", uint64_t{0}) +
               member_refused(rep["stats"]["engine"]);
    noise += rep["stats"]["engine"].value("rx_unattributed", uint64_t{0});
    steps = std::max<uint64_t>(steps, rep.value("steps_per_allreduce", uint64_t{0}));
    for (const auto& l : rep["leaks"]) problems.push_back(fmt::format("worker rank {}: {}", r, l.get<std::string>()));
    reports.push_back(std::move(rep));
  }
  if (tree) {
    std::ifstream in(ps_report);
    auto rep = nlohmann::json::parse(in, nullptr, false);
    if (rep.is_discarded()) return fail({1, fmt::format("the PS left no readable report {}", ps_report)});
    for (const auto& l : rep["leaks"]) problems.push_back(fmt::format("PS: {}", l.get<std::string>()));
    reports.push_back(std::move(rep));
  }
  if (failover && survivors != cfg.workers - 1)
    problems.push_back(fmt::format("{} of {} workers finished; the injected failure should leave {}", survivors, cfg.workers,
                                   cfg.workers - 1));
  if (!failover && expected != cfg.size_bytes / 4 * cfg.iterations * cfg.workers)
    problems.push_back(fmt::format("the workers expected {} values, not {}", expected, cfg.size_bytes / 4 * cfg.iterations * cfg.workers));
  const double goodput = slowest > 0 ? static_cast<double>(cfg.size_bytes) * cfg.iterations / slowest : 0;
  std::string rack_text;
  for (size_t q = 0; q < L.racks.size(); ++q)
    rack_text += fmt::format("{}rack {}: ranks {}..{}{}", q ? ", " : "", q, L.racks[q].ranks.front(), L.racks[q].ranks.back(),
                             L.serving_tor(q) ? fmt::format(" + INA switch {}", L.racks[q].sw->str()) : "");
  out << fmt::format("ina run: {}, {} workers in {} rack(s) ({}), {} allreduces of {}, payload {} values, loss {}, "
                     "duplicate {}, reorder {}\n",
                     L.scheme, cfg.workers, L.racks.size(), rack_text, cfg.iterations, mib(cfg.size_bytes), cfg.payload,
                     cfg.loss, cfg.duplicate, cfg.reorder);
  if (failover)
    out << fmt::format("failure: rank {} stopped in op {}; control node rank {} re-planned epoch {} over {} survivors, "
                       "restarting at op {}\n",
                       cfg.fail_rank, cfg.fail_at_op, failover_j.value("control_node", -1), failover_j.value("epoch", 0),
                       survivors, failover_j.value("restart_op", -1));
  out << fmt::format("job 1: {} of {} values exact on {} workers{}; goodput {:.1f} MB/s ({:.2f} Gbit/s; {:.3f} s in "
                     "allreduce, slowest worker); {}{} retransmissions\n",
                     verified, expected, survivors, mismatches ? fmt::format(", {} DIFFER", mismatches) : "",
                     goodput / 1e6, goodput * 8 / 1e9, slowest,
                     tree ? std::string() : fmt::format("{} steps per allreduce, ", steps), retransmits);
  for (size_t k = 0; k < switches.size(); ++k) {
    const auto& st = sw_stats[k];
    const auto& s = st["switch"];
    const auto& e = st["engine"];
    out << fmt::format("{}: {} {} packets in, {} sums completed, {} duplicates, {} stale resends answered; {} datagrams "
                       "in, {} out; injected {} lost, {} duplicated, {} reordered; {} aggregators held after the job\n",
                       switches[k].first->name, s.value("data_in", 0), tree ? "gradient" : "ring", s.value("completed", 0), s.value("duplicates", 0),
                       s.value("stale", 0), e.value("rx_datagrams", 0), e.value("tx_datagrams", 0), e.value("fault_lost", 0),
                       e.value("fault_duplicated", 0), e.value("fault_reordered", 0), st.value("occupied", 0));
    // ATP's pool (a tree) may keep an aggregator a late copy reserved after its
    // task's result passed, when duplication or reordering is injected (as ATP
    // on a star and in the simulator, tests/cluster_fixture.hpp); Rina's
    // regions never may.
    const bool late_copies = cfg.duplicate > 0 || cfg.reorder > 0;
    if (st.value("occupied", 0) != 0 && !(tree && late_copies))
      problems.push_back(fmt::format("the {} holds {} aggregators after the job", switches[k].first->name, st.value("occupied", 0)));
    uint64_t sw_refused = s.value("malformed", uint64_t{0}) + member_refused(e);
    noise += e.value("rx_unattributed", uint64_t{0});
    for (const char* f : {"foreign_data", "foreign_ack", "foreign_forward"}) sw_refused += s.value(f, uint64_t{0});
    if (!tree) sw_refused += s.value("collisions", uint64_t{0});  // ATP's collisions go to the PS by design
    if (sw_refused) problems.push_back(fmt::format("the {} refused {} packets (malformed, foreign or colliding)", switches[k].first->name, sw_refused));
  }
  if (mismatches) problems.push_back(fmt::format("{} values differed from the exact sum", mismatches));
  if (verified + mismatches != expected) problems.push_back(fmt::format("{} of {} values were checked", verified + mismatches, expected));
  if (refused) problems.push_back(fmt::format("workers refused {} packets as malformed or foreign", refused));
  if (noise) out << noise_line(noise);
  out << fmt::format("wall time {:.2f} s\n", wall);
  nlohmann::json j = {{"ok", problems.empty()}, {"problems", problems}, {"wall_seconds", wall}, {"noise_datagrams", noise},
                      {"config", {{"scheme", L.scheme}, {"workers", cfg.workers}, {"racks", cfg.racks}, {"ina_racks", cfg.ina_racks},
                                  {"size_bytes", cfg.size_bytes}, {"iterations", cfg.iterations}, {"payload", cfg.payload},
                                  {"memory_bytes", cfg.memory_bytes}, {"loss", cfg.loss}, {"duplicate", cfg.duplicate},
                                  {"reorder", cfg.reorder}, {"seed", cfg.seed}, {"fail_rank", cfg.fail_rank},
                                  {"fail_at_op", cfg.fail_at_op}, {"fail_detect_ms", cfg.fail_detect_ms}}},
                      {"layout", L.to_json()},
                      {"jobs", {{{"job", 1}, {"goodput_bytes_per_s", goodput}, {"allreduce_seconds", slowest},
                                 {"verified", verified}, {"mismatches", mismatches}, {"steps_per_allreduce", steps},
                                 {"failover", failover_j}, {"workers", reports}}}},
                      {"switches", sw_stats}};
  if (!problems.empty()) j["failure"] = {{"message", fmt::format("{}", fmt::join(problems, "; "))}, {"exit_status", mismatches ? 3 : 1}};
  write_json(j);
  for (const auto& p : problems) std::cerr << "ina run: FAILED: " << p << "\n";
  if (mismatches) return 3;
  return problems.empty() ? 0 : 1;
}

}  // namespace

unsigned LaunchConfig::total_workers() const {
  unsigned n = 0;
  for (unsigned j = 1; j <= jobs; ++j) n += workers_of(j);
  return n;
}

LaunchEstimate estimate_launch(const LaunchConfig& c) {
  LaunchEstimate e;
  const uint64_t workers = c.total_workers();
  const uint64_t ps = has_ps(c.scheme) ? c.jobs : 0;
  e.processes = 2 + ps + workers;             // launcher, switch, PSes, workers
  e.threads = 1 + c.switch_threads + ps + 2 * workers;  // a worker: main + the Communicator's I/O thread
  e.worker_bytes = kProcessBaseline + 7 * c.size_bytes;
  const uint64_t agg_bytes = uint64_t{4} * c.payload;
  e.switch_bytes = c.memory_bytes / agg_bytes * (24 + agg_bytes);  // dp::SwitchProgram: Agg (24 B) + values
  e.memory_bytes = workers * e.worker_bytes + e.switch_bytes + (2 + ps) * kProcessBaseline;
  return e;
}

void check_launch_resources(const LaunchConfig& c) {
  const LaunchEstimate e = estimate_launch(c);
  const std::string who = workers_flags(c);
  const std::string parts = fmt::format("{} workers, {} PSes, the switch and this launcher", c.total_workers(),
                                        has_ps(c.scheme) ? c.jobs : 0);
  if (const uint64_t limit = nproc_limit(); limit && e.threads > limit)
    throw RuntimeError(fmt::format("{}: {} processes with {} threads ({}) exceed RLIMIT_NPROC = {}; use fewer workers or jobs",
                                   who, e.processes, e.threads, parts, limit));
  if (c.force) return;
  const uint64_t bound = 64ULL * online_cpus();
  if (e.processes > bound)
    throw RuntimeError(fmt::format("{}: {} processes ({}) exceed the bound of {} (64 per CPU, {} CPUs); use fewer workers "
                                   "or jobs, or --force",
                                   who, e.processes, parts, bound, online_cpus()));
  if (const uint64_t avail = mem_available_bytes(); avail && e.memory_bytes > avail)
    throw RuntimeError(fmt::format("{} --size {}: estimated memory {} ({} per worker, {} for the switch's arrays) exceeds "
                                   "the available memory {} (MemAvailable); use fewer or smaller workers, or --force",
                                   who, c.size_bytes, human_bytes(e.memory_bytes), human_bytes(e.worker_bytes),
                                   human_bytes(e.switch_bytes), human_bytes(avail)));
}

int launch(const LaunchConfig& cfg_in, std::ostream& out) {
  LaunchConfig cfg = cfg_in;
  validate(cfg);
  check_launch_resources(cfg);
  if (cfg.binary.empty()) cfg.binary = fs::read_symlink("/proc/self/exe").string();
  const bool own_dir = cfg.work_dir.empty();
  if (own_dir) {
    std::string tmpl = (fs::temp_directory_path() / "ina-run-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw RuntimeError(fmt::format("cannot create a temporary directory: {}", errno_text(errno)));
    cfg.work_dir = tmpl;
  } else {
    fs::create_directories(cfg.work_dir);
  }
  struct DirGuard {
    std::string dir;
    bool remove;
    ~DirGuard() {
      std::error_code ec;
      if (remove) fs::remove_all(dir, ec);
    }
  } guard{cfg.work_dir, own_dir};

  const Time t_start = monotonic_now();
  const Time deadline = t_start + static_cast<Time>(cfg.timeout_s * kSec);
  const bool with_ps = has_ps(cfg.scheme);
  Supervisor sup;
  const std::vector<std::string> quiet = cfg.verbose ? std::vector<std::string>{} : std::vector<std::string>{"--quiet"};

  // Each PS writes its statistics here at exit (also when stopped or failed).
  auto ps_stats_path = [&](unsigned j) { return fs::path(cfg.work_dir) / fmt::format("ps-job{}.json", j); };
  auto read_ps_stats = [&]() {
    nlohmann::json all = nlohmann::json::array();
    if (!with_ps) return all;
    for (unsigned j = 1; j <= cfg.jobs; ++j) {
      std::ifstream in(ps_stats_path(j));
      auto st = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
      if (st.is_discarded() || st.is_null()) st = {{"job", j}, {"missing", "the PS left no statistics"}};
      all.push_back(std::move(st));
    }
    return all;
  };
  auto config_json = [&]() {
    nlohmann::json per_job = nlohmann::json::array();
    for (unsigned j = 1; j <= cfg.jobs; ++j) per_job.push_back(cfg.workers_of(j));
    return nlohmann::json{{"scheme", cfg.scheme}, {"workers", per_job}, {"jobs", cfg.jobs},
                          {"size_bytes", cfg.size_bytes}, {"iterations", cfg.iterations}, {"payload", cfg.payload},
                          {"memory_bytes", cfg.memory_bytes}, {"loss", cfg.loss}, {"duplicate", cfg.duplicate},
                          {"reorder", cfg.reorder}, {"seed", cfg.seed}, {"racks", cfg.racks}, {"ina_racks", cfg.ina_racks}};
  };
  auto write_json = [&](const nlohmann::json& j) {
    if (cfg.json_out.empty()) return;
    std::ofstream f(cfg.json_out);
    f << j.dump(1) << "\n";
    if (!f) std::cerr << "ina run: cannot write " << cfg.json_out << "\n";
  };
  const std::string me = cfg.command.empty() ? "ina run" : "ina train-py";
  StderrTee tee;  // train-py: the scripts' stderr
  // The failure is reported last: after the other processes were stopped (and
  // said what they say when their job goes), with a failed script's own last
  // lines of stderr.
  auto fail = [&](Failure f) {
    if (!sup.all_reaped()) std::cerr << me << ": stopping the other processes\n";
    sup.stop_all();
    tee.finish(1 * kSec);
    std::string tail;
    if (f.child && f.child->kind == Kind::Worker && !cfg.command.empty()) tail = tee.tail(f.child->rank);
    std::cerr << me << ": " << f.message;
    if (!tail.empty()) {
      std::string indented;
      for (size_t at = 0; at < tail.size();) {
        const size_t nl = std::min(tail.find('\n', at), tail.size());
        indented += "  | " + tail.substr(at, nl - at) + "\n";
        at = nl + 1;
      }
      std::cerr << "; the end of its standard error:\n" << indented;
    } else {
      std::cerr << "\n";
    }
    if (!cfg.json_out.empty()) {
      nlohmann::json failure = {{"message", f.message}, {"exit_status", f.status}};
      if (!tail.empty()) failure["stderr_tail"] = tail;
      if (const Child* c = f.child) {
        static constexpr const char* kKinds[] = {"switch", "ps", "worker"};
        failure["process"] = c->name;
        failure["kind"] = kKinds[static_cast<int>(c->kind)];
        failure["job"] = c->job;
        failure["rank"] = c->rank;
        failure["pid"] = c->pid;
        if (WIFEXITED(c->status)) failure["exit_code"] = WEXITSTATUS(c->status);
        if (WIFSIGNALED(c->status)) failure["signal"] = WTERMSIG(c->status);
        failure["status"] = describe_status(c->status);
      }
      write_json({{"ok", false}, {"problems", {f.message}}, {"failure", failure},
                  {"wall_seconds", to_ms(monotonic_now() - t_start) / 1000}, {"config", config_json()},
                  {"ps", read_ps_stats()}});
    }
    return f.status;
  };
  auto interrupted = [&]() { return interrupted_failure(sup); };
  if (uses_layout(cfg)) return launch_ring(cfg, sup, t_start, deadline, out, fail, write_json);

  // 1. The switch; it reports its port through a pipe once both sockets are bound.
  // Credentials: a fresh switch key; each job's processes get only their job's key.
  const Key switch_key = random_key();
  const fs::path switch_key_file = fs::path(cfg.work_dir) / "switch.key";
  write_key_file(switch_key_file.string(), switch_key);
  Child* sw = nullptr;
  uint16_t sw_port = 0;
  std::vector<std::string> sw_args{"switch", "--key-file", switch_key_file.string(), "--listen",
                                   fmt::format("127.0.0.1:{}", cfg.port), "--policy", cfg.scheme, "--regions",
                                   std::to_string(cfg.jobs), "--threads", std::to_string(cfg.switch_threads)};
  if (cfg.datagram_auth) sw_args.push_back("--datagram-auth");
  // Every member of this run connects from 127.0.0.1: the switch's per-address
  // connection limit must hold them all (and a few stats queries).
  // The total is given only when it must grow beyond its default: below it,
  // the switch keeps its own (lowered to what RLIMIT_NOFILE allows).
  if (const unsigned conns = cfg.total_workers() + (has_ps(cfg.scheme) ? cfg.jobs : 0) + 16;
      conns > ControlLimits{}.max_per_source) {
    sw_args.insert(sw_args.end(), {"--max-connections-per-source", std::to_string(conns)});
    if (conns > ControlLimits::kDefaultMaxConnections)
      sw_args.insert(sw_args.end(), {"--max-connections", std::to_string(conns)});
  }
  if (auto f = start_switch(sup, cfg, std::move(sw_args), "switch", 0, deadline, sw, sw_port))
    return fail(*f);
  const Endpoint sw_ep = Endpoint::parse(fmt::format("127.0.0.1:{}", sw_port));

  // 2. PSes and workers.
  for (unsigned j = 1; j <= cfg.jobs; ++j) {
    // This run's credential of job j, for job j's processes only (a --work-dir
    // reused from an earlier run holds that run's keys: always rewritten).
    const std::string job_key_file = (fs::path(cfg.work_dir) / fmt::format("job{}.key", j)).string();
    write_key_file(job_key_file, job_key(switch_key, static_cast<uint16_t>(j)));
    if (with_ps) {
      std::vector<std::string> a{"ps", "--key-file", job_key_file, "--switch", sw_ep.str(), "--job", std::to_string(j), "--workers",
                                 std::to_string(cfg.workers_of(j)), "--fault-seed", std::to_string(cfg.seed * 7919 + 1000 * j),
                                 "--stats-json", ps_stats_path(j).string()};
      for (auto& f : fault_args(cfg)) a.push_back(f);
      if (cfg.datagram_auth) a.push_back("--datagram-auth");
      a.insert(a.end(), quiet.begin(), quiet.end());
      sup.spawn(Kind::Ps, fmt::format("PS of job {}", j), j, 0, cfg.binary, a);
    }
    const uint32_t prio = cfg.priorities.empty() ? (1u << 20) >> std::min(j - 1, 19u) : cfg.priorities[j - 1];
    const fs::path toml = fs::path(cfg.work_dir) / fmt::format("job{}.toml", j);
    {
      std::ofstream f(toml);
      f << "# generated by `ina run`\n[communicator]\n"
        << fmt::format("switch = \"{}\"\njob = {}\nworkers = {}\npayload = {}\npriority = {}\n", sw_ep.str(), j,
                       cfg.workers_of(j), cfg.payload, prio);
      if (cfg.window_kb > 0) f << fmt::format("window_kb = {}\n", cfg.window_kb);
      if (cfg.datagram_auth) f << "datagram_auth = true\n";
      f << "[faults]\n" << fmt::format("loss = {}\nduplicate = {}\nreorder = {}\n", cfg.loss, cfg.duplicate, cfg.reorder);
      if (!f) throw RuntimeError(fmt::format("cannot write {}", toml.string()));
    }
    if (!cfg.command.empty()) {
      const uint16_t master_port = free_loopback_port();
      const std::vector<std::string> args(cfg.command.begin() + 1, cfg.command.end());
      for (unsigned r = 0; r < cfg.workers_of(j); ++r) {
        const std::string n = std::to_string(cfg.workers_of(j));
        std::vector<std::string> env{"INA_CONFIG=" + toml.string(), fmt::format("INA_RANK={}", r),
                                     "INA_JOB_KEY=" + to_hex(job_key(switch_key, static_cast<uint16_t>(j))),
                                     fmt::format("INA_FAULT_SEED={}", cfg.seed * 7919 + 100 * j + r),
                                     fmt::format("RANK={}", r), fmt::format("LOCAL_RANK={}", r), "WORLD_SIZE=" + n,
                                     "LOCAL_WORLD_SIZE=" + n, "MASTER_ADDR=127.0.0.1",
                                     fmt::format("MASTER_PORT={}", master_port)};
        if (!cfg.python_path.empty()) {
          const char* inherited = std::getenv("PYTHONPATH");
          env.push_back("PYTHONPATH=" + cfg.python_path + (inherited && *inherited ? std::string(":") + inherited : ""));
        }
        const std::string name =
            fmt::format("worker rank {} ({})", r, cfg.command.size() > 1 ? cfg.command[1] : cfg.command[0]);
        sup.spawn(Kind::Worker, name, j, r, cfg.command[0], args, -1, env, tee.add(r));
      }
      continue;
    }
    for (unsigned r = 0; r < cfg.workers_of(j); ++r) {
      std::vector<std::string> a{"worker", "--key-file", job_key_file, "--config", toml.string(), "--rank", std::to_string(r), "--size",
                                 std::to_string(cfg.size_bytes), "--iterations", std::to_string(cfg.iterations),
                                 "--seed", std::to_string(cfg.seed), "--fault-seed", std::to_string(cfg.seed * 7919 + 100 * j + r),
                                 "--report", (fs::path(cfg.work_dir) / fmt::format("job{}-rank{}.json", j, r)).string()};
      if (cfg.delay_job == j && cfg.delay_rank == r && cfg.delay_us > 0)
        a.insert(a.end(), {"--delay-us", fmt::format("{}", cfg.delay_us)});
      a.insert(a.end(), quiet.begin(), quiet.end());
      sup.spawn(Kind::Worker, fmt::format("worker rank {} of job {}", r, j), j, r, cfg.binary, a);
    }
  }
  tee.start();  // train-py: reads every script's stderr (nothing without scripts)

  // 3. Until every worker has exited; anything else that exits is a failure.
  // `ina run` says how far the jobs are while they run (a long run is not a hang).
  uint64_t packets_needed = 0;  // gradient packets into the switch without loss or retransmission
  for (unsigned j = 1; j <= cfg.jobs; ++j)
    packets_needed += uint64_t{cfg.workers_of(j)} * cfg.iterations * ((cfg.size_bytes / 4 + cfg.payload - 1) / cfg.payload);
  auto progress = [&](double secs, unsigned done, unsigned all) {
    std::string extra;
    try {
      const auto st = query_switch_stats(sw_ep, 1 * kSec, &switch_key, 0);
      const uint64_t in = st["switch"].value("data_in", uint64_t{0});
      if (in > 0 && packets_needed > 0)
        extra = fmt::format("; the switch has taken {} gradient packets, about {:.0f} % of the {} the jobs send without loss",
                            in, std::min(99.0, 100.0 * static_cast<double>(in) / static_cast<double>(packets_needed)),
                            packets_needed);
    } catch (const RuntimeError&) {
    }
    std::cerr << fmt::format("{}: {:.0f} s: {} of {} workers finished{}\n", me, secs, done, all, extra);
  };
  auto aborted_by_switch = [&](const Child& c) {
    return c.kind == Kind::Worker && !exited_ok(c.status) && tee.tail(c.rank).find("aborted by the switch") != std::string::npos;
  };
  if (auto f = wait_for_workers(sup, deadline, cfg.timeout_s, !cfg.command.empty(), cfg.progress_after_s,
                                cfg.progress_every_s, cfg.command.empty() ? std::function<void(double, unsigned, unsigned)>(progress) : nullptr,
                                cfg.command.empty() ? std::function<bool(const Child&)>() : aborted_by_switch))
    return fail(*f);
  tee.finish(1 * kSec);  // train-py: the scripts' last words before the summary
  // The PSes leave when the switch tells them their job is finished.
  const Time ps_deadline = std::min(deadline, monotonic_now() + 10 * kSec);
  for (;;) {
    bool all = true;
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Ps && !c.reaped) all = false;
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Ps && c.reaped && !exited_ok(c.status)) return fail(child_failure(c));
    if (all) break;
    if (monotonic_now() >= ps_deadline) return fail({1, "a PS did not exit after its job finished"});
    sup.wait(ps_deadline);
    if (sup.interrupted()) return fail(interrupted());
  }

  // 4. The switch's statistics, then stop it.
  nlohmann::json stats;
  try {
    stats = query_switch_stats(sw_ep, 5 * kSec, &switch_key, 0);
  } catch (const RuntimeError& e) {
    return fail({1, fmt::format("cannot read the switch's statistics: {}", e.what())});
  }
  kill(sw->pid, SIGTERM);
  const Time sw_deadline = monotonic_now() + 5 * kSec;
  while (!sw->reaped && monotonic_now() < sw_deadline) sup.wait(sw_deadline);
  if (!sw->reaped) return fail({1, fmt::format("the switch (pid {}) did not stop on SIGTERM", sw->pid), sw});
  if (!exited_ok(sw->status)) return fail(child_failure(*sw));

  // 5. Reports and summary.
  const double wall = to_ms(monotonic_now() - t_start) / 1000;
  nlohmann::json jobs = nlohmann::json::array();
  uint64_t mismatches = 0, workers_refused = 0;  // refused: malformed or foreign packets at a worker
  std::string per_job;
  for (unsigned j = 1; j <= cfg.jobs; ++j) per_job += (j > 1 ? "," : "") + std::to_string(cfg.workers_of(j));
  if (cfg.command.empty())
    out << fmt::format("ina run: {} ({} policy), {} job(s) x {} workers, {} allreduces of {} per job, payload {} values, "
                       "loss {}, duplicate {}, reorder {}\n",
                       cfg.scheme, stats.value("policy", "?"), cfg.jobs, per_job, cfg.iterations,
                       mib(cfg.size_bytes), cfg.payload, cfg.loss, cfg.duplicate, cfg.reorder);
  else
    out << fmt::format("ina train-py: {} ({} policy), {} workers of '{}' exited 0, payload {} values, loss {}, "
                       "duplicate {}, reorder {}\n",
                       cfg.scheme, stats.value("policy", "?"), per_job, fmt::join(cfg.command, " "), cfg.payload, cfg.loss,
                       cfg.duplicate, cfg.reorder);
  for (unsigned j = 1; j <= cfg.jobs && cfg.command.empty(); ++j) {
    nlohmann::json reports = nlohmann::json::array();
    double slowest = 0;
    uint64_t verified = 0, bad = 0;
    for (unsigned r = 0; r < cfg.workers_of(j); ++r) {
      const fs::path p = fs::path(cfg.work_dir) / fmt::format("job{}-rank{}.json", j, r);
      std::ifstream in(p);
      auto rep = nlohmann::json::parse(in, nullptr, false);
      if (rep.is_discarded()) return fail({1, fmt::format("worker rank {} of job {} left no readable report {}", r, j, p.string())});
      slowest = std::max(slowest, rep.at("allreduce_seconds").get<double>());
      verified += rep.at("verified").get<uint64_t>();
      bad += rep.at("mismatches").get<uint64_t>();
      if (const auto* t = rep.contains("stats") ? &rep["stats"]["transport"] : nullptr; t && t->is_object())
        workers_refused += t->value("malformed", uint64_t{0}) + t->value("foreign", uint64_t{0});
      reports.push_back(std::move(rep));
    }
    mismatches += bad;
    const double bytes = static_cast<double>(cfg.size_bytes) * cfg.iterations;
    const double goodput = slowest > 0 ? bytes / slowest : 0;
    out << fmt::format("job {}: {} values verified on {} workers, {}; goodput {:.1f} MB/s ({:.2f} Gbit/s; {:.3f} s in "
                       "allreduce, slowest worker)\n",
                       j, verified, cfg.workers_of(j), bad ? fmt::format("{} DIFFER", bad) : "all exact", goodput / 1e6,
                       goodput * 8 / 1e9, slowest);
    jobs.push_back({{"job", j}, {"goodput_bytes_per_s", goodput}, {"allreduce_seconds", slowest},
                    {"verified", verified}, {"mismatches", bad}, {"workers", reports}});
  }
  const auto& s = stats["switch"];
  const auto& e = stats["engine"];
  out << fmt::format("switch: {} aggregators; {} gradient packets in, {} tasks completed in the switch, {} packets to "
                     "the PS, {} collisions, preemptions {} won / {} lost, {} duplicates, {} overflows; {} aggregators "
                     "held after the jobs ended\n",
                     stats.value("aggregators", 0), s.value("data_in", 0), s.value("completed", 0), s.value("to_ps", 0),
                     s.value("collisions", 0), s.value("preempt_won", 0), s.value("preempt_lost", 0),
                     s.value("duplicates", 0), s.value("overflow", 0), stats.value("occupied", 0));
  out << fmt::format("switch datagrams: {} in, {} out, {} malformed, {} foreign ({} of them from outside the jobs), {} "
                     "ECN-marked; injected: {} lost, {} duplicated, {} reordered; wall time {:.2f} s\n",
                     e.value("rx_datagrams", 0), e.value("tx_datagrams", 0), e.value("rx_malformed", 0),
                     e.value("rx_foreign", 0), e.value("rx_unattributed", 0), e.value("ecn_marked", 0), e.value("fault_lost", 0),
                     e.value("fault_duplicated", 0), e.value("fault_reordered", 0), wall);
  std::vector<std::string> problems;
  if (mismatches) problems.push_back(fmt::format("{} values differed from the exact sum", mismatches));
  if (stats.value("occupied", 0) != 0) problems.push_back(fmt::format("{} aggregators leaked", stats.value("occupied", 0)));
  if (stats["jobs"].value("aborted", 0) != 0) problems.push_back("a job was aborted");
  if (stats["jobs"].value("finished", 0u) != cfg.jobs) problems.push_back("not every job finished at the switch");
  const nlohmann::json ps_stats = read_ps_stats();
  uint64_t ps_malformed = 0, ps_foreign = 0;
  for (const auto& p : ps_stats) {
    if (p.contains("missing")) problems.push_back(fmt::format("the PS of job {} left no statistics", p.value("job", 0u)));
    else {
      ps_malformed += p["ps"].value("malformed", uint64_t{0});
      ps_foreign += p["ps"].value("foreign", uint64_t{0});
    }
  }
  if (with_ps)
    out << fmt::format("PS: {} malformed and {} foreign packets over {} PSes\n", ps_malformed, ps_foreign, ps_stats.size());
  // Every process of this run is ours and honest (faults only drop, copy or
  // delay datagrams): a packet of a member refused anywhere is a protocol bug.
  // Datagrams from addresses outside the jobs are someone else's noise: counted
  // and reported, not held against the run (member_refused).
  uint64_t sw_refused = s.value("malformed", uint64_t{0});
  for (const char* k : {"foreign_data", "foreign_ack", "foreign_fetch", "foreign_forward"}) sw_refused += s.value(k, uint64_t{0});
  sw_refused += member_refused(e);
  if (sw_refused) problems.push_back(fmt::format("the switch refused {} packets from job members as malformed or foreign", sw_refused));
  if (const uint64_t noise = e.value("rx_unattributed", uint64_t{0})) out << noise_line(noise);
  if (workers_refused) problems.push_back(fmt::format("workers refused {} packets as malformed or foreign", workers_refused));
  if (ps_malformed + ps_foreign)
    problems.push_back(fmt::format("PSes refused {} packets as malformed and {} as foreign", ps_malformed, ps_foreign));
  if (!cfg.json_out.empty()) {
    nlohmann::json j = {{"ok", problems.empty()}, {"problems", problems}, {"wall_seconds", wall},
                        {"config", config_json()}, {"jobs", jobs}, {"switch", stats}, {"ps", ps_stats},
                        {"noise_datagrams", e.value("rx_unattributed", uint64_t{0})}};
    if (!problems.empty()) j["failure"] = {{"message", fmt::format("{}", fmt::join(problems, "; "))}, {"exit_status", mismatches ? 3 : 1}};
    write_json(j);
  }
  for (const auto& p : problems) std::cerr << me << ": FAILED: " << p << "\n";
  if (mismatches) return 3;
  return problems.empty() ? 0 : 1;
}

}  // namespace ina::rt
