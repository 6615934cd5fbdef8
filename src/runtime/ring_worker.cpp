#include "runtime/ring_worker.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/rng.hpp"
#include "host/ring.hpp"
#include "host/tensor_io.hpp"
#include "runtime/ring_layout.hpp"

namespace ina::rt {

namespace {

namespace fs = std::filesystem;

nlohmann::json ring_stats_json(const host::RingStats& s) {
  return {{"sent", s.sent}, {"retransmits", s.retransmits}, {"timeouts", s.timeouts}, {"fast_retransmits", s.fast_retransmits}, {"acks", s.acks},
          {"dup_acks", s.dup_acks}, {"received", s.received}, {"duplicates", s.duplicates}, {"early", s.early},
          {"late", s.late}, {"pulls_sent", s.pulls_sent}, {"pulls", s.pulls}, {"steps", s.steps},
          {"bytes_sent", s.bytes_sent}, {"malformed", s.malformed}, {"foreign", s.foreign}};
}

// The ranks whose barrier file `what`.R is missing.
std::vector<size_t> missing(const fs::path& dir, const char* what, size_t n) {
  std::vector<size_t> m;
  for (size_t r = 0; r < n; ++r)
    if (!fs::exists(dir / fmt::format("{}.{}", what, r))) m.push_back(r);
  return m;
}

void touch(const fs::path& p) {
  std::ofstream f(p);
  if (!f) throw RuntimeError(fmt::format("cannot create the barrier file {}", p.string()));
}

}  // namespace

int run_ring_worker(const RingWorkerConfig& cfg) {
  const RingLayout L = RingLayout::read(cfg.layout, true);
  const size_t n = L.n();
  if (cfg.rank >= n) throw RuntimeError(fmt::format("--rank {}: the layout {} has ranks 0..{}", cfg.rank, cfg.layout, n - 1));
  if (cfg.bytes < 4 || cfg.bytes % 4) throw RuntimeError(fmt::format("--size must be a positive multiple of 4 bytes, got {}", cfg.bytes));
  if (cfg.iterations < 1) throw RuntimeError("--iterations must be >= 1");
  if (cfg.barrier.empty()) throw RuntimeError("--barrier DIR is required (a directory every rank of the job shares)");
  cfg.faults.validate();
  const fs::path bar(cfg.barrier);
  if (!fs::is_directory(bar)) throw RuntimeError(fmt::format("--barrier {}: not a directory", cfg.barrier));
  if (fs::exists(bar / fmt::format("done.{}", cfg.rank)))
    throw RuntimeError(fmt::format("--barrier {}: already holds done.{} from another run; give a fresh directory", cfg.barrier, cfg.rank));
  const std::string who = fmt::format("ina ring-worker {} job {} rank {}", L.scheme, L.job, cfg.rank);
  const uint64_t elems = cfg.bytes / 4;
  const auto plan = L.plan(elems);

  EngineConfig ec;
  ec.mode = EngineMode::Router;  // one node; datagrams go to the address of their destination
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  ec.bind = L.workers[cfg.rank];
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  for (size_t r = 0; r < n; ++r)
    if (r != cfg.rank) eng.set_route(RingLayout::worker_id(r), L.workers[r]);
  for (size_t q = 0; q < L.racks.size(); ++q)
    if (L.serving_tor(q)) {
      eng.set_route(L.tor_id(q), *L.racks[q].sw);
      eng.add_relay(*L.racks[q].sw);  // a ToR forwards sums and broadcasts with their sender's id
    }

  const bool ina = L.scheme_info().collective == schemes::Collective::RingIna;
  host::RingConfig rc;
  rc.job = L.job;
  rc.rank = static_cast<uint16_t>(cfg.rank);
  for (size_t r = 0; r < n; ++r) rc.nodes.push_back(RingLayout::worker_id(r));
  rc.stages = plan[cfg.rank];
  rc.payload_values = L.payload;
  rc.region = L.region();
  rc.allgather_from_zero = ina;
  rc.min_rto = cfg.min_rto;
  if (cfg.window_kb > 0) rc.init_window = std::max(1.0, cfg.window_kb * 1000 / (4.0 * L.payload + 50));
  rc.seed = mix(cfg.seed, cfg.rank);
  host::RingEndpoint ep(std::move(rc));
  ep.set_id(RingLayout::worker_id(cfg.rank));
  auto tensor = std::make_shared<host::SyntheticTensor>(mix(cfg.seed, 0x7a11 + L.job), cfg.rank, static_cast<unsigned>(n));
  for (unsigned k = 0; k < cfg.iterations; ++k) ep.submit(tensor, elems);
  eng.add_node(ep);

  const Time deadline = monotonic_now() + static_cast<Time>(cfg.timeout_s * kSec);
  auto wait_for = [&](const char* what) {
    for (;;) {
      const auto m = missing(bar, what, n);
      if (m.empty()) return;
      if (monotonic_now() >= deadline)
        throw RuntimeError(fmt::format("{}: timed out after {} s waiting for {} of ranks {}", who, cfg.timeout_s, what,
                                       fmt::join(m, ", ")));
      eng.poll(2 * kMs);
    }
  };
  touch(bar / fmt::format("ready.{}", cfg.rank));
  wait_for("ready");
  eng.start();
  while (!ep.done()) {
    if (monotonic_now() >= deadline)
      throw RuntimeError(fmt::format("{}: timed out after {} s with {} of {} allreduces done; {}", who, cfg.timeout_s,
                                     ep.completed(), cfg.iterations, ep.describe()));
    eng.poll(10 * kMs);
  }
  const double seconds = to_ms(ep.op_end().back() - ep.op_start().front()) / 1000;
  touch(bar / fmt::format("done.{}", cfg.rank));
  wait_for("done");
  // Every rank is done: stale timers fire and are ignored; nothing may re-arm or stay in flight.
  const Time drain_until = std::min(deadline, monotonic_now() + 2 * kSec);
  while ((eng.pending_timers() || eng.packets_in_use()) && monotonic_now() < drain_until) eng.poll(5 * kMs);

  const uint64_t expected = elems * cfg.iterations;
  std::vector<std::string> leaks;
  if (eng.pending_timers()) leaks.push_back(fmt::format("{} timers still pending", eng.pending_timers()));
  if (eng.packets_in_use()) leaks.push_back(fmt::format("{} packets still held", eng.packets_in_use()));
  if (tensor->checked() != expected)
    leaks.push_back(fmt::format("{} of {} result values written", tensor->checked(), expected));
  nlohmann::json iters = nlohmann::json::array();
  for (size_t k = 0; k < ep.op_end().size(); ++k) iters.push_back(to_ms(ep.op_end()[k] - ep.op_start()[k]) / 1000);
  const auto& st = ep.stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"rank", cfg.rank}, {"workers", n},
                        {"bytes", cfg.bytes}, {"iterations", cfg.iterations}, {"verified", tensor->checked()},
                        {"expected", expected}, {"mismatches", tensor->mismatches()}, {"allreduce_seconds", seconds},
                        {"iteration_seconds", iters}, {"done", ep.done()}, {"steps_per_allreduce", host::ring_steps(plan[cfg.rank], static_cast<uint16_t>(cfg.rank))},
                        {"pending_timers", eng.pending_timers()}, {"packets_in_use", eng.packets_in_use()},
                        {"leaks", leaks},
                        {"stats", {{"ring", ring_stats_json(st)}, {"engine", eng.stats().to_json()},
                                   {"transport", {{"malformed", st.malformed}, {"foreign", st.foreign}}}}}};
  if (!cfg.report.empty()) {
    std::ofstream f(cfg.report);
    f << rep.dump(1) << "\n";
    if (!f) throw RuntimeError(fmt::format("{}: cannot write the report {}", who, cfg.report));
  }
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} allreduces of {} values in {:.3f} s, {} exact of {}, {} differ; {} retransmits",
                             ep.completed(), elems, seconds, tensor->checked() - tensor->mismatches(), expected,
                             tensor->mismatches(), st.retransmits).c_str());
  if (tensor->mismatches()) return 3;
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  return leaks.empty() ? 0 : 1;
}

}  // namespace ina::rt
