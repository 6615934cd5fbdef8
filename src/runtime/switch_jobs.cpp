// The switch's control messages and its jobs' life: joins (admitted by
// schemes::Admission), the start of a job at the switch program and the
// engine, its hot-set tables (Zebra), its end.
#include <variant>

#include "runtime/switch_impl.hpp"

namespace ina::rt {

using schemes::Admission;
using switchd::kCpuId;
using switchd::kSwitchId;
using switchd::on_shard;

void SwitchDaemon::Impl::handle(Conn& c, const nlohmann::json& m) {
  const ControlRequest req = parse_control_request(m);
  if (const auto* j = std::get_if<JoinRequest>(&req)) return join(c, *j);
  if (std::holds_alternative<DoneRequest>(req)) {
    if (!c.job || c.role != Role::Worker || !live(*c.job))
      throw RuntimeError("'done' from a connection that is not a worker of a live job");
    if (!c.done) {
      c.done = true;
      if (++c.job->done == c.job->workers.size()) finish_job(*c.job);
    }
    return;
  }
  if (const auto* h = std::get_if<HotSetRequest>(&req)) return hot_set(c, *h);
  if (const auto* rq = std::get_if<ReconfigureRequest>(&req)) return reconfigure(c, *rq);
  const auto& q = std::get<StatsRequest>(req);
  // No proof: the switch's shape only, nothing that names or counts a job.
  // A job's proof: also that job's state. The switch key's (job 0): everything.
  nlohmann::json s;
  if (!q.with_proof) {
    s = public_stats();
  } else {
    const Key k = q.job == 0 ? cfg.key : job_key(cfg.key, q.job);
    if (!proof_matches(q.proof, proof(k, stats_message(c.nonce, q.job)))) {
      ++auth_failures;
      throw RuntimeError(fmt::format("stats: the proof for {} is wrong",
                                     q.job == 0 ? std::string("the operator") : fmt::format("job {}", q.job)));
    }
    s = q.job == 0 ? stats() : job_stats(q.job);
  }
  s["op"] = "stats";
  send(c, s);
}

void SwitchDaemon::Impl::finish_job(Job& j) {
  ++jobs_finished;
  log("job {} finished after {:.3f} s", j.id, to_ms(engine->now() - admission->job(j.id)->since) / 1000);
  for (Conn* c : j.members()) send(*c, {{"op", "finish"}});
  teardown(j);
}

void SwitchDaemon::Impl::abort_job(Job& j, const std::string& why, Conn* cause) {
  ++jobs_aborted;
  log("job {} aborted: {}", j.id, why);
  for (Conn* c : j.members())
    if (c != cause) send(*c, {{"op", "abort"}, {"message", why}});
  teardown(j);
}

void SwitchDaemon::Impl::join(Conn& c, const JoinRequest& r) {
  if (c.job) throw RuntimeError("this connection has already joined a job");
  if (layout) throw RuntimeError(fmt::format("this switch serves the static ring job {} of {}: no joins", layout->job, cfg.layout));
  const auto job_id = r.job;
  const unsigned n = r.nworkers, rank = r.rank;
  const uint64_t payload = r.payload;
  const bool worker = r.role == Role::Worker;
  const size_t retain = r.retain_ops;
  // The credential: proof of job_key(job) over this connection's nonce and every field.
  const std::string want =
      proof(job_key(cfg.key, job_id), join_message(c.nonce, to_string(r.role), job_id, rank, n, payload, retain, r.udp));
  if (!proof_matches(r.proof, want)) {
    ++auth_failures;
    throw RuntimeError(fmt::format("join: authentication failed for job {}: the proof does not match that job's "
                                   "credential (INA_JOB_KEY)", job_id));
  }
  Endpoint udp;
  try {
    udp = Endpoint::parse(r.udp);
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("join: field 'udp': {}", e.what()));
  }
  if (udp.is_wildcard()) udp = c.peer.with_port(udp.port());
  // The data address must be the member's own: the control connection's
  // host, a real port, and used by no other member (else a member could make
  // the switch send another job's member, or anyone, its results).
  if (udp.port() == 0) throw RuntimeError("join: field 'udp': port 0 is not an address datagrams can reach");
  if (udp.sa.sin_addr.s_addr != c.peer.sa.sin_addr.s_addr)
    throw RuntimeError(fmt::format("join: field 'udp': {} is not on this connection's host {}", udp.str(), c.peer.ip()));
  for (const auto& [fd, other] : conns)
    if (other.get() != &c && other->job && other->udp == udp)
      throw RuntimeError(fmt::format("join: field 'udp': {} is already another member's address", udp.str()));
  const Admission::JoinAnswer answer = admission->join({job_id, !worker, rank, n, payload, retain}, engine->now());
  if (const auto* no = std::get_if<Admission::Refusal>(&answer)) throw RuntimeError(no->reason);
  auto it = jobs.find(job_id);
  if (it == jobs.end()) {
    auto j = std::make_unique<Job>();
    j->id = job_id;
    j->workers.assign(n, nullptr);
    it = jobs.emplace(job_id, std::move(j)).first;
  }
  Job& j = *it->second;
  if (worker) j.workers[rank] = &c;
  else j.ps = &c;
  c.job = &j;
  c.role = worker ? Role::Worker : Role::Ps;
  c.rank = rank;
  c.udp = udp;
  if (const auto* w = std::get_if<Admission::Waiting>(&answer)) {
    for (Conn* mbr : j.members())
      send(*mbr, {{"op", "waiting"}, {"workers_joined", w->workers_joined}, {"nworkers", w->nworkers},
                  {"ps_joined", w->ps_joined}, {"ps_needed", w->ps_needed}});
    return;
  }
  if (const auto* no = std::get_if<Admission::JobRefused>(&answer)) {
    for (Conn* m : j.members()) {
      m->job = nullptr;
      reject(*m, no->reason);
    }
    jobs.erase(job_id);
    return;
  }
  go_live(j, std::get<Admission::Grant>(answer));
}

