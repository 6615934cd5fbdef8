#include "schemes/admission.hpp"

#include <fmt/format.h>

#include "schemes/registry.hpp"

namespace ina::schemes {

const char* to_string(Memory m) {
  switch (m) {
    case Memory::Pool: return "pool";
    case Memory::Regions: return "regions";
    case Memory::Segments: return "segments";
  }
  return "?";
}

Memory memory_of(const Scheme& s) {
  if (s.isolated) return Memory::Regions;
  if (s.segments) return Memory::Segments;
  return Memory::Pool;
}

Memory memory_of(const Scheme& s, dp::PoolAddressing pool) {
  return pool == dp::PoolAddressing::Contiguous && shares_pool(s) ? Memory::Regions : memory_of(s);
}

bool shares_pool(const Scheme& s) {
  return s.factory && memory_of(s) == Memory::Pool && !s.routed && s.sparse == Sparse::None &&
         s.collective != Collective::RingIna;
}

Admission::Config Admission::config_of(const Scheme& s, size_t aggregators, unsigned regions, unsigned shards,
                                       dp::PoolAddressing pool) {
  Config c;
  c.memory = memory_of(s, pool);
  c.aggregators = aggregators;
  c.shards = shards;
  c.regions = regions;
  c.pools = s.isolated ? 2 : 1;  // isolated slots keep a shadow copy (two pools); a contiguous pool's do not
  c.has_ps = s.has_ps;
  c.scheme = s.name;
  c.policy = s.policy;
  c.hot_sets = s.sparse == Sparse::HotIna;
  return c;
}

Admission::Admission(Config cfg) : cfg_(std::move(cfg)) {
  if (cfg_.shards == 0) cfg_.shards = 1;
  if (cfg_.pools == 0) cfg_.pools = 1;
  if (cfg_.memory != Memory::Pool && cfg_.regions > 0) {
    const auto part = static_cast<uint32_t>(cfg_.aggregators / cfg_.regions);
    region_size_ = part / cfg_.pools * cfg_.pools;
  }
  region_used_.assign(cfg_.shards, std::vector<bool>(cfg_.memory == Memory::Regions ? cfg_.regions : 0, false));
  admitted_.assign(cfg_.shards, 0);
  id_used_.assign(kMulticast, false);
  for (NodeId id : cfg_.reserved)
    if (id < kMulticast) id_used_[id] = true;
}

std::string Admission::memory_error() const {
  if (cfg_.memory == Memory::Pool || (region_size_ > 0 && region_size_ >= cfg_.pools)) return {};
  const char* per = cfg_.shards > 1 ? " per switch thread" : "";
  if (cfg_.memory == Memory::Segments)
    return fmt::format("{} aggregators{} cannot give each of {} jobs a segment", cfg_.aggregators, per, cfg_.regions);
  return fmt::format("{} aggregators{} cannot be split into {} isolated regions", cfg_.aggregators, per, cfg_.regions);
}

uint32_t Admission::window_cap() const { return cfg_.memory == Memory::Regions ? region_size_ / cfg_.pools : 0; }

dp::SwitchJob Admission::Grant::switch_job() const {
  dp::SwitchJob sj;
  sj.job = job;
  sj.workers = workers;
  sj.ps = ps;
  sj.region_offset = region_offset;
  sj.region_size = region_size;
  return sj;
}

unsigned Admission::JobState::workers_joined() const {
  unsigned n = 0;
  for (bool w : workers) n += w;
  return n;
}

std::variant<int, Admission::Refusal> Admission::take_region(uint16_t job) {
  if (cfg_.memory != Memory::Regions) return -1;
  if (const std::string e = memory_error(); !e.empty()) return Refusal{e};
  const unsigned shard = shard_of(job);
  std::vector<bool>& used = region_used_[shard];
  for (size_t r = 0; r < used.size(); ++r)
    if (!used[r]) {
      used[r] = true;
      return static_cast<int>(r);
    }
  if (cfg_.shards == 1)
    return Refusal{fmt::format("job {}: no free aggregator region (the {} policy serves at most {} jobs at once on this "
                               "switch)", job, cfg_.policy, used.size())};
  return Refusal{fmt::format("job {}: no free aggregator region (the {} policy serves at most {} jobs at once on each "
                             "switch thread; job {} is served by thread {} of {}, with the jobs whose id is {} mod {})",
                             job, cfg_.policy, used.size(), job, shard, cfg_.shards, shard, cfg_.shards)};
}

Admission::Grant Admission::grant_of(uint16_t job, int region) const {
  Grant g;
  g.job = job;
  g.shard = shard_of(job);
  g.region = region;
  if (region >= 0) {
    g.region_offset = static_cast<uint32_t>(region) * region_size_;
    g.region_size = region_size_;
  }
  g.window_cap = window_cap();
  return g;
}

void Admission::give_back(const Grant& g) {
  for (NodeId id : g.workers) id_used_[id] = false;
  if (g.ps != kNoNode) id_used_[g.ps] = false;
  if (g.region >= 0) region_used_[g.shard][static_cast<size_t>(g.region)] = false;
}

std::optional<NodeId> Admission::alloc_id() {
  for (size_t k = 0; k < id_used_.size(); ++k) {
    const NodeId id = next_id_;
    next_id_ = static_cast<NodeId>(next_id_ + 1 >= kMulticast ? 1 : next_id_ + 1);
    if (!id_used_[id]) {
      id_used_[id] = true;
      return id;
    }
  }
  return std::nullopt;
}

std::variant<Admission::Grant, Admission::Refusal> Admission::admit(const JobRequest& r) {
  if (jobs_.count(r.job)) return Refusal{fmt::format("job {} is already admitted", r.job)};
  if (r.segment && cfg_.memory != Memory::Segments)
    return Refusal{fmt::format("job {}: the {} policy gives its jobs no segments", r.job, cfg_.policy)};
  Grant g;
  if (cfg_.memory == Memory::Segments) {
    g = grant_of(r.job, -1);
    if (r.segment) {
      g.region_offset = r.segment->mem_id;
      g.region_size = r.segment->size;
    } else {
      if (const std::string e = memory_error(); !e.empty()) return Refusal{e};
      g.region_offset = admitted_[g.shard] * region_size_;
      g.region_size = region_size_;
    }
  } else {
    auto region = take_region(r.job);
    if (auto* no = std::get_if<Refusal>(&region)) return *no;
    g = grant_of(r.job, std::get<int>(region));
  }
  ++admitted_[g.shard];
  g.workers = r.workers;
  g.ps = r.ps;
  JobState& s = jobs_[r.job];
  s.nworkers = static_cast<unsigned>(r.workers.size());
  s.workers.assign(s.nworkers, true);
  s.ps = r.ps != kNoNode;
  s.live = true;
  s.hot.assign(s.nworkers, std::nullopt);
  s.grant = g;
  return g;
}

Admission::JoinAnswer Admission::join(const Join& m, Time now) {
  if (m.payload != 0 && m.payload != cfg_.payload)
    return Refusal{fmt::format("payload mismatch: this switch carries {} values per packet, the member asked for {}",
                               cfg_.payload, m.payload)};
  if (m.ps && !cfg_.has_ps)
    return Refusal{fmt::format("job {}: this switch runs the {} policy, whose jobs have no PS", m.job, cfg_.policy)};
  auto it = jobs_.find(m.job);
  if (it != jobs_.end() && it->second.live)
    return Refusal{fmt::format("job {} is already running on this switch ({} workers, for {:.1f} s); a second job must "
                               "use another job id", m.job, it->second.nworkers, to_ms(now - it->second.since) / 1000)};
  if (it != jobs_.end() && m.nworkers != it->second.nworkers)
    return Refusal{fmt::format("wrong worker count: job {} has {} workers, this member says {}", m.job,
                               it->second.nworkers, m.nworkers)};
  if (!m.ps && m.rank >= m.nworkers)
    return Refusal{fmt::format("rank {} of job {}: the job has {} workers", m.rank, m.job, m.nworkers)};
  if (it != jobs_.end()) {
    const JobState& s = it->second;
    if (!m.ps && s.workers[m.rank]) return Refusal{fmt::format("rank {} of job {} has already joined", m.rank, m.job)};
    if (!m.ps && s.retain_ops && m.retain_ops != s.retain_ops)
      return Refusal{fmt::format("job {}: retain_ops {} differs from the other workers' {}", m.job, m.retain_ops,
                                 s.retain_ops)};
    if (m.ps && s.ps) return Refusal{fmt::format("job {} already has a PS", m.job)};
  } else {
    JobState s;
    s.nworkers = m.nworkers;
    s.workers.assign(m.nworkers, false);
    s.since = now;
    it = jobs_.emplace(m.job, std::move(s)).first;
  }
  JobState& s = it->second;
  if (m.ps) {
    s.ps = true;
  } else {
    s.retain_ops = m.retain_ops;
    s.workers[m.rank] = true;
  }
  const unsigned wj = s.workers_joined();
  if (wj < s.nworkers || (cfg_.has_ps && !s.ps)) return Waiting{wj, s.nworkers, s.ps, cfg_.has_ps};

  // Complete: a region, then node ids (workers by rank, then the PS).
  auto region = take_region(m.job);
  if (auto* no = std::get_if<Refusal>(&region)) {
    JobRefused out{no->reason};
    jobs_.erase(it);
    return out;
  }
  Grant g = grant_of(m.job, std::get<int>(region));
  const size_t members = s.nworkers + (s.ps ? 1 : 0);
  for (size_t k = 0; k < members; ++k) {
    const auto id = alloc_id();
    if (!id) {
      give_back(g);
      if (m.ps) s.ps = false;
      else s.workers[m.rank] = false;
      if (!s.ps && s.workers_joined() == 0) jobs_.erase(it);
      return Refusal{"switch: no free node id"};
    }
    if (k < s.nworkers) g.workers.push_back(*id);
    else g.ps = *id;
  }
  s.live = true;
  s.since = now;
  s.hot.assign(s.nworkers, std::nullopt);
  s.grant = g;
  return g;
}

void Admission::leave(uint16_t job, bool ps, unsigned rank) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.live) return;
  JobState& s = it->second;
  if (ps) s.ps = false;
  else if (rank < s.workers.size()) s.workers[rank] = false;
  if (!s.ps && s.workers_joined() == 0) jobs_.erase(it);
}

