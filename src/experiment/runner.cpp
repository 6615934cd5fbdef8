#include "experiment/runner.hpp"
#include "sim/ranks.hpp"

#include "core/config_error.hpp"
#include "core/resources.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "experiment/collective.hpp"
#include "experiment/network_point.hpp"
#include "experiment/sparse_point.hpp"
#include "core/time.hpp"
#include "host/congestion_window.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "schemes/registry.hpp"
#include "sim/engine.hpp"
#include "cluster/cluster.hpp"
#include "workload/model.hpp"
#include "workload/training_worker.hpp"

namespace ina::exp {
namespace {

double combine(double a, double b) { return 1 - (1 - a) * (1 - b); }

// A point on a multi-switch topology: one exp::run_collective.
RunOutput run_network_point(const Settings& s, const std::string& scheme, uint64_t seed, sim::Ranks* ranks) {
  NetworkRun run = network_run(s, schemes::find(scheme, schemes::Engine::SimNetwork), seed, "run");
  run.settings.ranks = ranks;
  const CollectiveResult r = run_collective(run.graph, scheme, run.settings);
  RunOutput out;
  auto& m = out.metrics;
  m["throughput_gbps"] = r.throughput_gbps;
  m["sync_ms"] = r.sync_ms;
  m["iteration_ms"] = r.iteration_ms;
  m["bytes_per_worker"] = r.bytes_per_worker;
  m["steps"] = static_cast<double>(r.steps);
  m["retransmits"] = static_cast<double>(r.retransmits);
  m["timeouts"] = static_cast<double>(r.timeouts);
  m["fast_retransmits"] = static_cast<double>(r.fast_retransmits);
  m["verify_errors"] = static_cast<double>(r.verify_errors);
  m["workers"] = static_cast<double>(run.settings.workers_per_job.at(0));
  m["ina_switches"] = static_cast<double>(run.ina.size());
  m["gradient_mb"] = run.settings.gradient_mb;
  m["events"] = static_cast<double>(r.events);
  m["hops"] = static_cast<double>(r.hops);
  m["ecn_marks_host"] = static_cast<double>(r.ecn_marks_host);
  m["ecn_marks_switch"] = static_cast<double>(r.ecn_marks_switch);
  m["queue_drops"] = static_cast<double>(r.queue_drops);
  m["refused_packets"] = static_cast<double>(r.refused);
  out.marked_links = r.marked_links;
  out.busiest_links = r.busiest_links;
  // The busiest link's serialization time over the run's synchronization
  // time: near 1, that link bounds the collective; well below, something
  // else does (a dependency between steps, a window, a pace).
  if (!r.busiest_links.empty() && r.sync_ms > 0)
    m["busiest_link_load"] = r.busiest_links.front().busy_ms / (r.sync_ms * run.settings.iterations);
  // Training throughput in the Rina paper's units (§VI-A3: images, or BERT's
  // question-answer pairs, per second over all workers): the model's batch
  // per worker per iteration. Only for a model at full size: a scaled
  // gradient keeps the full compute time, so its iteration is not the model's.
  if (const workload::DnnModel* dnn = workload::find_dnn_model(s.model);
      dnn && s.gradient_mb == 0 && s.gradient_scale == 1 && r.iteration_ms > 0)
    m["samples_per_s"] = dnn->batch * static_cast<double>(run.settings.workers_per_job.at(0)) / (r.iteration_ms / 1000);
  // Several jobs (ring collectives) or Rina's shared pool: per job, and the ToRs' pool activity.
  if (run.settings.workers_per_job.size() > 1 || run.settings.ring_memory != "region") {
    for (size_t j = 0; j < r.job_throughput_gbps.size(); ++j) {
      m[fmt::format("job{}_throughput_gbps", j)] = r.job_throughput_gbps[j];
      m[fmt::format("job{}_sync_ms", j)] = r.job_sync_ms[j];
    }
    m["collisions"] = static_cast<double>(r.collisions);
    m["evictions"] = static_cast<double>(r.evictions);
    m["preempt_lost"] = static_cast<double>(r.preempt_lost);
    m["bypassed"] = static_cast<double>(r.bypassed);
    m["flushed"] = static_cast<double>(r.flushed);
  }
  out.ok = r.ok;
  out.problems = r.problems;
  out.digest = r.digest;
  out.windows = r.windows;
  out.helper_cpu_s = r.helper_cpu_s;
  out.partitions = r.partitions;
  return out;
}

}  // namespace

sim::LinkParams star_link(const Settings& s) {
  sim::LinkParams l;
  l.gbps = s.link_gbps;
  l.delay = from_us(s.rtt_us / 4);
  l.queue_bytes = static_cast<uint64_t>(s.queue_kb * 1000);
  l.ecn_bytes = static_cast<uint64_t>(s.ecn_kb * 1000);
  l.loss = s.loss;
  l.dup = s.dup;
  l.reorder = s.reorder;
  l.reorder_delay = from_us(s.reorder_delay_us);
  return l;
}

Settings packets_for(const Settings& s, const schemes::Scheme& scheme) {
  if (s.packets != "per-scheme" || scheme.paper_payload_bytes <= 0) return s;
  Settings t = s;
  t.payload_bytes = scheme.paper_payload_bytes;
  t.header_bytes = scheme.paper_header_bytes;
  return t;
}

std::string split_refusal(const Settings& s, const std::string& scheme) {
  if (is_sparse(s)) return "sparse runs (workload.sparse_model) run in one process";
  if (!is_network(s))
    return fmt::format("topology.kind = \"{}\" runs in one process; --partition splits multi-switch topologies",
                       s.topology_kind);
  if (schemes::find(scheme, schemes::Engine::SimNetwork).collective == schemes::Collective::None)
    return fmt::format("{} has no collective on multi-switch topologies", scheme);
  return "";
}

void check_split(const Scenario& sc) {
  for (const Point& pt : expand(sc))
    for (const std::string& scheme : sc.schemes)
      if (const std::string why = split_refusal(pt.settings, scheme); !why.empty()) {
        const std::string where = pt.series.empty() ? why : why + " (series " + pt.series + ")";
        if (is_sparse(pt.settings)) fail_field(sc.file, "workload.sparse_model", where, pt.settings.sparse_model);
        if (!is_network(pt.settings)) fail_field(sc.file, "topology.kind", where, pt.settings.topology_kind);
        fail_field(sc.file, "run.schemes", why, scheme);
      }
}

RunOutput run_point(const Settings& given, const std::string& scheme, uint64_t seed, sim::Ranks* ranks) {
  if (ranks && ranks->size() > 1)
    if (const std::string why = split_refusal(given, scheme); !why.empty()) throw std::invalid_argument(why);
  if (is_sparse(given)) return run_sparse_point(given, scheme, seed);
  if (is_network(given)) return run_network_point(given, scheme, seed, ranks);
  const schemes::Scheme& spec = schemes::find(scheme, schemes::Engine::SimStar);
  const Settings s = packets_for(given, spec);
  const host::Profile& profile = host::profile(s.profile);
  const auto payload_values = static_cast<uint16_t>(s.payload_bytes / 4);
  sim::Simulator sim(seed, payload_values, static_cast<uint32_t>(s.header_bytes));
  sim.set_host_delay(from_us(s.host_delay_us));

  dp::SwitchConfig swc;
  swc.memory_bytes = static_cast<uint64_t>(s.memory_mb * workload::kMiB);
  swc.payload_values = payload_values;
  swc.seed = mix(seed, 0x5);
  swc.track_tasks = spec.track_tasks;
  std::vector<cluster::Segment> segments;
  for (const auto& [mem, size] : star_segments(s)) segments.push_back({mem, size});
  cluster::StarCluster cluster(sim, spec, star_job_workers(s), swc, segments);
  const cluster::StarPlan& plan = cluster.plan();
  dp::SwitchProgram& sw = cluster.sw();

  Rng job_rng(mix(seed, 0x70b5));
  const double pkt_bytes = s.payload_bytes + s.header_bytes;
  std::vector<workload::TrainingWorker*> workers;
  host::WorkerConfig wbase;
  profile.apply(wbase);
  wbase.payload_values = payload_values;
  wbase.init_window = std::max(1.0, s.init_window_kb * 1000 / pkt_bytes);
  wbase.bdp_packets = host::window_covering(s.link_gbps, from_us(s.rtt_us), pkt_bytes);  // each worker's link x its RTT
  if (s.min_rto_us > 0) wbase.min_rto = from_us(s.min_rto_us);
  wbase.reminder_after = s.reminder_after;
  wbase.ecn_per_window = s.ecn_per_window;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const auto& job = plan.jobs[j];
    const Time start = static_cast<Time>(job_rng.uniform() * from_us(s.start_jitter_us));
    const char model = s.model == "mixed" ? (job.id % 2 ? 'A' : 'B') : s.model[0];
    for (size_t r = 0; r < job.workers.size(); ++r) {
      workload::TrainingConfig tc;
      tc.transport = cluster.worker(j, r, wbase);
      tc.model = workload::dsa_model(model, s.partition_mb, s.compute_ms);
      tc.iterations = s.iterations;
      tc.start = start;
      tc.send_jitter = from_us(s.send_jitter_us);
      tc.seed = mix(seed, 0x1000 + tc.transport.self);
      tc.data_seed = mix(seed, 0x2000 + job.id);
      tc.dsa_priority = spec.eq1_priority;
      tc.eq1_per_tensor = s.eq1_priority == "tensor";
      tc.link_gbps = s.link_gbps;
      auto node = std::make_unique<workload::TrainingWorker>(tc);
      workers.push_back(node.get());
      cluster.add_host(job.workers[r], std::move(node));
    }
  }
  host::PsConfig pbase;
  profile.apply(pbase);
  pbase.payload_values = payload_values;
  if (s.min_rto_us > 0) pbase.min_timeout = from_us(s.min_rto_us);
  const std::vector<host::ParameterServer*> servers = cluster.add_servers(pbase);
  // Links: every host to the switch; faults per link.
  const sim::LinkParams base = star_link(s);
  cluster.wire([&](NodeId h) {
    sim::LinkParams p = base;
    const bool lossy_worker = !plan.jobs.empty() && h == plan.jobs[0].workers[0];
    bool is_ps = false;
    for (const auto& j : plan.jobs) is_ps |= j.ps == h;
    if (lossy_worker) p.loss = combine(p.loss, s.worker_loss);
    if (is_ps) p.loss = combine(p.loss, s.ps_loss);
    return std::make_pair(p, p);
  });