// A member of a job that has not started leaves.
void SwitchDaemon::Impl::leave_pending(Job& j, Conn& c) {
  if (c.role == Role::Worker) j.workers[c.rank] = nullptr;
  else j.ps = nullptr;
  c.job = nullptr;
  admission->leave(j.id, c.role == Role::Ps, c.rank);
  if (!admission->job(j.id)) jobs.erase(j.id);
}

// The job's switch entry, datagram key, routes and result group on its
// shard; only when all went in do its members hear "ready". A failure gives
// back the ids and the region (no half-live job).
void SwitchDaemon::Impl::go_live(Job& j, const Admission::Grant& g) {
  Shard& sh = shard_of(j.id);
  const std::vector<Conn*> members = j.members();  // workers by rank, then the PS
  std::vector<NodeId> ids = g.workers;
  if (g.ps != kNoNode) ids.push_back(g.ps);
  dp::SwitchJob sj = g.switch_job();
  const Key salt = cfg.datagram_auth ? random_key() : Key{};  // this run's datagram key (datagram_tag.hpp)
  try {
    sj.zebra.cpu = cpu ? kCpuId : kNoNode;
    if (shared_pool()) {  // its admitted priority range, whatever its packets say
      const ShareLimits::Range r = cfg.share.range_of(j.id);
      sj.priority_min = r.lo;
      sj.priority_max = r.hi;
    }
    on_shard(sh, [&] {
      sh.program->add_job(sj);
      if (cfg.datagram_auth) sh.engine->set_datagram_key(j.id, datagram_key(job_key(cfg.key, j.id), salt));
      for (size_t k = 0; k < members.size(); ++k) sh.engine->set_route(ids[k], members[k]->udp);
      sh.engine->set_group(j.id, sj.workers);  // results: one encoding for every worker
    });
  } catch (...) {
    admission->revoke(j.id);
    throw;
  }
  for (size_t k = 0; k < members.size(); ++k) members[k]->id = ids[k];
  // The CPU's result copies go to the PS (kv::HotRoute::ViaPs, the paper's) or to the workers.
  if (cpu) cpu->add_job(j.id, cfg.program.zebra.hot_results == kv::HotRoute::ViaPs ? std::vector<NodeId>{g.ps} : sj.workers);
  nlohmann::json ready = {{"op", "ready"}, {"job", j.id}, {"switch", kSwitchId},
                          {"ps", j.ps ? int{j.ps->id} : -1}, {"workers", sj.workers},
                          {"payload", cfg.program.payload_values}, {"window_cap", g.window_cap},
                          {"policy", scheme.policy}, {"scheme", scheme.name}};
  if (cfg.datagram_auth) {  // members tag their datagrams (datagram_tag.hpp)
    ready["datagram_auth"] = true;
    ready["datagram_salt"] = to_hex(salt);
  }
  if (scheme.kv())
    ready["kv"] = {{"pairs", cfg.program.zebra.kv_pairs}, {"ps_pairs", cfg.kv_ps_pairs}, {"ack_every", cfg.kv_ack_every},
                   {"hot_results", kv::to_string(cfg.program.zebra.hot_results)}, {"registers", cfg.kv_registers},
                   {"table_entries", cfg.program.zebra.kv_table_entries}, {"value_registers", cfg.program.memory_bytes / 4}};
  for (Conn* c : j.members()) {
    ready["self"] = c->id;
    send(*c, ready);
  }
  log("job {} started: {} workers{}{}", j.id, j.workers.size(), j.ps ? ", PS" : "",
      g.region >= 0 ? fmt::format(", region {} ({} aggregators)", g.region, g.region_size) : "");
}

