#include "cluster/star.hpp"

#include <memory>
#include <optional>
#include <stdexcept>
#include <variant>

#include <fmt/format.h>

#include "sim/network.hpp"

namespace ina::cluster {

StarPlan plan_star(const std::vector<int>& workers_per_job, bool with_ps) {
  StarPlan plan;
  NodeId next = 1;
  for (size_t j = 0; j < workers_per_job.size(); ++j) {
    StarJob job;
    job.id = static_cast<uint16_t>(j + 1);
    for (int r = 0; r < workers_per_job[j]; ++r) job.workers.push_back(next++);
    plan.jobs.push_back(std::move(job));
  }
  if (with_ps)
    for (auto& job : plan.jobs) job.ps = next++;
  plan.nodes = next;
  return plan;
}

void wire_star(Simulator& sim, const StarPlan& plan, const LinkParams& up, const LinkParams& down) {
  if (sim.node_count() != plan.nodes) throw std::logic_error("wire_star: add every planned node first");
  for (NodeId h = 1; h < plan.nodes; ++h) sim.connect(h, plan.sw, up, down);
  sim.build_routes();
}

void wire_machines(Simulator& sim, NodeId sw, const std::vector<NodeId>& hosts, unsigned machines,
                   const LinkParams& link) {
  const size_t n = hosts.size();
  if (machines == 0 || machines >= n) {
    for (const NodeId h : hosts) sim.connect(h, sw, link, link);
    return;
  }
  LinkParams nic_up = link;  // the NIC's queue: no mark
  nic_up.ecn_bytes = 0;
  LinkParams inside = link;
  inside.delay = 0;
  inside.ecn_bytes = 0;
  inside.loss = inside.dup = inside.reorder = 0;
  size_t next = 0;
  for (unsigned m = 0; m < machines; ++m) {
    const size_t k = n / machines + (m < n % machines ? 1 : 0);
    const NodeId nic = sim.add_node(std::make_unique<sim::Forwarder>(), true);
    sim.connect(nic, sw, nic_up, link);
    for (size_t i = 0; i < k; ++i) sim.connect(hosts[next++], nic, inside, inside);
  }
}

namespace {

using schemes::Admission;

// The star's switch as the admission object sees it: one shard, one region
// (or segment) per planned job.
Admission star_admission(schemes::Memory memory, size_t aggregators, size_t jobs) {
  Admission::Config c;
  c.memory = memory;
  c.aggregators = aggregators;
  c.regions = static_cast<unsigned>(jobs);
  c.pools = memory == schemes::Memory::Regions ? 2 : 1;  // isolated: two pools (shadow copy)
  c.policy = schemes::to_string(memory);
  return Admission(c);
}

// Admits job j of the plan (its ids from the plan) and registers it at the switch.
Admission::Grant admit(Admission& a, dp::SwitchProgram& sw, const StarJob& job, std::optional<Segment> segment) {
  auto answer = a.admit({job.id, job.workers, job.ps, segment});
  if (auto* no = std::get_if<Admission::Refusal>(&answer)) throw std::invalid_argument(no->reason);
  const Admission::Grant g = std::get<Admission::Grant>(answer);
  sw.add_job(g.switch_job());
  return g;
}

}  // namespace

uint32_t register_jobs(dp::SwitchProgram& sw, const StarPlan& plan, bool isolated) {
  Admission a = star_admission(isolated ? schemes::Memory::Regions : schemes::Memory::Pool, sw.aggregators(),
                               plan.jobs.size());
  if (const std::string e = a.memory_error(); !e.empty()) throw std::invalid_argument(e);
  for (const StarJob& job : plan.jobs) admit(a, sw, job, std::nullopt);
  return a.window_cap();
}

std::vector<Segment> equal_segments(size_t aggregators, size_t jobs) {
  std::vector<Segment> out;
  if (jobs == 0) return out;
  const Admission a = star_admission(schemes::Memory::Segments, aggregators, jobs);
  if (const std::string e = a.memory_error(); !e.empty()) throw std::invalid_argument(e);
  for (size_t j = 0; j < jobs; ++j) out.push_back({static_cast<uint32_t>(j) * a.region_size(), a.region_size()});
  return out;
}

std::vector<Segment> register_segments(dp::SwitchProgram& sw, const StarPlan& plan, const std::vector<Segment>& given) {
  if (!given.empty() && given.size() != plan.jobs.size())
    throw std::invalid_argument(fmt::format("{} segments for {} jobs", given.size(), plan.jobs.size()));
  Admission a = star_admission(schemes::Memory::Segments, sw.aggregators(), plan.jobs.size());
  if (given.empty() && !plan.jobs.empty())
    if (const std::string e = a.memory_error(); !e.empty()) throw std::invalid_argument(e);
  std::vector<Segment> segs;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const Admission::Grant g = admit(a, sw, plan.jobs[j], given.empty() ? std::nullopt : std::optional(given[j]));
    segs.push_back({g.region_offset, g.region_size});
  }
  return segs;
}

}  // namespace ina::cluster
