#include "dataplane/switch.hpp"

#include "core/simd_clones.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "wire/quant.hpp"

namespace ina::dp {

SwitchProgram::SwitchProgram(const SwitchConfig& cfg, std::string_view scheme)
    : cfg_(cfg), scheme_(scheme), rng_(mix(cfg.seed, 0x5717c4)), width_(cfg.payload_values) {
  if (cfg.payload_values == 0) throw std::invalid_argument("switch: payload_values must be > 0");
  static_assert(Agg{}.key == 0 && !Agg{}.bitmap && Agg{}.ecn == 0 && Agg{}.count == 0 && Agg{}.owner == 0,
                "Agg's zero bytes are its default (Registers)");
  static_assert(sizeof(Agg) == 32, "a field added to Agg needs its zero default checked above");
  n_ = cfg.memory_bytes / (4ULL * cfg.payload_values);
  if (n_ == 0) throw std::invalid_argument("switch: memory smaller than one aggregator");
  aggs_.resize(n_);
  vals_.resize(n_ * width_);
  slot_.resize(n_);
  if (cfg.share.reclaim_after < 0) throw std::invalid_argument("switch: reclaim_after must be >= 0");
  if (cfg.share.reclaim_after > 0) born_.resize(n_);
}

uint32_t SwitchProgram::take_slot(uint32_t i, bool zero) {
  uint32_t s;
  if (!free_slots_.empty()) {
    s = free_slots_.back();
    free_slots_.pop_back();
    if (zero) std::memset(slot_values(s), 0, 4u * width_);
  } else {
    s = ++used_slots_;
  }
  slot_[i] = s;
  return s;
}

void SwitchProgram::host_sparse_in_pool() {
  if (cfg_.zebra.kv_pool) kv_ = make_kv_pipeline(*this, true);
}

void SwitchProgram::on_timer(uint64_t, Time now, Effects& fx) {
  if (kv_) kv_->on_timer(now, fx);
}


bool SwitchProgram::pinned_by_kv(uint32_t i) const { return kv_->has_table(static_cast<uint16_t>(aggs_[i].key >> 32)); }

size_t SwitchProgram::pinned() const {
  size_t c = 0;
  for (uint32_t i = 0; i < n_; ++i) c += is_pinned(i);
  return c;
}

void SwitchProgram::check_job(const SwitchJob& j) const {
  if (j.ps == kNoNode)
    throw std::invalid_argument(fmt::format("switch: job {} needs a PS under the {} scheme", j.job, scheme_));
}

void SwitchProgram::add_job(const SwitchJob& j) {
  if (j.job < jobs_.size() && jobs_[j.job]) throw std::invalid_argument(fmt::format("switch: job {} already registered", j.job));
  validate_job(j);
  if (jobs_.size() <= j.job) jobs_.resize(j.job + 1);
  jobs_[j.job] = registered(j);
  if (held_.size() <= j.job) held_.resize(j.job + 1, 0);
  ++njobs_;
}

std::unique_ptr<SwitchJob> SwitchProgram::registered(const SwitchJob& j) {
  auto r = std::make_unique<SwitchJob>(j);
  r->all_ranks = full_bitmap(static_cast<unsigned>(j.workers.size()));
  r->owes = j.parent != kNoNode ? j.agg_mask : r->all_ranks;
  return r;
}

size_t SwitchProgram::replace_job(const SwitchJob& j) {
  validate_job(j);  // before anything of the registered job is touched
  const size_t freed = remove_job(j.job);
  if (jobs_.size() <= j.job) jobs_.resize(j.job + 1);
  jobs_[j.job] = registered(j);
  if (held_.size() <= j.job) held_.resize(j.job + 1, 0);
  ++njobs_;
  return freed;
}

void SwitchProgram::validate_job(const SwitchJob& j) const {
  if (j.job == 0) throw std::invalid_argument("switch: job id 0 is reserved");
  if (j.workers.empty() || j.workers.size() > max_workers())
    throw std::invalid_argument(
        fmt::format("switch: job {} has {} workers (1..{})", j.job, j.workers.size(), max_workers()));
  for (NodeId w : j.workers)
    if (w == kNoNode || w == kMulticast || w == id())
      throw std::invalid_argument(fmt::format("switch: job {} has an invalid worker node id {}", j.job, w));
  if (j.parent != kNoNode) {
    const RankBits all = full_bitmap(static_cast<unsigned>(j.workers.size()));
    if (j.parent == kMulticast || j.parent == id())
      throw std::invalid_argument(fmt::format("switch: job {} has an invalid parent node id {}", j.job, j.parent));
    if (j.agg_mask == 0 || (j.agg_mask & ~all) || (j.direct_mask & ~j.agg_mask))
      throw std::invalid_argument(fmt::format("switch: job {} needs a subtree mask within its workers and holding its direct workers", j.job));
    for (NodeId c : j.children)
      if (c == kNoNode || c == kMulticast || c == id() || c == j.parent)
        throw std::invalid_argument(fmt::format("switch: job {} has an invalid child node id {}", j.job, c));
  }
  if (j.priority_min > j.priority_max)
    throw std::invalid_argument(fmt::format("switch: job {} has an empty priority range {}..{}", j.job,
                                            j.priority_min, j.priority_max));
  if (cfg_.pool == PoolAddressing::Contiguous) check_region(j, 1);  // index_of addresses the job's region only
  check_job(j);
}

void SwitchProgram::add_peer(NodeId sw) {
  if (sw == kNoNode || sw == kMulticast) throw std::invalid_argument(fmt::format("switch: invalid peer node id {}", sw));
  if (!is_peer(sw)) peers_.push_back(sw);
}

void SwitchProgram::on_ring(Packet* p, const SwitchJob&, Time, Effects& fx) {
  ++st_.malformed;
  fx.free(p);
}

void SwitchProgram::on_kv(Packet* p, const SwitchJob& j, Time now, Effects& fx) {
  if (kv_) return kv_->on_kv(p, j, now, fx);
  ++st_.malformed;
  fx.free(p);
}

void SwitchProgram::set_sparse_table(uint16_t job, SparseTable t) {
  if (!kv_)
    throw std::invalid_argument("scheme " + scheme_ +
                                " has no sparse (hot-set) table (a shared pool hosts sparse jobs with kv_pool)");
  const SwitchJob* j = job_of(job);
  if (!j) throw std::invalid_argument(fmt::format("{}: job {} is not registered", scheme_, job));
  kv_->set_table(*j, std::move(t));
}

void SwitchProgram::check_region(const SwitchJob& j, uint32_t min_size) const {
  if (j.region_size < min_size || static_cast<uint64_t>(j.region_offset) + j.region_size > n_)
    throw std::invalid_argument(fmt::format("switch: job {} region [{}, +{}) invalid for {} aggregators", j.job,
                                            j.region_offset, j.region_size, n_));
  for_each_job([&](const SwitchJob& o) {
    if (o.job == j.job) return;  // the job itself, replaced (replace_job)
    if (j.region_offset < o.region_offset + o.region_size && o.region_offset < j.region_offset + j.region_size)
      throw std::invalid_argument(fmt::format("switch: job {} region overlaps job {}", j.job, o.job));
  });
}

bool SwitchProgram::is_peer(NodeId n) const {
  for (NodeId p : peers_)
    if (p == n) return true;
  return false;
}

bool SwitchProgram::is_member(const SwitchJob& j, NodeId n) const {
  if (n == kNoNode) return false;
  if (n == j.ps) return true;
  for (NodeId w : j.workers)
    if (w == n) return true;
  return false;
}

size_t SwitchProgram::remove_job(uint16_t job) {
  size_t freed = 0;
  for (uint32_t i = 0; i < n_; ++i) {
    if (aggs_[i].key && job_holding(i) == job) { release(i); ++freed; }
    if (aggs_[i].owner == job) aggs_[i].owner = 0;  // a scheme that freed a key without release()
  }
  if (job < held_.size()) held_[job] = 0;
  if (job < jobs_.size() && jobs_[job]) {
    freed += on_remove(*jobs_[job]);
    if (kv_) freed += kv_->remove(*jobs_[job]);
    jobs_[job].reset();
    --njobs_;
  }
  return freed;
}

size_t SwitchProgram::occupied() const {
  size_t c = 0;
  for (const auto& a : aggs_) c += a.key != 0;
  return c + held_elsewhere() + (kv_ ? kv_->held() : 0);
}

size_t SwitchProgram::occupied_by(uint16_t job) const {
  size_t c = 0;
  for (uint32_t i = 0; i < n_; ++i) c += aggs_[i].key != 0 && job_holding(i) == job;
  return c;
}

uint32_t SwitchProgram::quota_of(uint16_t job) const {
  const SwitchJob* j = job_of(job);
  if (j && j->quota) return j->quota;
  if (cfg_.share.job_quota) return cfg_.share.job_quota;
  if (cfg_.share.fair_quota && njobs_) return static_cast<uint32_t>(std::max<size_t>(1, n_ / njobs_));
  return 0;
}

bool SwitchProgram::may_take(const SwitchJob& j, uint32_t i) const {
  if (aggs_[i].owner == j.job) return true;  // a swap within the job: its count stays
  const uint32_t q = quota_of(j.job);
  return q == 0 || held_[j.job] < q;
}

bool SwitchProgram::reclaimable(uint32_t i, const SwitchJob& j) const {
  const Agg& a = aggs_[i];
  if (a.key == 0 || is_pinned(i)) return false;
  if (!may_take(j, i)) return false;  // j could not use it: emptying it would only churn
  if (!born_.empty() && now_ - born_[i] >= cfg_.share.reclaim_after) return true;
  if (a.owner == 0 || a.owner == j.job) return false;
  const uint32_t q = quota_of(a.owner);
  return q != 0 && held_[a.owner] > q;
}

Packet* SwitchProgram::reclaim(uint32_t i, Effects& fx, const SwitchJob*& holder) {
  const Agg a = aggs_[i];
  ++st_.reclaimed;
  holder = job_of(static_cast<uint16_t>(a.key >> 32));
  if (!holder) {
    release(i);
    return nullptr;
  }
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::Data;
  p->h.job = holder->job;
  p->h.psn = static_cast<uint32_t>(a.key);
  p->h.nworkers = static_cast<uint8_t>(holder->workers.size());
  p->h.rank = static_cast<uint8_t>(a.bitmap ? a.bitmap.lowest() : 0);
  p->h.src = id();
  p->h.count = a.count;
  p->h.bitmap = a.bitmap;
  p->h.flags = a.ecn ? flag::kEcn : 0;
  std::memcpy(p->payload(), values(i), 4u * a.count);
  release(i);
  return p;
}

int64_t SwitchProgram::holder_of(uint16_t job, uint32_t psn) const {
  const uint64_t k = key_of(job, psn);
  for (size_t i = 0; i < n_; ++i)
    if (aggs_[i].key == k) return static_cast<int64_t>(i);
  return -1;
}

std::array<uint64_t, 3> SwitchProgram::task_types() const {
  std::array<uint64_t, 3> t{0, 0, 0};
  for (const auto& job : tasks_)
    for (uint8_t bits : job) {
      if (bits & task::kLost) ++t[2];
      else if (bits & task::kWon) ++t[1];
      else if (bits & task::kSeen) ++t[0];
    }
  return t;
}

int SwitchProgram::task_type(uint16_t job, uint32_t psn) const {
  if (job >= tasks_.size() || psn >= tasks_[job].size()) return 0;
  const uint8_t bits = tasks_[job][psn];
  if (bits & task::kLost) return 3;
  if (bits & task::kWon) return 2;
  return (bits & task::kSeen) ? 1 : 0;
}

const SwitchJob* SwitchProgram::job_of(uint16_t job) const { return job < jobs_.size() ? jobs_[job].get() : nullptr; }

uint32_t SwitchProgram::index_of(const SwitchJob& j, uint32_t psn) const {
  // Contiguous: the job's own region (validate_job checked it), PSN mod its size.
  if (cfg_.pool == PoolAddressing::Contiguous) return j.region_offset + psn % j.region_size;
  // Hash(JobID, PSN): stands in for the switch's CRC unit.
  return static_cast<uint32_t>(splitmix64(key_of(j.job, psn)) % n_);
}

inline bool SwitchProgram::valid_data(const Packet& p, const SwitchJob& j) const {
  const auto n = static_cast<unsigned>(j.workers.size());
  if (p.h.nworkers != n || p.h.rank >= n || p.h.count > width_ || p.h.count == 0) return false;
  if (p.h.bitmap == 0 || (p.h.bitmap & ~j.all_ranks)) return false;
  return true;
}

void SwitchProgram::mark(uint16_t job, uint32_t psn, uint8_t bits) {
  // Instrumentation only; a PSN beyond 2^24 (no simulated run gets there) is not tracked.
  if (!cfg_.track_tasks || psn >= (1u << 24)) return;
  if (tasks_.size() <= job) tasks_.resize(job + 1);
  auto& v = tasks_[job];
  if (v.size() <= psn) v.resize(std::max<size_t>(psn + 1, v.size() * 2), 0);
  v[psn] |= bits;
}

void SwitchProgram::set_meta(uint32_t i, const Packet& p) {
  Agg& a = aggs_[i];
  a.key = key_of(p.h.job, p.h.psn);
  if (a.owner != p.h.job) {  // the quota charge moves with the task
    if (a.owner) --held_[a.owner];
    a.owner = p.h.job;
    if (held_.size() <= a.owner) held_.resize(a.owner + 1, 0);
    ++held_[a.owner];
  }
  if (!born_.empty()) born_[i] = now_;
  a.bitmap = p.h.bitmap;
  a.ecn = p.h.has(flag::kEcn);
  a.count = p.h.count;
}

// Lanes of an aggregator beyond its count are kept zero: a later packet of
// the task with more values adds onto zeros, never onto what an earlier task
// (perhaps another job's) left in the registers.
void SwitchProgram::reserve(uint32_t i, const Packet& p) {
  set_meta(i, p);
  int32_t* v = values(i, false);  // every lane is written below
  copy_values(v, p.payload(), p.h.count);
  if (p.h.count < width_) std::memset(v + p.h.count, 0, 4u * (width_ - p.h.count));
  ++st_.aggregated;
  // A pool used in index order (SwitchML's region) reserves i + 1 next, a
  // whole pool after its last use: its lines come in while i aggregates.
  if (i + 1 < n_) {
    if (const uint32_t s = slot_[i + 1]) {
      const auto* c = reinterpret_cast<const char*>(slot_values(s));
      for (size_t off = 0; off < 4u * width_; off += 64) __builtin_prefetch(c + off, 1, 3);
    }
  }
}

namespace {
// Wrapping add; a lane overflowed iff both inputs differ in sign from the
// sum. All int32 lanes, so it vectorizes (fully, for the fixed-width case).
// Returns the OR of the per-lane overflow flags (bit 31 set = overflow).
template <size_t N>
inline uint32_t add_lanes(int32_t* v, const int32_t* x, size_t n) {
  const size_t len = N ? N : n;
  uint32_t ovf = 0;
  for (size_t k = 0; k < len; ++k) {
    const uint32_t a0 = static_cast<uint32_t>(v[k]), b0 = static_cast<uint32_t>(x[k]);
    const uint32_t r = a0 + b0;
    ovf |= (a0 ^ r) & (b0 ^ r);
    v[k] = static_cast<int32_t>(r);
  }
  return ovf;
}
}  // namespace

// The common 64-value payload (core/simd_clones.hpp). An aggregator's
// registers and a packet's payload never overlap: restrict spares the
// vectorized loop its overlap test.
INA_SIMD_CLONES uint32_t add_64_lanes(int32_t* __restrict v, const int32_t* __restrict x) {
  return add_lanes<64>(v, x, 64);
}
uint32_t add_some_lanes(int32_t* v, const int32_t* x, size_t n) { return add_lanes<0>(v, x, n); }

void SwitchProgram::saturate(int32_t* v, const int32_t* x, size_t n) {
  // The rare overflow is redone with saturation, as the switch's saturating
  // ALU would: the original value is the sum minus the input, mod 2^32.
  bool o = false;
  for (size_t k = 0; k < n; ++k)
    v[k] = sat_add(static_cast<int32_t>(static_cast<uint32_t>(v[k]) - static_cast<uint32_t>(x[k])), x[k], o);
  ++st_.overflow;
}

const SwitchJob* SwitchProgram::swap_with(uint32_t i, Packet& p) {
  Agg& a = aggs_[i];
  const Agg old = a;
  const uint16_t n = std::max(old.count, p.h.count);
  int32_t* v = values(i);
  int32_t* x = p.payload();
  for (uint16_t k = 0; k < n; ++k) std::swap(v[k], x[k]);
  // The packet's lanes beyond its count were never its own: zero them in the aggregator.
  std::memset(v + p.h.count, 0, 4u * (width_ - p.h.count));
  set_meta(i, p);
  const auto victim = static_cast<uint16_t>(old.key >> 32);
  const SwitchJob* vj = job_of(victim);
  p.h.job = victim;
  p.h.psn = static_cast<uint32_t>(old.key);
  p.h.bitmap = old.bitmap;
  p.h.priority = 0;
  p.h.count = old.count;
  p.h.nworkers = vj ? static_cast<uint8_t>(vj->workers.size()) : 0;
  p.h.rank = static_cast<uint8_t>(old.bitmap ? old.bitmap.lowest() : 0);
  p.h.src = id();
  p.h.flags = old.ecn ? flag::kEcn : 0;
  ++st_.aggregated;
  return vj;
}

void SwitchProgram::load_into(uint32_t i, Packet& p) {
  const Agg& a = aggs_[i];
  copy_values(p.payload(), values(i), a.count);
  p.h.src = id();  // the aggregate is the switch's packet now
  p.h.count = a.count;
  p.h.bitmap = a.bitmap;
  p.h.flags = static_cast<uint16_t>((p.h.flags & ~flag::kEcn) | (a.ecn ? flag::kEcn : 0));
}

void SwitchProgram::multicast_result(Packet* p, const SwitchJob& j, Effects& fx) {
  const bool ece = p->h.has(flag::kEcn) || p->h.has(flag::kEce);
  p->h.type = PktType::Ack;
  p->h.flags = static_cast<uint16_t>(flag::kResult | (ece ? flag::kEce : 0));
  p->h.bitmap = full_bitmap(static_cast<unsigned>(j.workers.size()));
  p->h.nworkers = static_cast<uint8_t>(j.workers.size());  // the job's, whatever the PS wrote
  p->h.src = id();
  st_.acks_multicast += j.workers.size();
  replicate(p, j, fx);
}

void SwitchProgram::replicate(Packet* p, const SwitchJob& j, Effects& fx) {
  p->h.dst = kMulticast;
  if (fx.multicast(p)) return;
  fx.send_copies(p, j.workers);
}

void SwitchProgram::send_to_ps(Packet* p, const SwitchJob& j, uint16_t flags, Effects& fx) {
  p->h.flags |= flags;
  p->h.dst = j.parent != kNoNode ? j.parent : j.ps;
  ++st_.to_ps;
  fx.send(p);
}

void SwitchProgram::handle_fetch(Packet* p, const SwitchJob& j, Effects& fx) {
  ++st_.fetches;
  p->h.type = PktType::FetchReply;
  p->h.nworkers = static_cast<uint8_t>(j.workers.size());
  p->h.dst = p->h.src;
  p->h.src = id();
  p->h.bitmap = 0;
  p->h.count = 0;
  p->h.flags = 0;
  const uint32_t i = index_of(j, p->h.psn);
  if (aggs_[i].key == key_of(p->h.job, p->h.psn)) {
    load_into(i, *p);
    p->h.flags |= flag::kPartial;
    release(i);
    ++st_.fetch_hits;
    fetched(i, key_of(p->h.job, p->h.psn), p->h.bitmap);
  }
  fx.send(p);
}

void SwitchProgram::release_for_result(const SwitchJob& j, uint32_t psn) {
  // The result passing by frees whatever the switch still holds for this
  // task: ATP's release-on-ack, and a stale partial under DSA.
  const uint32_t i = index_of(j, psn);
  const uint64_t key = key_of(j.job, psn);
  if (aggs_[i].key == key) { release(i); ++st_.released_by_ack; }
  result_passed(i, key);
}

void SwitchProgram::handle_ps_ack(Packet* p, const SwitchJob& j, Effects& fx) {
  release_for_result(j, p->h.psn);
  const bool ece = p->h.has(flag::kEce);
  p->h.flags = static_cast<uint16_t>(flag::kResult | (ece ? flag::kEce : 0));
  if (j.children.empty()) return multicast_result(p, j, fx);
  // A tree's root (its parent is the PS). The engine's multicast tree passes
  // the child switches, which free their aggregators as the copies go by (the
  // simulator); an engine without one (the runtime's racks) gets the result
  // down the aggregation tree instead, as a parent's result: a copy to each
  // child, the direct workers by unicast.
  p->h.type = PktType::Ack;
  p->h.bitmap = full_bitmap(static_cast<unsigned>(j.workers.size()));
  p->h.nworkers = static_cast<uint8_t>(j.workers.size());
  p->h.src = id();
  p->h.dst = kMulticast;
  if (fx.multicast(p)) {
    st_.acks_multicast += j.workers.size();
    return;
  }
  send_down(p, j, fx);
}

// Tree: the result, addressed to this switch by its parent. Frees the
// aggregator, then one copy goes to each child switch (addressed to it, so it
// frees its own) and one multicast to the direct workers (the engine's tree,
// restricted to them; unicast copies if the engine has none).
void SwitchProgram::handle_tree_result(Packet* p, const SwitchJob& j, Effects& fx) {
  ++st_.tree_results;
  release_for_result(j, p->h.psn);
  const bool ece = p->h.has(flag::kEcn) || p->h.has(flag::kEce);
  p->h.type = PktType::Ack;
  p->h.flags = static_cast<uint16_t>(flag::kResult | (ece ? flag::kEce : 0));
  p->h.bitmap = full_bitmap(static_cast<unsigned>(j.workers.size()));
  p->h.nworkers = static_cast<uint8_t>(j.workers.size());
  p->h.src = id();
  send_down(p, j, fx);
}

// p, this switch's result packet of tree job j: a copy addressed to each
// child switch, and a multicast to the direct workers (the engine's tree,
// restricted to them; unicast copies if the engine has none).
void SwitchProgram::send_down(Packet* p, const SwitchJob& j, Effects& fx) {
  auto copy = [&](NodeId dst) {
    Packet* c = fx.alloc();
    c->h = p->h;
    copy_values(c->payload(), p->payload(), p->h.count);
    c->h.dst = dst;
    fx.send(c);
  };
  for (NodeId c : j.children) copy(c);
  const RankBits direct = j.direct_mask;
  if (!direct) {
    fx.free(p);
    return;
  }
  st_.acks_multicast += static_cast<uint64_t>(direct.count());
  p->h.dst = kMulticast;
  p->mcast = direct;
  if (fx.multicast(p)) return;
  p->mcast = {};
  for (unsigned r = 0; r < j.workers.size(); ++r)
    if (direct.test(r)) copy(j.workers[r]);
  fx.free(p);
}

// Job isolation: every packet is checked against the job table before it can
// touch anything. A job's Data comes from its worker of the claimed rank, its
// Fetches from its PS, its result Acks from its PS (or a peer switch, down the multicast tree); a packet passing through comes from a
// member of its job (or another switch) and goes to a member of its job (or
// another switch). The engine vouches that a source node id is the sender
// (the UDP runtime binds each node id to the address that joined).
void SwitchProgram::on_packet(Packet* p, Time now, Effects& fx) {
  now_ = now;
  const SwitchJob* j = job_of(p->h.job);
  const NodeId src = p->h.src;
  auto drop = [&](uint64_t& counter) { ++counter; fx.free(p); };
  if (p->h.dst == id()) {
    if (is_ring(p->h.type)) {
      if (!j) return drop(st_.malformed);
      on_ring(p, *j, now, fx);
      return;
    }
    if (is_kv(p->h.type)) {
      if (!j) return drop(st_.malformed);
      on_kv(p, *j, now, fx);
      return;
    }
    if (p->h.type == PktType::Data) {
      if (!j || !valid_data(*p, *j)) return drop(st_.malformed);
      const bool own = j->workers[p->h.rank] == src && p->h.bitmap == RankBits::bit(p->h.rank);
      if (j->parent == kNoNode) {
        if (!own) return drop(st_.foreign_data);
      } else if ((!own && !is_peer(src)) || (p->h.bitmap & ~j->agg_mask)) {
        // Tree: a worker's own gradient or another switch's aggregate, of ranks below this switch.
        return drop(st_.foreign_data);
      }
      if (kv_ && kv_->has_table(j->job)) return drop(st_.malformed);  // a sparse job sends KV packets only
      ++st_.data_in;
      if (p->h.priority < j->priority_min || p->h.priority > j->priority_max) {  // the job's admitted range
        p->h.priority = std::clamp(p->h.priority, j->priority_min, j->priority_max);
        ++st_.priority_clamped;
      }
      const uint32_t i = index_for(*p, *j);
      st_.pinned_hits += is_pinned(i);
      on_data(p, *j, i, now, fx);
      return;
    }
    // A sparse job's aggregators are pinned rows of its hot-set table: no
    // Fetch or result Ack of a dense task may free one (Data is refused above).
    if (j && kv_ && kv_->has_table(j->job) && (p->h.type == PktType::Fetch || p->h.type == PktType::Ack))
      return drop(st_.malformed);
    if (p->h.type == PktType::Fetch) {
      if (!j) return drop(st_.malformed);
      if (j->ps == kNoNode || src != j->ps) return drop(st_.foreign_fetch);
      handle_fetch(p, *j, fx);
      return;
    }
    if (p->h.type == PktType::Ack && j && j->parent != kNoNode) {
      if (src != j->parent) return drop(st_.foreign_ack);
      handle_tree_result(p, *j, fx);
      return;
    }
    return drop(st_.malformed);
  }
  if (p->h.dst == kMulticast && p->h.type == PktType::KvResult && j) {
    // A sparse PS's result: replicated to the job's workers as it is.
    if (j->ps == kNoNode || src != j->ps) return drop(st_.foreign_ack);
    ++st_.forwarded;
    replicate(p, *j, fx);
    return;
  }
  if (p->h.dst == kMulticast) {
    if (p->h.type != PktType::Ack || !j || (kv_ && kv_->has_table(j->job))) return drop(st_.malformed);
    // From the PS, or from a peer switch passing it down the multicast tree.
    if ((j->ps == kNoNode || src != j->ps) && !is_peer(src)) return drop(st_.foreign_ack);
    handle_ps_ack(p, *j, fx);
    return;
  }
  const bool from_peer = is_peer(src);
  if (!j && !from_peer) return drop(st_.foreign_forward);
  if (!from_peer && (!is_member(*j, src) || !(is_member(*j, p->h.dst) || is_peer(p->h.dst))))
    return drop(st_.foreign_forward);
  ++st_.forwarded;
  fx.send(p);
}

}  // namespace ina::dp
