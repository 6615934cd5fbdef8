#include "runtime/ring_worker.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/rng.hpp"
#include "host/ring.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
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

namespace {

// What the common flow below needs of a rank's node (a ring endpoint, a tree worker or the tree's PS).
struct Rank {
  std::string who;
  std::vector<std::string> wait_also;           // further ready files to wait for before starting (the PS's)
  std::function<bool()> done;                   // its part is done (the PS: never: it serves until every rank is)
  std::function<std::string()> describe;        // where it stands (a timeout)
  std::function<void()> started = [] {};        // right after the engine started
};

// The barriers, the run and the drain (ring_worker.hpp). Returns the
// leaks found after every rank is done (timers, packets held).
std::vector<std::string> drive(const RingWorkerConfig& cfg, const RingLayout& L, UdpEngine& eng, const Rank& rk,
                               const std::string& self_name) {
  const fs::path bar(cfg.barrier);
  const size_t n = L.n();
  const Time deadline = monotonic_now() + static_cast<Time>(cfg.timeout_s * kSec);
  auto wait_for = [&](const char* what, const std::vector<std::string>& also) {
    for (;;) {
      auto m = missing(bar, what, n);
      std::vector<std::string> names;
      for (size_t r : m) names.push_back(std::to_string(r));
      for (const auto& a : also)
        if (!fs::exists(bar / fmt::format("{}.{}", what, a))) names.push_back(a);
      if (names.empty()) return;
      if (monotonic_now() >= deadline)
        throw RuntimeError(fmt::format("{}: timed out after {} s waiting for {} of {}", rk.who, cfg.timeout_s, what,
                                       fmt::join(names, ", ")));
      eng.poll(2 * kMs);
    }
  };
  touch(bar / fmt::format("ready.{}", self_name));
  wait_for("ready", rk.wait_also);
  eng.start();
  rk.started();
  while (!rk.done()) {
    if (monotonic_now() >= deadline)
      throw RuntimeError(fmt::format("{}: timed out after {} s; {}", rk.who, cfg.timeout_s, rk.describe()));
    eng.poll(10 * kMs);
    if (self_name == "ps" && missing(bar, "done", n).empty()) break;  // every rank is done: the PS is no longer needed
  }
  if (self_name != "ps") touch(bar / fmt::format("done.{}", self_name));
  wait_for("done", {});
  // Every rank is done: stale timers fire and are ignored; nothing may re-arm or stay in flight.
  const Time drain_until = std::min(deadline, monotonic_now() + 2 * kSec);
  while ((eng.pending_timers() || eng.packets_in_use()) && monotonic_now() < drain_until) eng.poll(5 * kMs);
  std::vector<std::string> leaks;
  if (eng.pending_timers()) leaks.push_back(fmt::format("{} timers still pending", eng.pending_timers()));
  if (eng.packets_in_use()) leaks.push_back(fmt::format("{} packets still held", eng.packets_in_use()));
  return leaks;
}

void write_report(const RingWorkerConfig& cfg, const std::string& who, const nlohmann::json& rep) {
  if (cfg.report.empty()) return;
  std::ofstream f(cfg.report);
  f << rep.dump(1) << "\n";
  if (!f) throw RuntimeError(fmt::format("{}: cannot write the report {}", who, cfg.report));
}

nlohmann::json worker_stats_json(const host::WorkerStats& s) {
  return {{"sent", s.sent}, {"retransmits", s.retransmits}, {"reminders", s.reminders}, {"timeouts", s.timeouts},
          {"fast_retransmits", s.fast_retransmits}, {"acks", s.acks}, {"dup_acks", s.dup_acks},
          {"grads_to_ps", s.grads_to_ps}, {"results_to_ps", s.results_to_ps}, {"malformed", s.malformed},
          {"foreign", s.foreign}};
}

// ATP over racks: one worker (host::WorkerNode, the simulator's) whose
// datagrams all go to its rack's ToR.
int run_tree_worker(const RingWorkerConfig& cfg, const RingLayout& L) {
  const size_t n = L.n();
  const std::string who = fmt::format("ina ring-worker {} job {} rank {}", L.scheme, L.job, cfg.rank);
  const uint64_t elems = cfg.bytes / 4;
  const size_t rack = L.rack_of(cfg.rank);
  EngineConfig ec;
  ec.mode = EngineMode::Host;
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  ec.bind = L.workers[cfg.rank];
  ec.gateway = *L.racks[rack].sw;
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  host::WorkerConfig w;
  host::profile("runtime").apply(w);
  w.job = L.job;
  w.rank = static_cast<uint8_t>(cfg.rank);
  w.nworkers = static_cast<uint8_t>(n);
  w.self = RingLayout::worker_id(cfg.rank);
  w.aggregator = L.tor_id(rack);
  w.ps = L.ps_id();
  for (size_t q = 0; q < L.racks.size(); ++q) w.switches.push_back(L.tor_id(q));
  w.payload_values = L.payload;
  w.min_rto = std::max(w.min_rto, cfg.min_rto);
  if (cfg.window_kb > 0) w.init_window = std::max(1.0, cfg.window_kb * 1000 / (4.0 * L.payload + 50));
  host::WorkerNode node(w);
  node.set_id(w.self);
  auto tensor = std::make_shared<host::SyntheticTensor>(mix(cfg.seed, 0x7a11 + L.job), cfg.rank, static_cast<unsigned>(n));
  std::vector<Time> start, end;
  start.push_back(0);
  node.submit(tensor, elems);
  node.set_on_complete([&](Time now, Effects& fx) {
    while (end.size() < node.completed()) end.push_back(now);
    if (node.completed() < cfg.iterations && !node.transport().busy()) {
      start.push_back(now);
      node.submit(tensor, elems);
      node.transport().pump(now, fx);
    }
  });
  eng.add_node(node);
  Rank rk{who, {"ps"}, [&] { return node.completed() >= cfg.iterations; },
          [&] { return fmt::format("{} of {} allreduces done", node.completed(), cfg.iterations); },
          [&] { start.front() = eng.now(); }};
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, std::to_string(cfg.rank));
  const uint64_t expected = elems * cfg.iterations;
  if (tensor->checked() != expected) leaks.push_back(fmt::format("{} of {} result values written", tensor->checked(), expected));
  nlohmann::json iters = nlohmann::json::array();
  for (size_t k = 0; k < end.size(); ++k) iters.push_back(to_ms(end[k] - start[k]) / 1000);
  const double seconds = end.empty() ? 0 : to_ms(end.back() - start.front()) / 1000;
  const auto& st = node.transport().stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"rank", cfg.rank}, {"workers", n},
                        {"bytes", cfg.bytes}, {"iterations", cfg.iterations}, {"verified", tensor->checked()},
                        {"expected", expected}, {"mismatches", tensor->mismatches()}, {"allreduce_seconds", seconds},
                        {"iteration_seconds", iters}, {"done", node.completed() >= cfg.iterations},
                        {"pending_timers", eng.pending_timers()}, {"packets_in_use", eng.packets_in_use()},
                        {"leaks", leaks},
                        {"stats", {{"ring", {{"retransmits", st.retransmits}}}, {"worker", worker_stats_json(st)},
                                   {"engine", eng.stats().to_json()},
                                   {"transport", {{"malformed", st.malformed}, {"foreign", st.foreign}}}}}};
  write_report(cfg, who, rep);
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} allreduces of {} values in {:.3f} s, {} exact of {}, {} differ; {} retransmits",
                             node.completed(), elems, seconds, tensor->checked() - tensor->mismatches(), expected,
                             tensor->mismatches(), st.retransmits).c_str());
  if (tensor->mismatches()) return 3;
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  return leaks.empty() ? 0 : 1;
}