void Admission::revoke(uint16_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.grant) return;
  give_back(*it->second.grant);
  it->second.grant.reset();
  it->second.live = false;
}

void Admission::release(uint16_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (it->second.grant) give_back(*it->second.grant);
  jobs_.erase(it);
}

const Admission::JobState* Admission::job(uint16_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

Admission::HotAnswer Admission::hot_set(uint16_t job, unsigned rank, const HotChunk& r) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.live || rank >= it->second.nworkers)
    return Refusal{"'hot_set' from a connection that is not a worker of a live job"};
  if (!cfg_.hot_sets)
    return Refusal{fmt::format("hot_set: this switch runs {}, which has no hot-set table", cfg_.scheme)};
  JobState& j = it->second;
  auto& slot = j.hot[rank];
  if (r.offset == 0) {
    if (slot)
      return Refusal{fmt::format("hot_set: worker rank {} began a new list before the switch answered its previous one",
                                 rank)};
    slot.emplace();
    slot->from = r.from;
    slot->total = r.total;
    slot->keys.reserve(r.total);
  } else if (!slot || slot->complete() || slot->from != r.from || slot->total != r.total ||
             slot->keys.size() != r.offset) {
    return Refusal{fmt::format("hot_set: chunk at offset {} of worker rank {} does not continue its list", r.offset,
                               rank)};
  }
  slot->keys.insert(slot->keys.end(), r.keys.begin(), r.keys.end());
  for (const auto& h : j.hot)
    if (!h || !h->complete()) return HotPending{};
  JobState::HotList& first = *j.hot[0];
  HotAnswer out = HotPending{};
  for (size_t k = 1; k < j.hot.size(); ++k)
    if (j.hot[k]->from != first.from || j.hot[k]->keys != first.keys) {
      out = HotDisagreed{first.from, first.keys.size(),
                         fmt::format("the hot-set lists differ: worker rank {} sent {} keys from iteration {}, rank 0 "
                                     "{} keys from iteration {}", k, j.hot[k]->keys.size(), j.hot[k]->from,
                                     first.keys.size(), first.from)};
      break;
    }
  if (std::holds_alternative<HotPending>(out)) out = HotAgreed{first.from, j.hot_version + 1, std::move(first.keys)};
  for (auto& h : j.hot) h.reset();
  return out;
}

void Admission::installed(uint16_t job, uint32_t version) {
  if (auto it = jobs_.find(job); it != jobs_.end()) it->second.hot_version = version;
}

}  // namespace ina::schemes
