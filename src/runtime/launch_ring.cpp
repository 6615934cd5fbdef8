// `ina run` for a static layout (ring_layout.hpp): one job of `ina
// ring-worker`s on loopback — a ring scheme, with Rina's INA ToRs, or ATP over
// racks, with a ToR switch per INA rack and a PS above the root's. The launcher
// plans the layout with every socket already bound, starts the ToRs, then the
// PS and the ranks, waits for them, and checks every report and every ToR.
#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/counted.hpp"
#include "runtime/auth.hpp"
#include "runtime/control.hpp"
#include "runtime/launch_impl.hpp"
#include "runtime/net.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/switch_daemon.hpp"
#include "schemes/registry.hpp"

namespace ina::rt::launching {

namespace {

// The job's layout and what the launcher holds for it until the processes
// take it over: every socket is bound here and handed to its process, so the
// one layout every process reads holds real addresses before anyone starts.
struct RingPlan {
  RingLayout L;
  bool tree = false;                   // ATP over racks: every INA ToR aggregates, a PS above the root's
  UniqueFd ps_sock;                    // the PS's (tree)
  std::vector<UniqueFd> socks;         // rank r's
  std::vector<DataAndControl> tor_socks;  // switch q's: rack q's ToR (serving racks only), then the switch above racks
  std::string layout;                  // the layout file
  Key switch_key{};
  fs::path key_file;                   // the switch key, for the ToRs
};

// A started ToR switch and its address (for its statistics).
struct Tor {
  Child* child;
  Endpoint ep;
};

// The layout (racks, addresses, the datagram salt) written to the work
// directory, with the switch key for the ToRs.
RingPlan plan_ring(const Run& run) {
  const LaunchConfig& cfg = run.cfg;
  const fs::path dir(cfg.work_dir);
  RingPlan p;
  RingLayout& L = p.L;
  L.scheme = schemes::find(cfg.scheme).name;
  L.payload = cfg.payload;
  L.memory_bytes = cfg.memory_bytes;
  L.racks = split_racks(cfg.workers, cfg.racks, ina_rack_list(cfg));
  p.tree = L.tree();
  if (p.tree) {
    p.ps_sock = bind_udp(Endpoint::parse("127.0.0.1:0"), 8 << 20);
    L.ps = local_endpoint(p.ps_sock.get());
  }
  for (unsigned r = 0; r < cfg.workers; ++r) {
    p.socks.push_back(bind_udp(Endpoint::parse("127.0.0.1:0"), 4 << 20));
    L.workers.push_back(local_endpoint(p.socks.back().get()));
  }
  // Rina above the ToR (--rina-above): one INA switch above those racks.
  if (!cfg.rina_above.empty()) {
    RingAggregation a;
    for (unsigned q : parse_rack_list("--rina-above", cfg.rina_above)) a.racks.push_back(q);
    L.aggregation.push_back(std::move(a));
  }
  // Each switch's sockets too: a ToR forwards to the next rack's.
  p.tor_socks.resize(L.switch_count());
  for (size_t q = 0; q < L.switch_count(); ++q)
    if (L.serving_switch(q)) {
      p.tor_socks[q] = bind_data_and_control(Endpoint::parse("127.0.0.1:0"), 8 << 20);
      (q < L.racks.size() ? L.racks[q].sw : L.aggregation[q - L.racks.size()].sw) = local_endpoint(p.tor_socks[q].udp.get());
    }
  // Datagram tags: this run's salt in the layout; every process derives the key from it and the job's key.
  if (cfg.datagram_auth) L.datagram_salt = random_key();
  p.layout = (dir / "layout.json").string();
  L.write(p.layout);
  p.switch_key = random_key();
  p.key_file = dir / "switch.key";
  write_key_file(p.key_file.string(), p.switch_key);
  return p;
}

// One `ina switch` per serving rack, on the sockets the layout names (each
// inherits its own pair only; the launcher closes them once it has started).
// A ToR that reports another port than its socket's is a failure.
std::optional<Failure> start_tors(Run& run, RingPlan& p, std::vector<Tor>& tors) {
  const LaunchConfig& cfg = run.cfg;
  const RingLayout& L = p.L;
  for (size_t q = 0; q < L.switch_count(); ++q) {
    if (!L.serving_switch(q)) continue;
    Child* sw = nullptr;
    uint16_t port = 0;
    const int udp = p.tor_socks[q].udp.get(), tcp = p.tor_socks[q].tcp.get();
    fcntl(udp, F_SETFD, 0);  // inherited by this switch only: closed here right after
    fcntl(tcp, F_SETFD, 0);
    std::vector<std::string> sw_args{"switch", "--key-file", p.key_file.string(), "--udp-fd", std::to_string(udp), "--tcp-fd",
                                     std::to_string(tcp), "--policy", L.scheme, "--layout", p.layout, "--rack", std::to_string(q)};
    if (cfg.datagram_auth) sw_args.push_back("--datagram-auth");
    const std::string name = q < L.racks.size() ? fmt::format("switch of rack {}", q)
                                                 : fmt::format("switch above racks {}", fmt::join(L.aggregation[q - L.racks.size()].racks, ","));
    auto f = start_run_switch(run.sup, cfg, std::move(sw_args), name, static_cast<unsigned>(q), run.deadline, sw, port);
    p.tor_socks[q] = {};
    if (f) return f;
    const Endpoint addr = *L.switch_addr(q);
    if (port != addr.port())
      return Failure{1, fmt::format("the {} reports port {}, not the {} it was given", sw->name, port, addr.port()), sw};
    tors.push_back({sw, addr});
  }
  return std::nullopt;
}

// Where rank r leaves its report.
std::string rank_report(const Run& run, unsigned r) { return (fs::path(run.cfg.work_dir) / fmt::format("rank{}.json", r)).string(); }
std::string ps_report(const Run& run) { return (fs::path(run.cfg.work_dir) / "ps.json").string(); }

// What the PS and every rank are given besides the layout: the step barrier's
// directory, the job's key and their own deadline.
struct RankFiles {
  fs::path barrier;
  std::vector<std::string> key_args;  // --key-file (and --datagram-auth)
  double timeout = 0;                 // --timeout
};

// The step barrier's (empty) directory and, for tagged datagrams (every worker
// and the PS) or an injected failure (the control node's calls to the ToRs),
// the job's key.
RankFiles write_rank_files(const Run& run, const RingPlan& p) {
  const LaunchConfig& cfg = run.cfg;
  const fs::path dir(cfg.work_dir);
  RankFiles rf;
  rf.barrier = dir / "barrier";
  fs::remove_all(rf.barrier);
  fs::create_directories(rf.barrier);
  // A rank that cannot finish says where it stopped before `ina run` gives up on it.
  rf.timeout = std::max(0.5, cfg.timeout_s - std::min(1.0, cfg.timeout_s / 4));
  const fs::path job_key_file = dir / "job.key";
  if (cfg.fail_rank >= 0 || cfg.datagram_auth) {
    write_key_file(job_key_file.string(), job_key(p.switch_key, p.L.job));
    rf.key_args = {"--key-file", job_key_file.string()};
  }
  if (cfg.datagram_auth) rf.key_args.push_back("--datagram-auth");
  return rf;
}

// ATP over racks: the PS, an `ina ring-worker --ps` on its bound socket,
// supervised as the job's last worker.
void start_ring_ps(Run& run, RingPlan& p, const RankFiles& rf) {
  const LaunchConfig& cfg = run.cfg;
  const int fd = p.ps_sock.get();
  std::vector<std::string> a{"ring-worker", "--layout", p.layout, "--ps", "--size", std::to_string(cfg.size_bytes),
                             "--barrier", rf.barrier.string(), "--udp-fd", std::to_string(fd), "--report", ps_report(run),
                             "--timeout", fmt::format("{}", rf.timeout), "--fault-seed",
                             std::to_string(cfg.seed * 7919 + 99)};
  a.insert(a.end(), rf.key_args.begin(), rf.key_args.end());
  for (auto& f : fault_args(cfg)) a.push_back(f);
  if (!cfg.verbose) a.push_back("--quiet");
  run.sup.spawn(Kind::Worker, "PS", 1, cfg.workers, cfg.binary, a, fd);
  p.ps_sock.reset();
}

// Every rank, an `ina ring-worker` on its bound socket; with an injected
// failure every rank watches heartbeats and the failing one stops in its op.
void start_ranks(Run& run, RingPlan& p, const RankFiles& rf) {
  const LaunchConfig& cfg = run.cfg;
  for (unsigned r = 0; r < cfg.workers; ++r) {
    const int fd = p.socks[r].get();
    std::vector<std::string> a{"ring-worker", "--layout", p.layout, "--rank", std::to_string(r), "--size",
                               std::to_string(cfg.size_bytes), "--iterations", std::to_string(cfg.iterations), "--seed",
                               std::to_string(cfg.seed), "--barrier", rf.barrier.string(), "--udp-fd", std::to_string(fd),
                               "--report", rank_report(run, r), "--timeout", fmt::format("{}", rf.timeout),
                               "--fault-seed", std::to_string(cfg.seed * 7919 + 100 + r)};
    a.insert(a.end(), rf.key_args.begin(), rf.key_args.end());
    if (cfg.fail_rank >= 0) {
      a.insert(a.end(), {"--fail-detect-ms", fmt::format("{}", cfg.fail_detect_ms)});
      if (static_cast<int>(r) == cfg.fail_rank) a.insert(a.end(), {"--crash-at-op", std::to_string(cfg.fail_at_op)});
    }
    for (auto& f : fault_args(cfg)) a.push_back(f);
    if (!cfg.verbose) a.push_back("--quiet");
    run.sup.spawn(Kind::Worker, fmt::format("worker rank {}", r), 1, r, cfg.binary, a, fd);
    p.socks[r].reset();
  }
}

// Until every rank (and the PS) has exited 0, saying how many finished while
// they run. On a failure, what each ToR saw (drops and refusals by reason)
// goes to stderr for the diagnosis before the failure is returned.
std::optional<Failure> supervise_ranks(Run& run, const RingPlan& p, const std::vector<Tor>& tors) {
  const LaunchConfig& cfg = run.cfg;
  auto progress = [](double secs, unsigned done, unsigned all) {
    std::cerr << fmt::format("ina run: {:.0f} s: {} of {} ranks finished\n", secs, done, all);
  };
  WorkerWait how;
  how.progress_after_s = cfg.progress_after_s;
  how.progress_every_s = cfg.progress_every_s;
  how.progress = progress;
  auto f = wait_for_workers(run.sup, run.deadline, cfg.timeout_s, how);
  if (f) {
    for (const Tor& t : tors) {
      try {
        const auto st = query_switch_stats(t.ep, 1 * kSec, &p.switch_key, 0);
        std::fprintf(stderr, "ina run: the %s at failure: %s\n", t.child->name.c_str(), st.dump().c_str());
      } catch (const RuntimeError&) {
      }
    }
  }
  return f;
}

// The ToRs' statistics (read while they run: every aggregator must be free
// again), then stop them.
std::optional<Failure> stop_tors(Run& run, const RingPlan& p, const std::vector<Tor>& tors, nlohmann::json& sw_stats) {
  sw_stats = nlohmann::json::array();
  for (const Tor& t : tors) {
    try {
      sw_stats.push_back(query_switch_stats(t.ep, 5 * kSec, &p.switch_key, 0));
    } catch (const RuntimeError& e) {
      return Failure{1, fmt::format("cannot read the statistics of the {}: {}", t.child->name, e.what()), t.child};
    }
  }
  std::vector<Child*> children;
  for (const Tor& t : tors) children.push_back(t.child);
  return stop_switches(run.sup, children);
}

// What the ranks' and the PS's reports add up to, and the problems they show.
struct RingResults {
  double wall = 0;  // seconds from the start to the ToRs' stop
  nlohmann::json reports = nlohmann::json::array();
  double slowest = 0;
  uint64_t verified = 0, mismatches = 0, retransmits = 0, refused = 0, steps = 0;
  uint64_t noise = 0;     // datagrams from outside the job, refused by a worker's or ToR's engine
  uint64_t expected = 0;  // values the ranks that finished had to check (after a failure: from the restart op on)
  unsigned survivors = 0;
  nlohmann::json failover;  // the survivors' common membership after an injected failure
  std::vector<std::string> problems;
};

// Every rank's report (a crashed rank only if it is the injected one; the
// survivors in epoch 1 with one membership) and the PS's: a missing report is
// a failure; leaks, wrong counts and refused member packets are problems.
std::optional<Failure> collect_ring_reports(const Run& run, const RingPlan& p, RingResults& res) {
  const LaunchConfig& cfg = run.cfg;
  const bool failover = cfg.fail_rank >= 0;
  auto& problems = res.problems;
  res.wall = run.wall_seconds();
  for (unsigned r = 0; r < cfg.workers; ++r) {
    auto rep = read_json_report(rank_report(run, r));
    if (rep.is_discarded()) return Failure{1, fmt::format("worker rank {} left no readable report {}", r, rank_report(run, r))};
    if (rep.value("crashed", false)) {
      if (static_cast<int>(r) != cfg.fail_rank) problems.push_back(fmt::format("worker rank {} crashed, uninjected", r));
      res.reports.push_back(std::move(rep));
      continue;
    }
    ++res.survivors;
    res.expected += rep.value("expected", uint64_t{0});
    if (rep.contains("failover")) {
      const auto& f = rep["failover"];
      if (failover && f.value("epoch", 0) != 1)
        problems.push_back(fmt::format("worker rank {} ended in epoch {}, not 1", r, f.value("epoch", 0)));
      if (res.failover.is_null()) res.failover = {{"failed", f["failed"]}, {"restart_op", f["restart_op"]}, {"epoch", f["epoch"]},
                                                  {"survivors", f["survivors"]}, {"control_node", f["control_node"]}};
      else if (f["restart_op"] != res.failover["restart_op"] || f["survivors"] != res.failover["survivors"])
        problems.push_back(fmt::format("worker rank {} has another membership than the other survivors", r));
    }
    res.slowest = std::max(res.slowest, rep.at("allreduce_seconds").get<double>());
    res.verified += rep.at("verified").get<uint64_t>() - rep.at("mismatches").get<uint64_t>();
    res.mismatches += rep.at("mismatches").get<uint64_t>();
    res.retransmits += rep["stats"]["ring"].value("retransmits", uint64_t{0});
    res.refused += rep["stats"]["transport"].value("malformed", uint64_t{0}) +
                   rep["stats"]["transport"].value("foreign", uint64_t{0}) + member_refused(rep["stats"]["engine"]);
    res.noise += rep["stats"]["engine"].value("rx_unattributed", uint64_t{0});
    res.steps = std::max<uint64_t>(res.steps, rep.value("steps_per_allreduce", uint64_t{0}));
    for (const auto& l : rep["leaks"]) problems.push_back(fmt::format("worker rank {}: {}", r, l.get<std::string>()));
    res.reports.push_back(std::move(rep));
  }
  if (p.tree) {
    auto rep = read_json_report(ps_report(run));
    if (rep.is_discarded()) return Failure{1, fmt::format("the PS left no readable report {}", ps_report(run))};
    for (const auto& l : rep["leaks"]) problems.push_back(fmt::format("PS: {}", l.get<std::string>()));
    res.reports.push_back(std::move(rep));
  }
  if (failover && res.survivors != cfg.workers - 1)
    problems.push_back(fmt::format("{} of {} workers finished; the injected failure should leave {}", res.survivors, cfg.workers,
                                   cfg.workers - 1));
  if (!failover && res.expected != cfg.size_bytes / 4 * cfg.iterations * cfg.workers)
    problems.push_back(fmt::format("the workers expected {} values, not {}", res.expected,
                                   cfg.size_bytes / 4 * cfg.iterations * cfg.workers));
  return std::nullopt;
}

// The summary on `out` (layout, failure and re-plan, the job, each ToR), the
// ToRs' problems (aggregators held, member packets refused), the JSON summary;
// returns the exit status.
int report_ring(Run& run, const RingPlan& p, const std::vector<Tor>& tors, const nlohmann::json& sw_stats, RingResults& res) {
  const LaunchConfig& cfg = run.cfg;
  std::ostream& out = run.out;
  const RingLayout& L = p.L;
  const bool tree = p.tree, failover = cfg.fail_rank >= 0;
  auto& problems = res.problems;
  const double goodput = res.slowest > 0 ? static_cast<double>(cfg.size_bytes) * cfg.iterations / res.slowest : 0;
  std::string rack_text;
  for (size_t q = 0; q < L.racks.size(); ++q)
    rack_text += fmt::format("{}rack {}: ranks {}..{}{}", q ? ", " : "", q, L.racks[q].ranks.front(), L.racks[q].ranks.back(),
                             L.serving_tor(q) ? fmt::format(" + INA switch {}", L.racks[q].sw->str()) : "");
  for (const auto& a : L.aggregation)
    rack_text += fmt::format("; INA switch {} above racks {}", a.sw->str(), fmt::join(a.racks, ","));
  out << fmt::format("ina run: {}, {} workers in {} ({}), {} of {}, payload {} values, loss {}, "
                     "duplicate {}, reorder {}\n",
                     L.scheme, cfg.workers, counted(L.racks.size(), "rack"), rack_text,
                     counted(cfg.iterations, "allreduce"), mib(cfg.size_bytes), cfg.payload,
                     cfg.loss, cfg.duplicate, cfg.reorder);
  if (failover)
    out << fmt::format("failure: rank {} stopped in op {}; control node rank {} re-planned epoch {} over {} survivors, "
                       "restarting at op {}\n",
                       cfg.fail_rank, cfg.fail_at_op, res.failover.value("control_node", -1), res.failover.value("epoch", 0),
                       res.survivors, res.failover.value("restart_op", -1));
  out << fmt::format("job 1: {} of {} values exact on {}{}; goodput {:.1f} MB/s ({:.2f} Gbit/s; {:.3f} s in "
                     "allreduce, slowest worker); {}{}\n",
                     res.verified, res.expected, counted(res.survivors, "worker"),
                     res.mismatches ? fmt::format(", {} DIFFER", res.mismatches) : "", goodput / 1e6, goodput * 8 / 1e9,
                     res.slowest, tree ? std::string() : counted(res.steps, "step") + " per allreduce, ",
                     counted(res.retransmits, "retransmission"));
  for (size_t k = 0; k < tors.size(); ++k) {
    const auto& st = sw_stats[k];
    const auto& s = st["switch"];
    const auto& e = st["engine"];
    const std::string& name = tors[k].child->name;
    out << fmt::format("{}: {} in, {} completed, {}, {} answered; {} in, {} out; injected {} lost, {} "
                       "duplicated, {} reordered; {} held after the job\n",
                       name, counted(s.value("data_in", 0), tree ? "gradient packet" : "ring packet"),
                       counted(s.value("completed", 0), "sum"), counted(s.value("duplicates", 0), "duplicate"),
                       counted(s.value("stale", 0), "stale resend"), counted(e.value("rx_datagrams", 0), "datagram"),
                       e.value("tx_datagrams", 0), e.value("fault_lost", 0), e.value("fault_duplicated", 0),
                       e.value("fault_reordered", 0), counted(st.value("occupied", 0), "aggregator"));
    // ATP's pool (a tree) may keep an aggregator a late copy reserved after its
    // task's result passed, when duplication or reordering is injected (as ATP
    // on a star and in the simulator, tests/cluster_fixture.hpp); Rina's
    // regions never may.
    const bool late_copies = cfg.duplicate > 0 || cfg.reorder > 0;
    if (st.value("occupied", 0) != 0 && !(tree && late_copies))
      problems.push_back(fmt::format("the {} holds {} aggregators after the job", name, st.value("occupied", 0)));
    uint64_t sw_refused = s.value("malformed", uint64_t{0}) + member_refused(e);
    res.noise += e.value("rx_unattributed", uint64_t{0});
    for (const char* f : {"foreign_data", "foreign_ack", "foreign_forward"}) sw_refused += s.value(f, uint64_t{0});
    if (!tree) sw_refused += s.value("collisions", uint64_t{0});  // ATP's collisions go to the PS by design
    if (sw_refused) problems.push_back(fmt::format("the {} refused {} packets (malformed, foreign or colliding)", name, sw_refused));
    if (const uint64_t bad = e.value("rx_bad_tag", uint64_t{0}))
      problems.push_back(fmt::format("the {} dropped {} datagrams from job members without their job's tag", name, bad));
  }
  if (res.mismatches) problems.push_back(fmt::format("{} values differed from the exact sum", res.mismatches));
  if (res.verified + res.mismatches != res.expected)
    problems.push_back(fmt::format("{} of {} values were checked", res.verified + res.mismatches, res.expected));
  if (res.refused) problems.push_back(fmt::format("workers refused {} packets as malformed or foreign", res.refused));
  if (res.noise) out << noise_line(res.noise);
  out << fmt::format("wall time {:.2f} s\n", res.wall);
  nlohmann::json j = {{"ok", problems.empty()}, {"problems", problems}, {"wall_seconds", res.wall}, {"noise_datagrams", res.noise},
                      {"config", {{"scheme", L.scheme}, {"workers", cfg.workers}, {"racks", cfg.racks}, {"ina_racks", cfg.ina_racks},
                                  {"rina_above", cfg.rina_above}, {"size_bytes", cfg.size_bytes}, {"iterations", cfg.iterations}, {"payload", cfg.payload},
                                  {"memory_bytes", cfg.memory_bytes}, {"loss", cfg.loss}, {"duplicate", cfg.duplicate},
                                  {"reorder", cfg.reorder}, {"seed", cfg.seed}, {"fail_rank", cfg.fail_rank},
                                  {"fail_at_op", cfg.fail_at_op}, {"fail_detect_ms", cfg.fail_detect_ms}}},
                      {"layout", L.to_json()},
                      {"jobs", {{{"job", 1}, {"goodput_bytes_per_s", goodput}, {"allreduce_seconds", res.slowest},
                                 {"verified", res.verified}, {"mismatches", res.mismatches}, {"steps_per_allreduce", res.steps},
                                 {"failover", res.failover}, {"workers", res.reports}}}},
                      {"switches", sw_stats}};
  if (!problems.empty())
    j["failure"] = {{"message", fmt::format("{}", fmt::join(problems, "; "))}, {"exit_status", res.mismatches ? 3 : 1}};
  run.write_json(j);
  for (const auto& pr : problems) std::cerr << "ina run: FAILED: " << pr << "\n";
  if (res.mismatches) return 3;
  return problems.empty() ? 0 : 1;
}

}  // namespace

int launch_ring(Run& run) {
  RingPlan p = plan_ring(run);
  std::vector<Tor> tors;
  if (auto f = start_tors(run, p, tors)) return run.fail(*f);
  const RankFiles rf = write_rank_files(run, p);
  if (p.tree) start_ring_ps(run, p, rf);
  start_ranks(run, p, rf);
  if (auto f = supervise_ranks(run, p, tors)) return run.fail(*f);
  nlohmann::json sw_stats;
  if (auto f = stop_tors(run, p, tors, sw_stats)) return run.fail(*f);
  RingResults res;
  if (auto f = collect_ring_reports(run, p, res)) return run.fail(*f);
  return report_ring(run, p, tors, sw_stats, res);
}

}  // namespace ina::rt::launching