// Frees everything the job held: aggregators, routes, node ids, region.
void SwitchDaemon::Impl::teardown(Job& j) {
  Shard& sh = shard_of(j.id);
  const std::vector<Conn*> members = j.members();
  freed_at_teardown += on_shard(sh, [&] {
    const size_t freed = sh.program->remove_job(j.id);
    sh.engine->clear_group(j.id);
    sh.engine->clear_datagram_key(j.id);
    if (cpu) sh.engine->invoke(*cpu, [&](Time, Effects& fx) { cpu_copies_freed_at_teardown += cpu->remove_job(j.id, fx); });
    for (Conn* c : members) sh.engine->clear_route(c->id);
    return freed;
  });
  for (Conn* c : members) c->job = nullptr;
  admission->release(j.id);
  jobs.erase(j.id);
}

// A worker's hot-set list (chunks in order). Once every worker's is in:
// equal lists are installed as the job's table from `from` on; otherwise,
// or if the program refuses it, every worker hears why and nothing changes.
void SwitchDaemon::Impl::hot_set(Conn& c, const HotSetRequest& r) {
  if (!c.job || c.role != Role::Worker || !live(*c.job))
    throw RuntimeError("'hot_set' from a connection that is not a worker of a live job");
  Job& j = *c.job;
  Admission::HotAnswer a = admission->hot_set(j.id, c.rank, {r.from, r.total, r.offset, r.keys});
  if (const auto* no = std::get_if<Admission::Refusal>(&a)) throw RuntimeError(no->reason);
  if (std::holds_alternative<Admission::HotPending>(a)) return;
  std::string error;
  uint32_t from = 0, version = 0;
  size_t keys = 0;
  if (auto* agreed = std::get_if<Admission::HotAgreed>(&a)) {
    from = agreed->from;
    keys = agreed->keys.size();
    try {
      Shard& sh = shard_of(j.id);
      dp::SparseTable t = dp::zebra::heat_table(std::move(agreed->keys), agreed->from, agreed->version, cfg.kv_registers);
      const auto hot = t.hot;
      on_shard(sh, [&] { sh.program->set_sparse_table(j.id, std::move(t)); });
      admission->installed(j.id, agreed->version);
      version = agreed->version;
      // The PS maps the switch's results back to keys (kv::HotRoute::ViaPs):
      // it gets the hot set before any worker may use it. A result that
      // still outruns it is left unacknowledged and sent again by the CPU.
      if (cfg.program.zebra.hot_results == kv::HotRoute::ViaPs && j.ps) {
        size_t o = 0;
        do send(*j.ps, installed_hot_set_chunk(from, version, hot->keys, o));
        while ((o += kHotSetChunk) < hot->keys.size());
      }
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
  } else {
    const auto& d = std::get<Admission::HotDisagreed>(a);
    from = d.from;
    keys = d.keys;
    error = d.reason;
  }
  nlohmann::json answer = {{"op", "hot_set"}, {"from", from}};
  if (error.empty()) answer["version"] = version;
  else answer["error"] = error;
  log("job {}: hot set of {} keys from iteration {}: {}", j.id, keys, from,
      error.empty() ? fmt::format("installed (version {})", version) : error);
  for (Conn* w : j.workers) send(*w, answer);
}

}  // namespace ina::rt