// ATP over racks: the PS (host::ParameterServer), behind the root ToR.
int run_tree_ps(const RingWorkerConfig& cfg, const RingLayout& L) {
  const std::string who = fmt::format("ina ring-worker {} job {} PS", L.scheme, L.job);
  EngineConfig ec;
  ec.mode = EngineMode::Host;
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  ec.bind = *L.ps;
  ec.gateway = *L.racks[0].sw;
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  host::PsConfig pc;
  host::profile("runtime").apply(pc);
  pc.job = L.job;
  for (size_t r = 0; r < L.n(); ++r) pc.workers.push_back(RingLayout::worker_id(r));
  pc.sw = kNoNode;
  for (size_t q = 0; q < L.racks.size(); ++q) pc.more_switches.push_back(L.tor_id(q));  // the reminder fetches from every ToR
  pc.payload_values = L.payload;
  // Every completion goes down the tree: a child ToR frees a task's
  // aggregator only when the result passes it as its parent's (a unicast from
  // the PS to one waiting worker is only forwarded there).
  pc.targeted_known_results = false;
  host::ParameterServer ps(pc);
  ps.set_id(L.ps_id());
  eng.add_node(ps);
  Rank rk{who, {}, [] { return false; }, [&] { return fmt::format("{} tasks open", ps.entries()); }};
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, "ps");
  // Every rank is done and checked every value, so an entry still open is a
  // late copy's (a duplicated or held-back gradient that came after its
  // task's result), with its reminder timer. With duplication or reordering
  // injected that is expected, as in the simulator (tests/cluster_fixture.hpp);
  // without, it is a leak.
  std::vector<std::string> late;
  if (ps.entries()) {
    const bool late_copies = cfg.faults.duplicate > 0 || cfg.faults.reorder > 0;
    (late_copies ? late : leaks).push_back(fmt::format("{} PS entries still open", ps.entries()));
    if (late_copies) {
      for (auto& l : leaks) late.push_back(l);  // the open entries' timers and packets
      leaks.clear();
    }
  }
  const auto& st = ps.stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"role", "ps"}, {"leaks", leaks}, {"left_by_late_copies", late},
                        {"entries", ps.entries()},
                        {"stats", {{"ps", {{"data_in", st.data_in}, {"completions", st.completions},
                                           {"duplicates", st.duplicates}, {"timeout_reminders", st.timeout_reminders},
                                           {"worker_reminders", st.worker_reminders}, {"fetches", st.fetches},
                                           {"malformed", st.malformed}, {"foreign", st.foreign}}},
                                   {"engine", eng.stats().to_json()}}}};
  if (st.malformed || st.foreign) leaks.push_back(fmt::format("refused {} malformed and {} foreign packets", st.malformed, st.foreign));
  rep["leaks"] = leaks;
  write_report(cfg, who, rep);
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} tasks completed at the PS, {} data packets in", st.completions, st.data_in).c_str());
  return leaks.empty() ? 0 : 1;
}

}  // namespace