  // §VII-C's task-type ratio "per lost packet": the (job, psn) of every
  // task packet a link's loss drops, classified after the run by the type
  // its task ended with.
  std::vector<std::pair<uint16_t, uint32_t>> lost;
  if (swc.track_tasks)
    sim.set_loss_observer([&lost](const Packet& p) {
      if (p.h.type >= PktType::Data && p.h.type <= PktType::Reminder) lost.emplace_back(p.h.job, p.h.psn);
    });

  sim.run(from_ms(s.max_sim_ms));
  bool all_finished = true;
  for (const auto* w : workers) all_finished &= w->finished();
  // Drain stale timers and late packets, so that what is left is a real leak.
  if (all_finished) sim.run(sim.now() + 2 * kSec);

  RunOutput out;
  auto& m = out.metrics;
  double jct_sum = 0, jct_max = 0, util_sum = 0;
  Time end_of_training = 0;
  size_t unfinished = 0;
  uint64_t checked = 0, mismatches = 0, retx = 0, reminders = 0, timeouts = 0, decreases = 0, ece_acks = 0;
  size_t wi = 0;
  for (const auto& job : plan.jobs) {
    Time start = -1, finish = -1;
    bool job_done = true;
    for (size_t r = 0; r < job.workers.size(); ++r, ++wi) {
      const auto* w = workers[wi];
      start = w->start_time();
      if (!w->finished()) { ++unfinished; job_done = false; continue; }
      finish = std::max(finish, w->finish_time());
      end_of_training = std::max(end_of_training, w->finish_time());
      checked += w->verify_checked();
      mismatches += w->verify_mismatches();
      retx += w->transport().stats().retransmits;
      reminders += w->transport().stats().reminders;
      timeouts += w->transport().stats().timeouts;
      decreases += w->transport().stats().decreases;
      ece_acks += w->transport().stats().ece_acks;
    }
    if (!job_done) finish = -1;
    out.job_jct_ms.push_back(finish >= 0 ? to_ms(finish - start) : std::nan(""));
    if (finish >= 0) {
      const double jct = to_ms(finish - start);
      jct_sum += jct;
      jct_max = std::max(jct_max, jct);
    }
  }
  // Utilization: aggregation throughput of each worker (its gradient bytes
  // over the span from its first send to its last result) over the link rate.
  wi = 0;
  size_t util_n = 0;
  for (const auto& job : plan.jobs) {
    const char model = s.model == "mixed" ? (job.id % 2 ? 'A' : 'B') : s.model[0];
    const double bytes = static_cast<double>(workload::dsa_model(model, s.partition_mb).total_bytes()) * s.iterations;
    for (size_t r = 0; r < job.workers.size(); ++r, ++wi) {
      const auto* w = workers[wi];
      if (!w->finished() || w->finish_time() <= w->first_send()) continue;
      const double secs = static_cast<double>(w->finish_time() - w->first_send()) / kSec;
      util_sum += bytes * 8 / secs / (s.link_gbps * 1e9);
      ++util_n;
    }
  }
  const auto& ss = sw.stats();
  uint64_t ps_completions = 0, ps_timeout_rem = 0, ps_entries = 0, ps_conflicts = 0;
  std::vector<const host::WorkerTransport*> transports;
  for (const auto* w : workers) transports.push_back(&w->transport());
  const cluster::Refusals refused =
      cluster::count_refusals({&sw}, std::vector<const host::ParameterServer*>(servers.begin(), servers.end()), transports);
  for (auto* p : servers) {
    ps_completions += p->stats().completions;
    ps_timeout_rem += p->stats().timeout_reminders;
    ps_entries += p->entries();
    ps_conflicts += p->stats().conflicts;
  }
  const size_t leaked_aggs = spec.isolated ? 0 : sw.occupied();
  m["avg_jct_ms"] = plan.jobs.empty() ? 0 : jct_sum / static_cast<double>(plan.jobs.size());
  m["max_jct_ms"] = jct_max;
  m["utilization"] = util_n ? util_sum / static_cast<double>(util_n) : 0;
  m["switch_completions"] = static_cast<double>(ss.completed);
  m["ps_completions"] = static_cast<double>(ps_completions);
  m["collisions"] = static_cast<double>(ss.collisions);
  m["preemptions"] = static_cast<double>(ss.preempt_won);
  m["preempt_lost"] = static_cast<double>(ss.preempt_lost);
  m["resubmits"] = static_cast<double>(ss.resubmits);
  m["to_ps"] = static_cast<double>(ss.to_ps);
  m["switch_duplicates"] = static_cast<double>(ss.duplicates);
  m["retransmits"] = static_cast<double>(retx);
  m["timeouts"] = static_cast<double>(timeouts);
  m["window_decreases"] = static_cast<double>(decreases);  // halvings of the workers' windows (ECN echoes, rate syncs)
  m["ece_acks"] = static_cast<double>(ece_acks);           // results that carried an ECN echo
  m["worker_reminders"] = static_cast<double>(reminders);
  m["ps_timeout_reminders"] = static_cast<double>(ps_timeout_rem);
  m["ps_conflicts"] = static_cast<double>(ps_conflicts);
  if (swc.track_tasks) {
    const auto t = sw.task_types();
    m["tasks_type1"] = static_cast<double>(t[0]);
    m["tasks_type2"] = static_cast<double>(t[1]);
    m["tasks_type3"] = static_cast<double>(t[2]);
    std::array<double, 4> by_type{0, 0, 0, 0};
    for (const auto& [job, psn] : lost) ++by_type[static_cast<size_t>(sw.task_type(job, psn))];
    m["lost_untracked"] = by_type[0];
    m["lost_type1"] = by_type[1];
    m["lost_type2"] = by_type[2];
    m["lost_type3"] = by_type[3];
  }
  if (spec.join_splits) m["split_joins"] = static_cast<double>(ss.split_joins);
  if (spec.segments) {  // P4INC-AOI: per-job JCT, asynchronous errors, shadow-copy answers
    for (size_t j = 0; j < out.job_jct_ms.size(); ++j) m[fmt::format("job{}_jct_ms", j + 1)] = out.job_jct_ms[j];
    uint64_t notices = 0, behind = 0;
    for (const auto* t : transports) {
      notices += t->stats().ecn_notices;
      behind += t->stats().behind;
    }
    m["async_errors"] = static_cast<double>(ss.async_errors);
    m["ecn_notices"] = static_cast<double>(notices);
    m["behind_sent"] = static_cast<double>(behind);
    m["shadow_resends"] = static_cast<double>(ss.resend_served);
    m["switch_stale"] = static_cast<double>(ss.stale);
    m["out_of_segment"] = static_cast<double>(ss.out_of_segment);
  }
  m["verified_values"] = static_cast<double>(checked);
  m["verify_errors"] = static_cast<double>(mismatches);
  m["unfinished_workers"] = static_cast<double>(unfinished);
  m["leaked_aggregators"] = static_cast<double>(leaked_aggs);
  m["ps_entries_left"] = static_cast<double>(ps_entries);
  m["packets_leaked"] = static_cast<double>(sim.packets_in_use());
  m["sim_time_ms"] = to_ms(end_of_training);
  m["events"] = static_cast<double>(sim.events());
  m["hops"] = static_cast<double>(sim.hops());
  out.digest = sim.digest();

