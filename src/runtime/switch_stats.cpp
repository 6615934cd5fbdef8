// The switch's statistics as answered to {"op":"stats"}: what anyone may
// read, a job's own view, and the operator's (totals and each shard's).
#include <array>

#include "runtime/switch_impl.hpp"

namespace ina::rt {

nlohmann::json to_json(const dp::SwitchStats& s) {
  return {{"data_in", s.data_in}, {"aggregated", s.aggregated}, {"completed", s.completed}, {"to_ps", s.to_ps},
          {"collisions", s.collisions}, {"preempt_won", s.preempt_won}, {"preempt_lost", s.preempt_lost},
          {"downgrades", s.downgrades}, {"resubmits", s.resubmits}, {"duplicates", s.duplicates},
          {"stale", s.stale}, {"bypass_overwritten", s.bypass_overwritten}, {"resend_served", s.resend_served}, {"fetches", s.fetches},
          {"fetch_hits", s.fetch_hits}, {"acks_multicast", s.acks_multicast},
          {"released_by_ack", s.released_by_ack}, {"overflow", s.overflow}, {"malformed", s.malformed},
          {"forwarded", s.forwarded}, {"foreign_data", s.foreign_data}, {"foreign_ack", s.foreign_ack},
          {"foreign_fetch", s.foreign_fetch}, {"foreign_forward", s.foreign_forward},
          {"kv_in", s.kv_in}, {"kv_pairs_in", s.kv_pairs_in}, {"kv_aggregated", s.kv_aggregated},
          {"kv_to_ps", s.kv_to_ps}, {"recirculations", s.recirculations}, {"sweep_passes", s.sweep_passes},
          {"kv_results", s.kv_results}, {"kv_rejects", s.kv_rejects}, {"tree_results", s.tree_results},
          {"pinned_hits", s.pinned_hits}, {"quota_refused", s.quota_refused}, {"reclaimed", s.reclaimed},
          {"priority_clamped", s.priority_clamped}, {"rate_syncs", s.rate_syncs}, {"capacity_drops", s.capacity_drops},
          {"evictions", s.evictions}, {"bypassed", s.bypassed}, {"flushed", s.flushed}};
}

namespace switchd {

// Sums the numbers of `x` into `into`, recursively by key (statistics of several shards).
void add_counts(nlohmann::json& into, const nlohmann::json& x) {
  if (into.is_null()) {
    into = x;
    return;
  }
  if (into.is_object() && x.is_object()) {
    for (const auto& [k, v] : x.items()) add_counts(into[k], v);
  } else if (into.is_number_unsigned() && x.is_number_unsigned()) {
    into = into.get<uint64_t>() + x.get<uint64_t>();
  } else if (into.is_number() && x.is_number()) {
    into = into.get<double>() + x.get<double>();
  }
}

}  // namespace switchd

using switchd::add_counts;
using switchd::on_shard;

// What anyone may read: the switch's shape and totals; no job ids, no per-job counts.
nlohmann::json SwitchDaemon::Impl::public_stats() const {
  return {{"endpoint", endpoint.str()}, {"policy", scheme.policy},
          {"payload", cfg.program.payload_values}, {"memory_bytes", cfg.program.memory_bytes},
          {"aggregators", aggregators()}, {"threads", shards.size()}};
}

// Every shard's aggregators (constant after construction).
size_t SwitchDaemon::Impl::aggregators() const {
  size_t n = 0;
  for (const auto& sh : shards) n += sh->program->aggregators();
  return n;
}

// A job's own view: its state and how many aggregators it holds.
nlohmann::json SwitchDaemon::Impl::job_stats(uint16_t id) const {
  nlohmann::json out = public_stats();
  auto it = jobs.find(id);
  const schemes::Admission::JobState* state = admission->job(id);
  nlohmann::json j = {{"job", id}, {"known", it != jobs.end() && state}};
  if (it != jobs.end() && state) {
    const schemes::Admission::JobState& job = *state;
    Shard& sh = *shards[id % shards.size()];
    j["live"] = job.live;
    j["nworkers"] = job.nworkers;
    j["workers_joined"] = job.workers_joined();
    j["ps_joined"] = job.ps;
    j["aggregators_held"] = on_shard(sh, [&] { return sh.program->occupied_by(id); });
    if (shared_pool() && job.live) {
      const uint32_t q = on_shard(sh, [&] { return sh.program->quota_of(id); });
      const ShareLimits::Range r = cfg.share.range_of(id);
      j["quota"] = q ? nlohmann::json(q) : nlohmann::json(nullptr);  // null: no limit
      j["priority_range"] = {r.lo, r.hi};
    }
    j["seconds"] = to_ms(engine->now() - job.since) / 1000;
    if (shards.size() > 1) j["thread"] = sh.index;
  }
  out["job"] = j;
  return out;
}

// One shard's counters, read on its thread.
nlohmann::json SwitchDaemon::Impl::shard_stats(Shard& sh) const {
  nlohmann::json o = on_shard(sh, [&] {
    nlohmann::json v = {{"aggregators", sh.program->aggregators()}, {"occupied", sh.program->occupied()},
                        {"packets_in_use", sh.engine->packets_in_use()}, {"switch", to_json(sh.program->stats())},
                        {"engine", sh.engine->stats().to_json()}};
    if (cfg.program.track_tasks) v["task_types"] = sh.program->task_types();
    return v;
  });
  nlohmann::json served = nlohmann::json::array();
  for (const auto& [id, j] : jobs)
    if (live(*j) && id % shards.size() == sh.index) served.push_back(id);
  o["thread"] = sh.index;
  o["jobs"] = served;
  o["cpu_seconds"] = sh.cpu_seconds();
  return o;
}

// The operator's view: totals over the shards (switch and engine counters
// summed) and each shard's own under "shards".
nlohmann::json SwitchDaemon::Impl::stats() const {
  nlohmann::json live = nlohmann::json::array(), pending = nlohmann::json::array();
  for (const auto& [id, j] : jobs) (this->live(*j) ? live : pending).push_back(id);
  nlohmann::json per = nlohmann::json::array(), sw, eng;
  uint64_t occupied = 0, in_use = 0;
  std::array<uint64_t, 3> tasks{};
  for (const auto& sh : shards) {
    nlohmann::json o = shard_stats(*sh);
    occupied += o["occupied"].get<uint64_t>();
    in_use += o["packets_in_use"].get<uint64_t>();
    add_counts(sw, o["switch"]);
    add_counts(eng, o["engine"]);
    if (o.contains("task_types"))
      for (size_t k = 0; k < tasks.size(); ++k) tasks[k] += o["task_types"][k].get<uint64_t>();
    per.push_back(std::move(o));
  }
  nlohmann::json out = {
      {"endpoint", endpoint.str()}, {"policy", scheme.policy},
      {"payload", cfg.program.payload_values}, {"memory_bytes", cfg.program.memory_bytes},
      {"aggregators", aggregators()}, {"occupied", occupied},
      {"packets_in_use", in_use}, {"switch", sw},
      {"engine", eng}, {"faults", cfg.faults.to_json()},
      {"threads", shards.size()}, {"shards", per},
      {"jobs", {{"live", live}, {"pending", pending}, {"finished", jobs_finished}, {"aborted", jobs_aborted},
                {"aggregators_freed_at_teardown", freed_at_teardown}}},
      {"control", {{"connections", conns.size()}, {"lingering", lingering.size()}, {"rejected", joins_rejected}, {"auth_failures", auth_failures},
                   {"refused_per_source", limit_counts.refused_per_source}, {"evicted", limit_counts.evicted},
                   {"timed_out", limit_counts.timed_out}, {"oversized_lines", limit_counts.oversized},
                   {"accept_pauses", limit_counts.accept_pauses}, {"accept_failures", limit_counts.accept_failures},
                   {"accepting", accepting},
                   {"limits", {{"max_connections", limits.max_connections}, {"max_per_source", limits.max_per_source},
                               {"visitor_timeout_ms", to_ms(limits.visitor_timeout)},
                               {"max_visitor_line", limits.max_visitor_line},
                               {"max_visitor_output", limits.max_visitor_output}}}}}};
  if (cfg.program.track_tasks) out["task_types"] = tasks;
  if (cpu) {
    const auto& c = cpu->stats();
    out["cpu"] = {{"held", cpu->held()}, {"copies", c.copies}, {"acks", c.acks}, {"retransmits", c.retransmits},
                  {"unknown_acks", c.unknown_acks}, {"malformed", c.malformed},
                  {"freed_at_teardown", cpu_copies_freed_at_teardown}};
  }
  if (layout) out["layout"] = {{"file", cfg.layout}, {"rack", cfg.rack}, {"job", layout->job}, {"id", program->id()},
                               {"aggregators_held", program->occupied_by(layout->job)}, {"epoch", epoch},
                               {"completed_at_epoch", completed_at_epoch}, {"freed_at_reconfigure", freed_at_reconfigure}};
  if (layout && !layout->tree())
    if (const dp::SwitchJob* sj = program->job(layout->job)) out["layout"]["rack_ranks"] = sj->rina.rack;  // current ranks, agent first
  return out;
}

}  // namespace ina::rt
