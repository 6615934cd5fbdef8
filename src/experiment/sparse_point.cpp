#include "experiment/sparse_point.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "experiment/network_point.hpp"
#include "experiment/sparse.hpp"
#include "wire/kv.hpp"
#include "schemes/registry.hpp"
#include "workload/model.hpp"
#include "workload/sparse.hpp"

namespace ina::exp {

bool is_sparse(const Settings& s) { return !s.sparse_model.empty(); }

namespace {
std::string trace_path(const Settings& s) {
  const std::filesystem::path p(s.sparse_trace);
  return p.is_absolute() || s.scenario_dir.empty() ? p.string() : (std::filesystem::path(s.scenario_dir) / p).string();
}
}  // namespace

void validate_sparse(const Settings& s, const std::vector<std::string>& scheme_names, const std::string& origin) {
  for (const auto& name : scheme_names)
    if (!schemes::find(name).supports(schemes::Engine::SimSparse))
      fail_field(origin, "run.schemes",
                 fmt::format("{} does not run sparse workloads (workload.sparse_model is set); sparse schemes: {}",
                             name, schemes::names_text(schemes::Engine::SimSparse)),
                 name);
  if (s.topology_kind != "star")
    fail_field(origin, "topology.kind", "sparse workloads run on the star (one switch, its CPU, one PS)",
               s.topology_kind);
  if (s.jobs != 1)
    fail_field(origin, "workload.jobs", "a sparse scenario runs one job (set workload.jobs = 1)",
               std::to_string(s.jobs));
  const Settings d;
  const std::pair<const char*, bool> unused[] = {
      {"workload.partition_mb", s.partition_mb != d.partition_mb},
      {"faults.worker_loss", s.worker_loss != d.worker_loss},
      {"faults.ps_loss", s.ps_loss != d.ps_loss},
      {"workload.step_barrier", s.step_barrier},
      {"transport.min_rto_us", s.min_rto_us != d.min_rto_us},
      {"faults.fail_rank", s.fail_rank != d.fail_rank},
      {"topology.host_ecn", s.host_ecn},
      {"switch.header_bytes", s.header_bytes != d.header_bytes},
      {"run.profile", s.profile != d.profile},
      {"workload.gradient_mb", s.gradient_mb != d.gradient_mb},
      {"workload.model", s.model != d.model}};
  for (const auto& [key, set] : unused)
    if (set) fail_field(origin, key, "does not apply to sparse workloads (workload.sparse_model)", "set");
  for (const auto& [key, value] : collective_settings_set(s))
    fail_field(origin, key, "does not apply to sparse workloads (workload.sparse_model)", value);
  // switch.payload_bytes: the packet of a dense scheme streaming the model (SwitchML).
  bool dense = false;
  for (const auto& name : scheme_names) dense = dense || schemes::find(name).sparse == schemes::Sparse::Dense;
  if (s.payload_bytes != d.payload_bytes && !dense)
    fail_field(origin, "switch.payload_bytes",
               "sizes the packets of a dense scheme on a sparse workload (switchml); run.schemes has none",
               std::to_string(s.payload_bytes));
  if (s.payload_bytes / 4 > 0xFFFF)
    fail_field(origin, "switch.payload_bytes", "more values than a packet counts", std::to_string(s.payload_bytes));
  if (s.sparse_model == "trace") {
    if (s.sparse_trace.empty())
      fail_field(origin, "workload.sparse_trace", "workload.sparse_model = \"trace\" needs a trace file", "\"\"");
    if (s.sparse_scale != 1)
      fail_field(origin, "workload.sparse_scale", "a recorded trace is replayed at its own size (1)",
                 fmt::format("{}", s.sparse_scale));
    if (s.sparse_row_width != 1)
      fail_field(origin, "workload.sparse_row_width", "a recorded trace has its own keys (ina-sparse-trace: --dim)",
                 fmt::format("{}", s.sparse_row_width));
    if (s.sparse_draws != 0)
      fail_field(origin, "workload.sparse_draws", "a recorded trace has its own batches", std::to_string(s.sparse_draws));
    const auto path = trace_path(s);
    if (!std::filesystem::exists(path))
      fail_field(origin, "workload.sparse_trace",
                 fmt::format("no such file {} (make one with ina-sparse-trace --out FILE; docs/zebra.md)", path),
                 s.sparse_trace);
  } else if (!s.sparse_trace.empty()) {
    fail_field(origin, "workload.sparse_trace", "is read only with workload.sparse_model = \"trace\"", s.sparse_trace);
  }
  if (const auto* m = workload::find_sparse_model(s.sparse_model);
      m && std::llround(static_cast<double>(m->draws) * s.sparse_scale) < 1 &&
      std::llround(static_cast<double>(m->head) * s.sparse_scale) < 1)
    fail_field(origin, "workload.sparse_scale",
               fmt::format("leaves {} no key per batch ({} draws x scale)", s.sparse_model, m->draws),
               fmt::format("{}", s.sparse_scale));
  const double scaled = std::round(s.hot_keys * s.sparse_scale);
  if (s.hot_keys > 0 && scaled * 4 > s.memory_mb * workload::kMiB && s.principle_p == 0)
    fail_field(origin, "zebra.hot_keys",
               fmt::format("{} hot keys x 4 B (after workload.sparse_scale = {}) exceed switch.memory_mb = {}", scaled,
                           s.sparse_scale, s.memory_mb),
               std::to_string(s.hot_keys));
  if (scaled > s.table_entries)
    fail_field(origin, "zebra.hot_keys",
               fmt::format("{} hot keys (after workload.sparse_scale = {}) exceed the switch's exact-match table of {} "
                           "entries (zebra.table_entries; the prototype's 32,768)",
                           scaled, s.sparse_scale, s.table_entries),
               std::to_string(s.hot_keys));
  if (s.zebra_arith != "fixed")
    for (const auto& name : scheme_names)
      if (schemes::find(name).sparse == schemes::Sparse::Dense)
        fail_field(origin, "zebra.arith",
                   fmt::format("{} streams the dense model in int32 fixed point; float16-table applies to the "
                               "<key, value> schemes (zebra: hot pairs on the switch, ps-lite: float32 at the PS)",
                               name),
                   s.zebra_arith);
  if (!s.sparse_pool.empty()) {
    const schemes::Scheme* pool = schemes::lookup(s.sparse_pool);
    if (!pool || !pool->hosts_sparse) {
      std::string can;
      for (const auto& x : schemes::all())
        if (x.hosts_sparse) can += (can.empty() ? "" : ", ") + x.name;
      fail_field(origin, "zebra.pool", fmt::format("not a shared pool that holds sparse jobs (those that do: {})", can),
                 s.sparse_pool);
    }
    for (const auto& name : scheme_names)
      if (schemes::find(name).sparse != schemes::Sparse::HotIna)
        fail_field(origin, "run.schemes",
                   fmt::format("{} aggregates no hot keys in the switch; zebra.pool = \"{}\" runs zebra", name,
                               s.sparse_pool),
                   name);
    if (s.registers != Settings{}.registers)
      fail_field(origin, "zebra.registers",
                 "a pool's aggregators have 64 value lanes, one register each (zebra.pool is set)",
                 std::to_string(s.registers));
    if (s.dense_workers > 0 && std::llround(s.dense_mb * workload::kMiB / 4) < 1)
      fail_field(origin, "zebra.dense_mb",
                 fmt::format("zebra.dense_workers = {} needs a tensor of at least one int32 value", s.dense_workers),
                 fmt::format("{}", s.dense_mb));
    if (s.dense_workers == 0) {
      const Settings d;
      const std::pair<const char*, bool> job_only[] = {{"zebra.dense_mb", s.dense_mb != d.dense_mb},
                                                       {"zebra.dense_iterations", s.dense_iterations != d.dense_iterations}};
      for (const auto& [key, set] : job_only)
        if (set) fail_field(origin, key, "describes the dense job: set zebra.dense_workers too", "set");
    }
  } else {
    const std::pair<const char*, bool> pool_only[] = {{"zebra.dense_workers", s.dense_workers != 0},
                                                      {"zebra.dense_mb", s.dense_mb != 0},
                                                      {"zebra.dense_iterations", s.dense_iterations != 1}};
    for (const auto& [key, set] : pool_only)
      if (set) fail_field(origin, key, "a dense job beside the sparse one needs a shared pool (zebra.pool)", "set");
  }
  if (s.ecn_kb > s.queue_kb)
    fail_field(origin, "topology.ecn_kb", fmt::format("ECN threshold exceeds topology.queue_kb = {}", s.queue_kb),
               fmt::format("{}", s.ecn_kb));
}

std::unique_ptr<workload::SparseSource> sparse_rows(const Settings& s, uint64_t seed) {
  if (s.sparse_model == "trace") return workload::load_trace(trace_path(s));
  const workload::SparseModelSpec* found = workload::find_sparse_model(s.sparse_model);
  if (!found) throw std::invalid_argument(fmt::format("unknown sparse model '{}'", s.sparse_model));
  workload::SparseModelSpec m = *found;
  if (s.sparse_draws > 0) m.draws = static_cast<uint64_t>(s.sparse_draws);
  return workload::make_synthetic(m, static_cast<unsigned>(s.workers_per_job),
                                  static_cast<unsigned>(s.profile_iterations + s.iterations), seed, s.sparse_scale);
}

RunOutput run_sparse_point(const Settings& s, const std::string& scheme, uint64_t seed) {
  const unsigned N = static_cast<unsigned>(s.workers_per_job);
  const unsigned profile = static_cast<unsigned>(s.profile_iterations);
  const unsigned iters = static_cast<unsigned>(s.iterations);
  std::unique_ptr<workload::SparseSource> src;
  RunOutput out;
  try {
    src = workload::with_row_width(sparse_rows(s, seed), static_cast<unsigned>(s.sparse_row_width));
  } catch (const std::exception& e) {
    out.ok = false;
    out.problems = e.what();
    return out;
  }

  SparseSettings ss;
  ss.scheme = scheme;
  ss.workers = N;
  ss.iterations = iters;
  ss.first_iteration = profile;
  ss.seed = seed;
  ss.hot_keys = static_cast<size_t>(std::llround(s.hot_keys * s.sparse_scale));
  ss.profile_first = 0;
  ss.profile_iterations = profile;
  ss.sample_rate = s.sample_rate;
  ss.principle_p = s.principle_p;
  ss.principle_c = s.principle_c;
  ss.registers = static_cast<uint32_t>(s.registers);
  ss.placement = s.zebra_placement == "random" ? dp::zebra::Placement::Random : dp::zebra::Placement::Heat;
  ss.layout_aware = s.layout_aware;
  ss.pairs = static_cast<unsigned>(s.pairs);
  ss.ps_pairs = static_cast<unsigned>(s.ps_pairs);
  ss.ack_every = static_cast<unsigned>(s.ps_ack_every);
  ss.machines = static_cast<unsigned>(s.machines);
  ss.dense_payload_values = static_cast<uint16_t>(s.payload_bytes / 4);
  // transport.init_window_kb, as the dense schemes: packets of 50 B of headers + the KV payload.
  ss.init_window = std::max(1.0, s.init_window_kb * 1000 / (50.0 + 4.0 * kv::words(ss.pairs)));
  ss.table_entries = static_cast<uint32_t>(s.table_entries);
  ss.memory_bytes = static_cast<uint64_t>(s.memory_mb * workload::kMiB);
  ss.arith = parse_kv_arith(s.zebra_arith).value_or(KvArith::Fixed);  // checked by the scenario parser
  ss.hot_results = kv::parse_hot_route(s.zebra_hot_results).value_or(kv::HotRoute::ViaPs);  // checked there too
  ss.link = star_link(s);
  ss.time_limit = from_ms(s.max_sim_ms);
  ss.pool = s.sparse_pool;
  ss.dense_workers = static_cast<unsigned>(s.dense_workers);
  ss.dense_values = static_cast<uint64_t>(std::llround(s.dense_mb * workload::kMiB / 4));
  ss.dense_iterations = static_cast<unsigned>(s.dense_iterations);

  SparseRun r;
  try {
    r = run_sparse(ss, *src);
  } catch (const std::exception& e) {  // a wrong sum, a leak, an unfinished run, Principle 1 out of reach: a failed point
    out.ok = false;
    out.problems = e.what();
    return out;
  }
  auto& x = out.metrics;
  x["agg_throughput_gbps"] = r.agg_throughput_gbps;
  x["sync_ms"] = to_ms(r.total) / static_cast<double>(r.iters.size());
  x["hot_share"] = r.hot_share;
  x["hot_keys"] = static_cast<double>(r.hot_keys);
  x["recirc_per_packet"] = r.recirc_per_packet;
  x["pairs"] = static_cast<double>(r.pairs);
  x["switch_pairs"] = static_cast<double>(r.sw.kv_aggregated);
  x["ps_pairs"] = static_cast<double>(r.ps.pairs);
  // The union of keys (summed over the measured iterations) and its hot
  // part: the results each worker receives, from the PS and the switch.
  uint64_t union_keys = 0;
  for (const auto& it : r.iters) union_keys += it.union_keys;
  x["union_keys"] = static_cast<double>(union_keys);
  x["hot_union_keys"] = static_cast<double>(r.hot_union_keys);
  x["retransmits"] = static_cast<double>(r.workers.retransmits);
  x["cpu_retransmits"] = static_cast<double>(r.cpu.retransmits);  // Zebra's switch CPU: result copies sent again
  x["queue_drops"] = static_cast<double>(r.queue_drops);
  x["workers"] = N;
  x["params"] = static_cast<double>(src->num_params());
  x["events"] = static_cast<double>(r.events);
  // The PS's phases (SparseIteration::ps_*), mean per iteration: the
  // pushes until the last gradient pairs reach the PS, the closing packets
  // until every worker's is in, the sums until the last worker has all its
  // results; and the time the PS's link needs for its bytes in each direction.
  // With the hot results via the PS, the results phase splits in two: until
  // the last of the switch's results is in (ps_wait_switch_ms; 0 if it came
  // before the closing packets), then until the last worker has its sums
  // (ps_send_ms); ps_in_hot_share: the switch's results' share of the PS's
  // inbound bytes.
  if (!r.iters.empty() && r.iters.front().ps_all_in > 0) {
    double push = 0, close = 0, results = 0, in = 0, outb = 0, acks = 0, wait = 0, send = 0, hot = 0;
    for (const auto& it : r.iters) {
      const Time data = std::max(it.ps_last_data, it.start);  // no pairs reached the PS: the push phase is empty
      push += to_ms(data - it.start);
      close += to_ms(it.ps_all_in - data);
      results += to_ms(it.end - it.ps_all_in);
      const Time answered = std::min(std::max(it.ps_all_in, it.ps_hot_in), it.end);
      wait += to_ms(answered - it.ps_all_in);
      send += to_ms(it.end - answered);
      in += static_cast<double>(it.ps_in_bytes);
      outb += static_cast<double>(it.ps_out_bytes);
      acks += static_cast<double>(it.ps_in_ack_bytes);
      hot += static_cast<double>(it.ps_in_hot_bytes);
    }
    const double n = static_cast<double>(r.iters.size());
    const double ms_per_byte = 8.0 / (s.link_gbps * 1e6);
    x["ps_push_ms"] = push / n;
    x["ps_close_ms"] = close / n;
    x["ps_results_ms"] = results / n;
    x["ps_in_link_ms"] = in / n * ms_per_byte;
    x["ps_out_link_ms"] = outb / n * ms_per_byte;
    x["ps_in_ack_share"] = in > 0 ? acks / in : 0;  // of the PS's inbound bytes: the workers' result acks
    if (hot > 0) {
      x["ps_wait_switch_ms"] = wait / n;
      x["ps_send_ms"] = send / n;
      x["ps_in_hot_share"] = hot / in;
    }
  }
  if (!ss.pool.empty()) {  // the shared pool (ours): the dense job beside the sparse one
    x["pinned_aggregators"] = static_cast<double>(r.pinned);
    x["pool_aggregators"] = static_cast<double>(r.pool_aggregators);
    x["pinned_hits"] = static_cast<double>(r.sw.pinned_hits);
    x["collisions"] = static_cast<double>(r.sw.collisions);
    x["preemptions"] = static_cast<double>(r.sw.preempt_won);
    x["switch_completions"] = static_cast<double>(r.sw.completed);
    x["dense_jct_ms"] = to_ms(r.dense.finish);
    x["dense_goodput_gbps"] = r.dense.goodput_gbps;
    x["dense_retransmits"] = static_cast<double>(r.dense.retransmits);
    x["dense_ps_completions"] = static_cast<double>(r.dense.ps_completions);
    x["dense_verified_values"] = static_cast<double>(r.dense.verified);
  }
  if (ss.arith == KvArith::Float16Table) {  // vs exact float64 sums (experiment/sparse.hpp, ValueError)
    x["fp16_max_rel_err"] = r.value_error.max_rel;
    x["fp16_mean_rel_err"] = r.value_error.mean_rel;
    x["fp16_max_scaled_err"] = r.value_error.max_scaled;
    x["fp16_max_err_over_bound"] = r.value_error.max_over_bound;
    x["fp16_vec_rel_err"] = r.value_error.vec_rel;
  }
  return out;
}

}  // namespace ina::exp