int run_ring_worker(const RingWorkerConfig& cfg) {
  const RingLayout L = RingLayout::read(cfg.layout, true);
  const size_t n = L.n();
  if (cfg.ps && !L.tree())
    throw RuntimeError(fmt::format("--ps: the layout {} runs {}, which has no PS", cfg.layout, L.scheme));
  if (!cfg.ps && cfg.rank >= n)
    throw RuntimeError(fmt::format("--rank {}: the layout {} has ranks 0..{}", cfg.rank, cfg.layout, n - 1));
  if (cfg.bytes < 4 || cfg.bytes % 4) throw RuntimeError(fmt::format("--size must be a positive multiple of 4 bytes, got {}", cfg.bytes));
  if (cfg.iterations < 1) throw RuntimeError("--iterations must be >= 1");
  if (cfg.barrier.empty()) throw RuntimeError("--barrier DIR is required (a directory every rank of the job shares)");
  cfg.faults.validate();
  const fs::path bar(cfg.barrier);
  if (!fs::is_directory(bar)) throw RuntimeError(fmt::format("--barrier {}: not a directory", cfg.barrier));
  const std::string mine = cfg.ps ? "ready.ps" : fmt::format("done.{}", cfg.rank);
  if (fs::exists(bar / mine))
    throw RuntimeError(fmt::format("--barrier {}: already holds {} from another run; give a fresh directory", cfg.barrier, mine));
  if (cfg.ps) return run_tree_ps(cfg, L);
  if (L.tree()) return run_tree_worker(cfg, L);
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

  double seconds = 0;
  Rank rk{who, {}, [&] { return ep.done(); },
          [&] { return fmt::format("{} of {} allreduces done; {}", ep.completed(), cfg.iterations, ep.describe()); }};
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, std::to_string(cfg.rank));
  if (!ep.op_end().empty()) seconds = to_ms(ep.op_end().back() - ep.op_start().front()) / 1000;
  const uint64_t expected = elems * cfg.iterations;
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
  write_report(cfg, who, rep);
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
