// A switch that serves the one job of a static layout (runtime/ring_layout.hpp):
// a Rina ToR of a ring, or a level of ATP's aggregation tree over racks, and
// the ring job's reconfiguration after a failure.
#include <algorithm>

#include <fmt/ranges.h>

#include "host/rina_levels.hpp"
#include "runtime/switch_impl.hpp"

namespace ina::rt {

// What this switch needs of cfg.layout, read before any socket is bound.
void SwitchDaemon::Impl::check_static_layout(const RingLayout& L) const {
  if (schemes::lookup(L.scheme) != &scheme)
    throw InputError(fmt::format("layout {}: field 'scheme' = \"{}\": this switch runs {}", cfg.layout, L.scheme, scheme.name));
  const size_t R = L.racks.size();
  if (cfg.rack >= L.switch_count())
    throw InputError(fmt::format("--rack {}: the layout {} has racks 0..{}{}", cfg.rack, cfg.layout, R - 1,
                                 L.aggregation.empty() ? std::string()
                                                       : fmt::format(" and switches above racks {}..{} (aggregation)", R,
                                                                     L.switch_count() - 1)));
  if (!L.serving_switch(cfg.rack))
    throw InputError(fmt::format("--rack {}: in the layout {} that rack's ToR does not aggregate (no INA, or one rank)",
                                 cfg.rack, cfg.layout));
  if (L.payload != cfg.program.payload_values)
    throw InputError(fmt::format("layout {}: field 'payload' = {}: this switch carries {} values per packet", cfg.layout,
                                 L.payload, cfg.program.payload_values));
  if (L.region() > program->aggregators())
    throw InputError(fmt::format("layout {}: field 'memory_bytes' = {}: more than this switch's {} bytes", cfg.layout,
                                 L.memory_bytes, cfg.program.memory_bytes));
  if (L.tree()) {  // the ToRs it relays to (tree_job)
    for (size_t o : L.relay_racks(cfg.rack))
      if (!L.racks[o].sw)
        throw InputError(fmt::format("layout {}: racks[{}].switch is null: the ToR of rack {} needs the address of "
                                     "every other INA rack's ToR", cfg.layout, o, cfg.rack));
    return;
  }
  for (size_t q = 0; q < L.switch_count(); ++q)
    if (q != cfg.rack && L.serving_switch(q) && !L.switch_addr(q))
      throw InputError(fmt::format("layout {}: {}.switch is null: the switch {} needs the address of every other INA "
                                   "switch of the job", cfg.layout,
                                   q < R ? fmt::format("racks[{}]", q) : fmt::format("aggregation[{}]", q - R), cfg.rack));
}

// The ring job of cfg.layout (check_static_layout() passed), registered for good (ring_layout.hpp).
void SwitchDaemon::Impl::static_job(RingLayout L) {
  program->set_id(L.switch_id(cfg.rack));
  if (L.datagram_salt)  // both directions, the other ToRs' datagrams too: one key per run of the job
    for (auto& sh : shards) sh->engine->set_datagram_key(L.job, datagram_key(job_key(cfg.key, L.job), *L.datagram_salt));
  if (cfg.port_gbps > 0 && cfg.rack < L.racks.size())
    for (auto& sh : shards) {
      for (const uint16_t r : L.racks[cfg.rack].ranks) sh->engine->set_egress_port(RingLayout::worker_id(r), cfg.port_gbps);
      sh->engine->set_egress_default(cfg.uplink_gbps);
      sh->engine->set_egress_ecn(cfg.port_ecn_bytes);
    }
  if (L.tree()) return tree_job(std::move(L));
  dp::SwitchJob sj;
  sj.job = L.job;
  for (size_t r = 0; r < L.n(); ++r) {
    sj.workers.push_back(RingLayout::worker_id(r));
    engine->set_route(RingLayout::worker_id(r), L.workers[r]);
  }
  // A switch of a group above the ToR (a ToR below it, or the switch above)
  // takes its level's entry (host/rina_levels.hpp, as the simulator); a
  // rack's own ToR its rack.
  const host::RinaLevel* level = nullptr;
  const std::vector<host::RinaGroupTree> groups = L.rina_groups();
  for (const auto& t : groups)
    for (const auto& l : t.levels)
      if (l.sw == L.switch_id(cfg.rack)) level = &l;
  if (level) {
    host::rina_level_job(*level, L.plan(1), sj);
  } else {
    sj.rina.rack = L.racks[cfg.rack].ranks;
    sj.rina.upstream = host::upstream_of(L.plan(1)[sj.rina.rack.at(0)], sj.rina.rack.at(0));  // who sends AllGather shards here
  }
  sj.region_offset = 0;
  sj.region_size = L.region();
  try {
    program->add_job(sj);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("layout {}: {}", cfg.layout, e.what()));
  }
  for (size_t q = 0; q < L.switch_count(); ++q)
    if (q != cfg.rack && L.serving_switch(q)) {
      program->add_peer(L.switch_id(q));
      // The agent's AllGather broadcast goes on to the next group's switch with the agent's id.
      engine->set_route(L.switch_id(q), *L.switch_addr(q));
      engine->add_relay(*L.switch_addr(q));
    }
  layout = std::move(L);
}