  std::vector<std::string> probs;
  if (unfinished) probs.push_back(fmt::format("{} workers did not finish within run.max_sim_ms = {}", unfinished, s.max_sim_ms));
  if (s.verify && mismatches) probs.push_back(fmt::format("{} result values differ from the exact sum", mismatches));
  if (all_finished && ps_entries) probs.push_back(fmt::format("{} PS dictionary entries left", ps_entries));
  if (all_finished && sim.packets_in_use()) probs.push_back(fmt::format("{} packets leaked", sim.packets_in_use()));
  // Every node here is honest: a packet refused as malformed or foreign is a protocol bug.
  if (refused.total()) probs.push_back(refused.text());
  if (leaked_aggs && s.dup == 0 && s.reorder == 0)
    probs.push_back(fmt::format("{} aggregators still held after every job ended", leaked_aggs));
  out.ok = probs.empty();
  for (size_t i = 0; i < probs.size(); ++i) out.problems += (i ? "; " : "") + probs[i];
  return out;
}

std::vector<ScenarioRun> scenario_runs(const Scenario& sc, const std::vector<Point>& points) {
  std::vector<ScenarioRun> runs;
  for (const auto& pt : points)
    for (const auto& scheme : sc.schemes)
      for (uint64_t seed : sc.seeds) runs.push_back({&pt, &scheme, seed});
  return runs;
}

