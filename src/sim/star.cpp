#include "sim/star.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace ina::sim {

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

uint32_t register_jobs(dp::SwitchProgram& sw, const StarPlan& plan, bool isolated) {
  uint32_t region = 0;
  if (isolated) {
    region = static_cast<uint32_t>(sw.aggregators() / plan.jobs.size()) & ~1u;
    if (region < 2) throw std::invalid_argument("switch memory too small to isolate a region per job");
  }
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    dp::SwitchJob sj;
    sj.job = plan.jobs[j].id;
    sj.workers = plan.jobs[j].workers;
    sj.ps = plan.jobs[j].ps;
    if (isolated) {
      sj.region_offset = static_cast<uint32_t>(j) * region;
      sj.region_size = region;
    }
    sw.add_job(sj);
  }
  return region / 2;
}

std::vector<Segment> equal_segments(size_t aggregators, size_t jobs) {
  std::vector<Segment> out;
  if (jobs == 0) return out;
  const auto size = static_cast<uint32_t>(aggregators / jobs);
  if (size == 0)
    throw std::invalid_argument(fmt::format("{} aggregators cannot give each of {} jobs a segment", aggregators, jobs));
  for (size_t j = 0; j < jobs; ++j) out.push_back({static_cast<uint32_t>(j) * size, size});
  return out;
}

std::vector<Segment> register_segments(dp::SwitchProgram& sw, const StarPlan& plan, const std::vector<Segment>& given) {
  if (!given.empty() && given.size() != plan.jobs.size())
    throw std::invalid_argument(fmt::format("{} segments for {} jobs", given.size(), plan.jobs.size()));
  std::vector<Segment> segs = given.empty() ? equal_segments(sw.aggregators(), plan.jobs.size()) : given;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    dp::SwitchJob sj;
    sj.job = plan.jobs[j].id;
    sj.workers = plan.jobs[j].workers;
    sj.ps = plan.jobs[j].ps;
    sj.region_offset = segs[j].mem_id;
    sj.region_size = segs[j].size;
    sw.add_job(sj);
  }
  return segs;
}

}  // namespace ina::sim