// ATP over racks (ring_layout.hpp): this ToR's level of the aggregation
// tree, every other INA ToR a peer, routes toward each node's rack; GRID's
// plan: this switch's planned ranks, under the PS, every node addressed directly.
void SwitchDaemon::Impl::tree_job(RingLayout L) {
  const size_t q = cfg.rack;
  const std::vector<size_t> relays = L.relay_racks(q);
  const RingLayout::TreeJob t = L.tree_job(q);
  dp::SwitchJob sj;
  sj.job = L.job;
  for (size_t r = 0; r < L.n(); ++r) sj.workers.push_back(RingLayout::worker_id(r));
  sj.ps = L.ps_id();
  sj.parent = t.parent;
  sj.agg_mask = t.agg_mask;
  sj.direct_mask = t.direct_mask;
  sj.children = t.children;
  try {
    program->add_job(sj);
    for (size_t o : relays) program->add_peer(L.tor_id(o));
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("layout {}: {}", cfg.layout, e.what()));
  }
  for (size_t r = 0; r < L.n(); ++r) engine->set_route(RingLayout::worker_id(r), L.tree_route(q, RingLayout::worker_id(r)));
  engine->set_route(L.ps_id(), L.tree_route(q, L.ps_id()));
  for (size_t o : relays) {
    engine->set_route(L.tor_id(o), *L.racks[o].sw);
    engine->add_relay(*L.racks[o].sw);  // it forwards its rack's packets (and the PS's) with their senders' ids
  }
  layout = std::move(L);
}

// A static ring job's new membership after a failure (Rina §IV-C), from
// the job's control node (the lowest surviving rank) with the job's key:
// the job is registered again under the new epoch (aggregators of the old
// one are freed; its packets are stale from now on).
void SwitchDaemon::Impl::reconfigure(Conn& c, const ReconfigureRequest& r) {
  if (!layout || layout->tree())
    throw RuntimeError("reconfigure: this switch serves no static ring job (ina switch --layout FILE of a ring scheme)");
  // The proof first: a caller without the job's key learns nothing about this switch's job.
  if (!proof_matches(r.proof, proof(job_key(cfg.key, r.job),
                                    reconfigure_message(c.nonce, r.job, r.epoch, r.workers, r.rack, r.upstream)))) {
    ++auth_failures;
    throw RuntimeError("reconfigure: authentication failed");
  }
  if (r.job != layout->job)
    throw RuntimeError(fmt::format("reconfigure: field 'job' = {}: this switch serves job {}", r.job, layout->job));
  if (!layout->aggregation.empty())
    throw RuntimeError(fmt::format("reconfigure: the layout {} has INA switches above the ToR (field 'aggregation'): a "
                                   "failure is not handled there (its group's levels would need re-planning, as in the "
                                   "simulator, which refuses it too)", cfg.layout));
  const dp::SwitchJob* old = program->job(layout->job);
  if (!old) throw RuntimeError(fmt::format("reconfigure: job {} is not registered", layout->job));
  const std::vector<NodeId> workers(r.workers.begin(), r.workers.end());
  if (r.epoch == epoch && epoch > 0) {
    // Asked again (a control node's retry, or the next control node's after
    // it failed between the ToRs and the membership file): the same job
    // definition is a success; a different one is refused by field.
    const char* differs = old->workers != workers ? "workers" : old->rina.rack != r.rack ? "rack"
                          : old->rina.upstream != r.upstream ? "upstream" : nullptr;
    if (differs)
      throw RuntimeError(fmt::format("reconfigure: field '{}' differs from epoch {}'s registration of job {}", differs,
                                     epoch, r.job));
    send(c, {{"op", "reconfigured"}, {"job", r.job}, {"epoch", r.epoch}, {"aggregates", !r.rack.empty()}});
    return;
  }
  if (r.epoch < epoch)
    throw RuntimeError(fmt::format("reconfigure: field 'epoch' = {}: job {} is already at epoch {}", r.epoch, r.job, epoch));
  if (r.workers.size() < 2)
    throw RuntimeError(fmt::format("reconfigure: field 'workers' has {} entries: a ring needs two", r.workers.size()));
  for (size_t k = 0; k < r.workers.size(); ++k) {
    const NodeId id = r.workers[k];
    if (id < RingLayout::worker_id(0) || id > RingLayout::worker_id(layout->n() - 1) ||
        std::find(r.workers.begin(), r.workers.begin() + static_cast<std::ptrdiff_t>(k), id) != r.workers.begin() + static_cast<std::ptrdiff_t>(k))
      throw RuntimeError(fmt::format("reconfigure: field 'workers': node {} is not a distinct worker of the layout {}", id,
                                     cfg.layout));
  }
  for (const auto* v : {&r.rack, &r.upstream})
    for (uint16_t x : *v)
      if (x >= r.workers.size())
        throw RuntimeError(fmt::format("reconfigure: field '{}': rank {} is beyond the {} workers",
                                       v == &r.rack ? "rack" : "upstream", x, r.workers.size()));
  const dp::SwitchJob sj = dp::ring_job_at_epoch(*old, workers, static_cast<uint8_t>(r.epoch), r.rack, r.upstream);
  try {
    freed_at_reconfigure += program->replace_job(sj);  // checked before the live job is touched
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(fmt::format("reconfigure: field 'rack' = [{}], 'upstream' = [{}]: {}", fmt::join(r.rack, ", "),
                                   fmt::join(r.upstream, ", "), e.what()));
  }
  epoch = sj.rina.epoch;
  completed_at_epoch = program->stats().completed;
  log("job {}: epoch {}: {} workers, {}", r.job, r.epoch, r.workers.size(),
      r.rack.empty() ? std::string("no rack here (only forwarding)") : fmt::format("rack of {} ranks", r.rack.size()));
  send(c, {{"op", "reconfigured"}, {"job", r.job}, {"epoch", r.epoch}, {"aggregates", !r.rack.empty()}});
}

}  // namespace ina::rt