RunResult run_one(const ScenarioRun& run, bool own_peak, sim::Ranks* ranks) {
  RunResult r;
  if (own_peak) reset_peak_rss();
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.out = run_point(run.point->settings, *run.scheme, run.seed, ranks);
  } catch (const std::exception& e) {
    r.error = e.what();
  } catch (...) {
    r.error = "an exception that is not a std::exception";
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_s = thread_cpu_seconds() - cpu0 + r.out.helper_cpu_s;  // run.threads: its threads' too
  r.peak_rss = peak_rss_bytes();
  if (!r.error.empty()) {
    r.out = RunOutput{};
    r.out.ok = false;
    r.out.problems = "error: " + r.error;
  }
  return r;
}

RunExecutor local_executor(unsigned threads) {
  return [threads](const std::vector<ScenarioRun>& runs, const RunDone& done) {
    std::atomic<size_t> next{0};
    std::mutex mu;  // serializes done
    std::exception_ptr error;
    auto work = [&] {
      for (size_t i; (i = next++) < runs.size();) {
        RunResult r = run_one(runs[i], threads <= 1);
        std::lock_guard lock(mu);
        if (error) return;
        try {
          done(i, std::move(r), -1);
        } catch (...) {
          error = std::current_exception();
          next = runs.size();
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned k = 1; k < std::max(1u, threads); ++k) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
  };
}

std::vector<Record> run_scenario(const Scenario& sc, const std::function<void(const Progress&)>& on_run,
                                 std::vector<std::string>* failures, unsigned threads) {
  return run_scenario(sc, on_run, failures, local_executor(threads));
}

std::vector<Record> run_scenario(const Scenario& sc, const std::function<void(const Progress&)>& on_run,
                                 std::vector<std::string>* failures, const RunExecutor& execute) {
  const auto points = expand(sc);  // validates every point before anything runs
  const std::vector<ScenarioRun> runs = scenario_runs(sc, points);
  std::vector<std::optional<Record>> records(runs.size());
  std::vector<std::string> problems(runs.size());
  Progress pr;
  pr.total = runs.size();
  execute(runs, [&](size_t i, RunResult&& r, int rank) {
    const ScenarioRun& t = runs.at(i);
    if (r.error.empty()) records[i] = Record{t.point->series, *t.scheme, t.point->x, 1, r.out.metrics};
    if (!r.out.ok)
      problems[i] = fmt::format("{} x={} {} seed {}: {}", t.point->series, t.point->x, *t.scheme, t.seed, r.out.problems);
    ++pr.done;
    pr.index = i;
    pr.point = t.point;
    pr.scheme = t.scheme;
    pr.seed = t.seed;
    pr.out = &r.out;
    pr.wall_s = r.wall_s;
    pr.cpu_s = r.cpu_s;
    pr.peak_rss = r.peak_rss;
    pr.threw = !r.error.empty();
    pr.rank = rank;
    if (on_run) on_run(pr);
  });
  if (failures)
    for (auto& p : problems)
      if (!p.empty()) failures->push_back(std::move(p));
  std::vector<Record> out;
  for (auto& r : records)
    if (r) out.push_back(std::move(*r));
  return out;
}

}  // namespace ina::exp
