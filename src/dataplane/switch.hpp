#pragma once
// Common machinery of the INA switch programs: the aggregator register
// arrays, the control-plane job table, multicast of results, the reminder
// fetch, accounting. Each scheme's aggregation logic is in its own file:
//   switchml.cpp  isolated per-job regions, PSN % size + offset, shadow pool
//   atp.cpp       shared pool, Hash(JobID, PSN), FCFS, fallback PS
//   dsa.cpp       shared pool with priority preemption and downgrading
//   grid.cpp      GRID: aggregate only fragments addressed to this switch, rate sync
//   aoi.cpp       P4INC-AOI: a segment per job, the worker picks the index, no PS, shadow copy
//
// Aggregation trees (PS-based INA over several switches, ATP): a job whose
// entry names a `parent` is one level of a tree. Its gradients and the
// aggregates of its child switches are addressed to this switch; what
// completes here (every rank of `agg_mask`) and every fallback goes to the
// parent (the next INA switch toward the PS, or the PS), and the result comes
// back addressed to this switch from the parent, which frees the aggregator
// and passes it on to the children and, by multicast, to the direct workers.
// A job without a parent (every star) behaves as before.
//
// Hardware model: an aggregator is one entry in a set of register arrays
// (key, bitmap, priority, state, values); memory bytes / payload bytes gives
// the aggregator count. A packet touches one aggregator index per pipeline
// pass; DSA's swap needs a second pass (a resubmit), which is counted.
#include <array>
#include <cstdint>
#include <unordered_map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/dsa.hpp"
#include "dataplane/grid.hpp"
#include "dataplane/rina.hpp"
#include "dataplane/zebra.hpp"
#include "dataplane/zebra_layout.hpp"
#include "core/deadline_queue.hpp"
#include "core/rtt_estimator.hpp"
#include "core/rng.hpp"
#include "core/zero_page_allocator.hpp"
#include "proto/node.hpp"
#include "wire/fp16.hpp"

namespace ina::dp {

// Sharing a pool between tenants: the admission bounds the shared-pool
// programs (ATP, DSA) apply, enforced by the common machinery below. Off by
// default, as in the papers; `ina switch` turns them on (docs/runtime.md,
// "Security").
struct PoolShare {
  // A job's aggregator quota: the aggregators it may hold at once.
  // SwitchJob::quota if given, else `job_quota` if not 0, else with
  // `fair_quota` the aggregators divided by the jobs registered (at least 1,
  // recomputed as jobs come and go), else no limit. A first transmission of
  // a job at its quota takes no aggregator: it goes to the PS as a collision
  // does (counted in quota_refused); under DSA it does not compete either.
  uint32_t job_quota = 0;
  bool fair_quota = false;
  // Reclamation: an aggregator whose task was reserved at least this long ago
  // and has not completed (ATP: or whose result the PS has not yet sent past
  // the switch) is taken back by the next packet that addresses it for
  // another task: its partial aggregate goes to its job's PS as an evicted
  // partial (ATP: nothing, if the PS already has the complete aggregate), so
  // results stay exact, and the aggregator is free for that packet. 0: never.
  // Aggregators of a job holding more than its quota (it had them before its
  // quota was lowered) are taken back the same way by another job's packets,
  // at any age.
  Time reclaim_after = 0;
};

// Where a shared-pool program (ATP, DSA) keeps task (job, PSN).
enum class PoolAddressing : uint8_t {
  Hashed,      // Hash(job, PSN) over the whole pool: tasks of different jobs may collide (the papers')
  Contiguous,  // a contiguous region per job (SwitchJob::region_offset/size): region_offset + PSN % region_size
               // (the Rina paper's §V allocation; schemes::Admission gives the regions)
};

// What a switch program is built with: the fields every program reads, and
// one member per scheme with that scheme's own settings, declared beside its
// program (a program reads only its own). Which program (scheme) is not part
// of it: the scheme registry (schemes/registry.hpp) maps a name to the
// factory of its file below.
struct SwitchConfig {
  uint64_t memory_bytes = 5'000'000;
  uint16_t payload_values = 64;   // 256 B of int32 per packet and per aggregator
  uint64_t seed = 1;
  bool track_tasks = false;       // record per-task preemption outcomes (task_types(); DSA's task types)
  PoolShare share;                // shared-pool programs (ATP, DSA)
  PoolAddressing pool = PoolAddressing::Hashed;  // shared-pool programs: Contiguous needs a region per job
  DsaConfig dsa;                  // dsa.hpp
  GridConfig grid;                // grid.hpp
  RinaConfig rina;                // rina.hpp
  ZebraConfig zebra;              // zebra.hpp (the zebra program, and kv_pool)
};

// A sparse job's hot-set table (Zebra): from iteration `from` on, the keys of
// `hot` are aggregated in the registers `layout` assigns to their rank indices.
using SparseTable = dp::zebra::Table;

// A switch program's register array: an entry per aggregator (or per table
// slot), all zero at the start. Arrays of 16 KB and more are mappings of
// their own, their pages mapped when first touched: building a switch
// writes nothing, and a switch holds in memory the pages its tasks reached
// (a hashed pool's tasks reach most pages of a busy switch, none of an
// idle one).
template <class T>
using Registers = std::vector<T, ZeroPageAllocator<T, size_t{16} << 10>>;

struct SwitchJob {
  uint16_t job = 0;               // >= 1
  std::vector<NodeId> workers;    // by rank
  NodeId ps = kNoNode;            // fallback server (ATP, DSA)
  uint32_t region_offset = 0;     // isolated policy: first aggregator of the job's region
  uint32_t region_size = 0;       // isolated policy: aggregators in the region (two pools);
                                  //   Rina with a shared pool: the members' window (AllGather rows)
  // Admission bounds of a job on a shared pool, fixed by whoever registers
  // it (never by its packets). quota: aggregators it may hold at once (0: the
  // switch's default, PoolShare::job_quota / fair_quota). The priority
  // range: a gradient packet's priority is clamped into it before the switch
  // looks at it (DSA's compare; counted in priority_clamped).
  uint32_t quota = 0;
  uint32_t priority_min = 0;
  uint32_t priority_max = UINT32_MAX;
  // Set by the switch as it registers the job (add_job, replace_job),
  // whatever the caller wrote: every rank's bit, and what a task owes
  // (owed(): every rank, or in a tree the ranks of its subtree).
  RankBits all_ranks, owes;
  RankBits agg_mask;              // routed policy: ranks whose fragments this switch aggregates;
                                  // tree: the ranks of its subtree (what it owes its parent)
  RinaJob rina;                   // ring-ina (Rina ToR): rina.hpp
  ZebraJob zebra;                 // sparse (Zebra): zebra.hpp
  // Tree (PS-based INA over several switches); kNoNode: no tree (a star; GRID in the simulator,
  // whose runtime layout is a flat tree: every switch a child of the PS).
  NodeId parent = kNoNode;        // where aggregates and fallbacks go: the next INA switch toward the PS, or the PS
  std::vector<NodeId> children;   // INA switches whose aggregates come here; the result goes back to each
  RankBits direct_mask;           // ranks whose gradients come here first; the result is multicast to them
};

struct SwitchStats {
  uint64_t data_in = 0;        // gradient packets addressed to the switch
  uint64_t aggregated = 0;     // packets summed into an aggregator (incl. reservation)
  uint64_t completed = 0;      // tasks completed in the switch
  uint64_t to_ps = 0;          // packets sent to the PS (collision, eviction, flush, result)
  uint64_t collisions = 0;     // addressing collisions
  uint64_t preempt_won = 0;    // packet took the aggregator
  uint64_t preempt_lost = 0;   // packet lost the compare and went to the PS
  uint64_t split_joins = 0;    // DSA join_splits: split tasks whose switch half went to the PS once the halves covered every rank
  uint64_t downgrades = 0;     // aggregator priority halved
  uint64_t resubmits = 0;      // second pipeline passes
  uint64_t duplicates = 0;     // deduplicated by the bitmap
  // ATP: a record of a task's contributions that left this switch without
  // its aggregator, overwritten before the task reserved one here (that task
  // can then complete only through a retransmission).
  uint64_t bypass_overwritten = 0;
  uint64_t stale = 0;          // packets for a finished phase (isolated) or, in a tree, a task whose result already passed, dropped
  uint64_t resend_served = 0;  // retransmissions answered from a completed slot
  uint64_t fetches = 0, fetch_hits = 0;
  uint64_t acks_multicast = 0; // result packets replicated to workers
  uint64_t tree_results = 0;   // tree: results received from the parent and passed down
  uint64_t released_by_ack = 0;// aggregators freed by a PS ack passing by
  uint64_t overflow = 0;       // packets whose addition saturated int32
  uint64_t malformed = 0;      // dropped: unknown job, bad rank/bitmap/count
  // Dropped because the sender is not who the packet says it may come from
  // (job isolation): never aggregated, answered, forwarded or allowed to free anything.
  uint64_t foreign_data = 0;   // Data for a job/rank the source is not bound to
  uint64_t foreign_ack = 0;    // a result Ack for a job from anyone but its PS
  uint64_t foreign_fetch = 0;  // a Fetch for a job from anyone but its PS
  uint64_t foreign_forward = 0;// a packet to forward whose source or destination is not of its job
  uint64_t foreign() const { return foreign_data + foreign_ack + foreign_fetch + foreign_forward; }
  uint64_t forwarded = 0;      // plain forwarding
  uint64_t rate_syncs = 0;     // Routed: fragments dropped with a rate-sync control packet
  uint64_t capacity_drops = 0; // Routed: of which for lack of processing capacity
  uint64_t evictions = 0;      // Routed: partials sent to the PS after repeated collisions;
                               // Rina pool (DSA): partials evicted onward by a higher-priority job
  uint64_t bypassed = 0;       // Rina pool: members' packets sent onward unaggregated (collision)
  uint64_t flushed = 0;        // Rina pool: partials sent onward on a member's retransmission
  // Sparse (Zebra).
  uint64_t kv_in = 0;          // KV gradient packets addressed to the switch (new ones)
  uint64_t kv_pairs_in = 0;    // their pairs
  uint64_t kv_aggregated = 0;  // pairs summed into a register
  uint64_t kv_to_ps = 0;       // pairs passed on to the PS (not in the table)
  uint64_t recirculations = 0; // extra pipeline passes of gradient packets (a register hit twice)
  uint64_t sweep_passes = 0;   // pipeline passes reading the registers out at the end of an iteration
  uint64_t kv_results = 0;     // result packets sent (each replicated to every worker and the CPU)
  std::array<uint64_t, 7> kv_rejects{};  // malformed KV packets by kv::Error
  uint64_t pinned_hits = 0;    // kv_pool: dense packets whose aggregator a sparse job's table pins
  // P4INC-AOI (aoi.cpp): packets refused as asynchronous errors (a greater fragment id than the
  // busy aggregator's, or a sender behind on the aggregator's last result), each answered with
  // an ECN notification to its sender; and packets whose index lies outside the job's segment.
  uint64_t async_errors = 0;
  uint64_t out_of_segment = 0;
  // Sharing the pool (PoolShare; SwitchJob's priority range).
  uint64_t quota_refused = 0;     // first transmissions of a job at its quota: sent to the PS, no aggregator taken
  uint64_t reclaimed = 0;         // aggregators taken back: a task incomplete past reclaim_after, or its job over its quota
  uint64_t priority_clamped = 0;  // gradient packets whose priority lay outside their job's admitted range
};

// Per-task outcome bits (instrumentation, not switch state).
namespace task {
constexpr uint8_t kSeen = 1, kWon = 2, kLost = 4;
}

class SwitchProgram;

// Zebra's sparse pipeline (dataplane/zebra.cpp): the KV packets, hot-set
// tables, value registers and recirculation of a switch's sparse jobs. The
// zebra program has one with registers of its own; a shared-pool program
// with ZebraConfig::kv_pool one whose values are aggregators of its pool.
class KvPipeline {
 public:
  virtual ~KvPipeline() = default;
  virtual void set_table(const SwitchJob& j, SparseTable t) = 0;
  virtual void on_kv(Packet* p, const SwitchJob& j, Time now, Effects& fx) = 0;
  virtual void on_timer(Time now, Effects& fx) = 0;
  virtual bool has_table(uint16_t job) const = 0;  // a sparse job with a hot-set table
  virtual size_t held() const = 0;                 // indices holding a partial sum, packets recirculating
  virtual size_t remove(const SwitchJob& j) = 0;   // the job leaves: its state, how many indices held a sum
};
// in_pool: values in pinned aggregators of `host`'s pool; else registers of its own (memory_bytes / 4).
std::unique_ptr<KvPipeline> make_kv_pipeline(SwitchProgram& host, bool in_pool);

// A wrapping add of x's lanes onto v's, 64 of them or n; returns the OR
// of the lanes' overflow flags (bit 31 set: some lane overflowed).
uint32_t add_64_lanes(int32_t* __restrict v, const int32_t* __restrict x);
uint32_t add_some_lanes(int32_t* v, const int32_t* x, size_t n);

class SwitchProgram : public Node {
  friend class ZebraPipeline;

 public:
  // `scheme`: the registry name this program was built for (messages, reports).
  SwitchProgram(const SwitchConfig& cfg, std::string_view scheme);

  // Control plane.
  void add_job(const SwitchJob& j);
  // Forgets the job; frees aggregators it still holds and returns how many.
  size_t remove_job(uint16_t job);
  // Registers `j` in place of the registered job of its id: `j` is checked
  // first (throws std::invalid_argument naming what is wrong, changing
  // nothing), then the old entry is removed (returns the aggregators freed).
  size_t replace_job(const SwitchJob& j);
  // The registered job `id` (nullptr: none).
  const SwitchJob* job(uint16_t id) const { return job_of(id); }
  // Another switch of the same network (multi-switch topologies): its
  // packets (fetch replies, rate syncs, results) are forwarded for any job.
  void add_peer(NodeId sw);

  void on_packet(Packet* p, Time now, Effects& fx) final;
  void on_timer(uint64_t token, Time now, Effects& fx) override;  // the sparse pipeline's, if any
  // Sparse schemes (and pool programs with kv_pool): installs a hot-set table for
  // `job` (throws std::invalid_argument naming what does not fit, changing nothing;
  // programs without a sparse pipeline throw).
  virtual void set_sparse_table(uint16_t job, SparseTable t);

  size_t aggregators() const { return n_; }
  size_t occupied() const;  // aggregators in use, plus what a scheme holds elsewhere
  size_t occupied_by(uint16_t job) const;
  // The most aggregators that held values at once (the value slots taken, values()).
  size_t value_slots_used() const { return used_slots_; }
  // Bytes of the arrays indexed by aggregator besides the values (Agg, the
  // slot index, the scheme's own registers): their size, of which pages are
  // mapped where tasks write (Registers). The resource estimate reads it per
  // aggregator as resident, a bound that holds for a busy switch.
  size_t register_bytes() const { return bytes_of(aggs_, slot_, born_) + own_register_bytes(); }
  // The aggregators job `job` may hold at once (PoolShare::job_quota); 0: no limit.
  uint32_t quota_of(uint16_t job) const;
  // Aggregators a sparse job's hot-set table pins (kv_pool; occupied() counts them).
  size_t pinned() const;
  // It runs sparse jobs (zebra, or a pool program built with kv_pool).
  bool runs_sparse() const { return kv_ != nullptr; }
  // Introspection (tests): the aggregator holding task (job, psn), or -1.
  int64_t holder_of(uint16_t job, uint32_t psn) const;
  const SwitchStats& stats() const { return st_; }
  const SwitchConfig& config() const { return cfg_; }
  const std::string& scheme() const { return scheme_; }
  // Task outcome counts: [0] no preemption, [1] won, [2] lost (DSA §IV-C).
  std::array<uint64_t, 3> task_types() const;
  // The type of task (job, psn) as task_types() counts it: 1, 2 or 3; 0 if
  // not tracked (tracking off, or no packet of it reached the switch).
  int task_type(uint16_t job, uint32_t psn) const;

  static uint64_t key_of(uint16_t job, uint32_t psn) { return (static_cast<uint64_t>(job) << 32) | psn; }

 protected:
  // Scheme hook: a gradient packet addressed to this switch, already
  // validated (its source is worker `rank` of job j), for aggregator `i` = index_of(j, psn).
  virtual void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time now, Effects& fx) = 0;
  // Scheme hook: control-plane checks of a job before it is registered (throws std::invalid_argument).
  virtual void check_job(const SwitchJob& j) const;
  // Every check of add_job but "already registered" (the scheme's check_job included).
  void validate_job(const SwitchJob& j) const;
  static std::unique_ptr<SwitchJob> registered(const SwitchJob& j);  // the copy kept, its derived fields set
  // Scheme hook: where (job, psn) lives in the shared pool; isolated overrides.
  virtual uint32_t index_of(const SwitchJob& j, uint32_t psn) const;
  // Scheme hook: the aggregator of gradient packet p; index_of(j, psn) unless
  // the packet carries its index (P4INC-AOI: the worker computes it).
  virtual uint32_t index_for(const Packet& p, const SwitchJob& j) const { return index_of(j, p.h.psn); }
  // Scheme hook: the result of task `key` (aggregator index i) passed this
  // switch on its way to the workers (after the aggregator, if it held the task, was freed).
  virtual void result_passed(uint32_t i, uint64_t key) {}
  // Scheme hook: a PS's fetch took task `key`'s partial (ranks `ranks`) out of aggregator i.
  virtual void fetched(uint32_t i, uint64_t key, RankBits ranks) {}
  // Scheme hook: a ring packet (RingData/RingAck/RingPull) addressed to this
  // switch for registered job j. Default: not a ring scheme, counted malformed.
  virtual void on_ring(Packet* p, const SwitchJob& j, Time now, Effects& fx);
  // Scheme hook: a KV packet (KvData, or a KvAck of a result) addressed to this
  // switch for registered job j. Default: the sparse pipeline's (kv_), else counted malformed.
  virtual void on_kv(Packet* p, const SwitchJob& j, Time now, Effects& fx);
  // Scheme hook: the most workers a job may have (bitmap schemes: kMaxWorkers).
  virtual size_t max_workers() const { return kMaxWorkers; }
  // The isolated region of j lies within the aggregators and overlaps no other job's (throws std::invalid_argument).
  void check_region(const SwitchJob& j, uint32_t min_size) const;
  bool member(const SwitchJob& j, NodeId n) const { return is_member(j, n); }
  bool is_peer_switch(NodeId n) const { return is_peer(n); }
  // Scheme hook: state a scheme holds outside the aggregators (occupied() counts it, and the sparse pipeline's).
  virtual size_t held_elsewhere() const { return 0; }
  // Scheme hook: job j leaves; frees what the scheme keyed otherwise (returns how many entries).
  virtual size_t on_remove(const SwitchJob&) { return 0; }
  // The job that holds aggregator i (0: free). Keys are key_of(job, psn)
  // unless a scheme keys its aggregators otherwise and says whose they are
  // here (remove_job frees a job's, occupied_by counts them).
  virtual uint16_t job_holding(uint32_t i) const { return aggs_[i].key ? static_cast<uint16_t>(aggs_[i].key >> 32) : 0; }
  // A shared-pool program (ATP, DSA) calls this in its constructor: with
  // ZebraConfig::kv_pool it then runs sparse jobs in its pool. A program
  // that does not cannot be built with kv_pool (Scheme::make_switch refuses).
  void host_sparse_in_pool();
  // Aggregator i holds a sparse job's hot values (kv_pool): a dense task never takes it.
  bool is_pinned(uint32_t i) const { return kv_ && aggs_[i].key != 0 && pinned_by_kv(i); }

  // The register arrays every scheme has; a scheme keeps its own further
  // arrays (DSA's priority, GRID's collision counter, ATP's and SwitchML's
  // completion state) in its own class, indexed the same way.
  struct Agg {
    uint64_t key = 0;        // 0 = free
    RankBits bitmap;
    uint8_t ecn = 0;
    uint16_t count = 0;
    uint16_t owner = 0;      // the job charged for it (its quota); 0 = none
    static constexpr bool kZeroBytesAreDefault = true;  // a free aggregator (Registers)
  };
  Agg& agg(uint32_t i) { return aggs_[i]; }
  // An aggregator's value registers. The simulator keeps them in slots
  // taken at first use and given back at release (a free aggregator's
  // values are zero), so memory and cache hold the live aggregators'
  // values, not the whole pool's: a hashed pool (ATP, DSA) spreads its
  // few live tasks over all of its aggregators. Values read the same.
  // `zero` false: a new slot's lanes are left as they are (the caller
  // writes every one).
  int32_t* values(uint32_t i, bool zero = true) {
    uint32_t s = slot_[i];
    if (s == 0) s = take_slot(i, zero);
    return slot_values(s);
  }
  int32_t* slot_values(uint32_t s) { return vals_.data() + static_cast<size_t>(s - 1) * width_; }

  void reserve(uint32_t i, const Packet& p);
  void set_meta(uint32_t i, const Packet& p);  // key, bitmap, ECN, count of p
  // (Inline: every scheme's contributions run it.)
  void accumulate(uint32_t i, const Packet& p) {
    Agg& a = aggs_[i];
    int32_t* v = values(i);
    const int32_t* x = p.payload();
    const size_t n = p.h.count;
    const uint32_t ovf = n == 64 ? add_64_lanes(v, x) : add_some_lanes(v, x, n);
    if (ovf >> 31) [[unlikely]] saturate(v, x, n);
    if (n > a.count) a.count = static_cast<uint16_t>(n);
    a.bitmap |= p.h.bitmap;
    a.ecn |= p.h.has(flag::kEcn);
    ++st_.aggregated;
  }
  // After a wrapping add of x[0, n) that overflowed: the lanes again, saturated.
  [[gnu::noinline]] void saturate(int32_t* v, const int32_t* x, size_t n);
  void release(uint32_t i) {
    if (aggs_[i].owner) --held_[aggs_[i].owner];
    aggs_[i] = Agg{};
    if (const uint32_t s = slot_[i]) {
      free_slots_.push_back(s);
      slot_[i] = 0;
    }
  }
  // The scheme's own arrays indexed by aggregator (register_bytes()).
  virtual size_t own_register_bytes() const { return 0; }
  template <class... V>
  static size_t bytes_of(const V&... v) {
    return (size_t{0} + ... + (v.size() * sizeof(typename V::value_type)));
  }
  // A slot for aggregator i: the one released last (zeroed if `zero`: the
  // caller writes every lane otherwise), else one never used (zero pages).
  uint32_t take_slot(uint32_t i, bool zero);
  // Job j may take aggregator i without exceeding its quota (i held by j already: yes).
  bool may_take(const SwitchJob& j, uint32_t i) const;
  // A packet of job j that addresses aggregator i, held by another task,
  // reclaims it (never a sparse job's pinned one, never for a job j that
  // may not take it under its quota): that task reserved it at
  // least PoolShare::reclaim_after ago, or it is charged to another job
  // holding more than its quota (a quota lowered by a job's arrival: the fair
  // share of the jobs registered now).
  bool reclaimable(uint32_t i, const SwitchJob& j) const;
  // Reclaims aggregator i: returns a packet carrying its partial
  // aggregate as this switch's own packet of the holder's job (as swap_with
  // makes one: its job, PSN, bitmap, count, ECN, values, lowest rank, src =
  // this switch), for the caller to send to the holder's PS (`holder`), and
  // frees i. nullptr (and i freed) if the holder's job is gone.
  Packet* reclaim(uint32_t i, Effects& fx, const SwitchJob*& holder);
  // What the switch must collect for a task: every rank, or in a tree the ranks of its subtree.
  static RankBits owed(const SwitchJob& j) { return j.owes; }
  bool full(uint32_t i, const SwitchJob& j) const { return aggs_[i].bitmap == owed(j); }
  // DSA's packet swap (and GRID's eviction). The packet's contribution takes
  // aggregator i (key, bitmap, ECN, count, values), and p leaves carrying the
  // evicted partial aggregate as this switch's own packet of the victim's
  // job: the victim's job, PSN, bitmap, count, ECN and values, the victim
  // job's worker count, the lowest contributing rank, src = this switch,
  // priority 0, flags cleared but ECN. Returns the victim's job entry, or
  // nullptr if that job is no longer registered (the caller frees p).
  const SwitchJob* swap_with(uint32_t i, Packet& p);
  // Writes aggregator i into p (payload, bitmap, ECN; src = this switch), leaving the aggregator intact.
  void load_into(uint32_t i, Packet& p);

  // Turns p into the result Ack and multicasts it to every worker of j.
  void multicast_result(Packet* p, const SwitchJob& j, Effects& fx);
  // Sends p (dst = kMulticast, src set) to every worker of j: the engine's
  // tree, or one unicast copy per worker.
  void replicate(Packet* p, const SwitchJob& j, Effects& fx);
  // Toward the PS: to the job's PS, or in a tree to the parent.
  void send_to_ps(Packet* p, const SwitchJob& j, uint16_t flags, Effects& fx);
  void mark(uint16_t job, uint32_t psn, uint8_t bits);
  const SwitchJob* job_of(uint16_t job) const;
  template <typename F>
  void for_each_job(F&& f) const {
    for (const auto& j : jobs_)
      if (j) f(*j);
  }

  SwitchConfig cfg_;
  std::string scheme_;
  SwitchStats st_;
  std::unique_ptr<KvPipeline> kv_;  // sparse jobs (zebra; a pool program with kv_pool)
  bool pinned_by_kv(uint32_t i) const;  // is_pinned() past its two tests (kv_ and i held)
  Rng rng_;
  size_t n_;
  uint16_t width_;

 private:
  void handle_fetch(Packet* p, const SwitchJob& j, Effects& fx);
  void handle_ps_ack(Packet* p, const SwitchJob& j, Effects& fx);
  void handle_tree_result(Packet* p, const SwitchJob& j, Effects& fx);
  void send_down(Packet* p, const SwitchJob& j, Effects& fx);
  void release_for_result(const SwitchJob& j, uint32_t psn);
  [[gnu::always_inline]] inline bool valid_data(const Packet& p, const SwitchJob& j) const;  // (inlined into on_packet())
  bool is_peer(NodeId n) const;
  bool is_member(const SwitchJob& j, NodeId n) const;

  Registers<Agg> aggs_;
  // The value slots (values()): pages the kernel maps on first write
  // (core/zero_page_allocator.hpp), so only as many as were ever live at
  // once cost memory, none on a switch no task reaches (an idle rack's ToR
  // on a large fabric). Sized once, in the constructor, for every
  // aggregator at once.
  std::vector<int32_t, ZeroPageAllocator<int32_t>> vals_;
  Registers<uint32_t> slot_;          // by aggregator: 1 + its slot in vals_, 0 = none
  std::vector<uint32_t> free_slots_;  // slots released, the last released last
  uint32_t used_slots_ = 0;           // slots ever taken: the most live at once
  std::vector<uint32_t> held_;   // by job id: aggregators charged to it (Agg::owner)
  Registers<Time> born_;         // reclaim_after > 0: when each aggregator's task reserved it
  Time now_ = 0;                 // the time of the packet being handled
  size_t njobs_ = 0;             // jobs registered (fair_quota)
  std::vector<std::unique_ptr<SwitchJob>> jobs_;  // by job id (the control plane's job table)
  std::vector<NodeId> peers_;
  // Instrumentation: per job, per PSN, 2 bits (won, lost) + a seen bit.
  std::vector<std::vector<uint8_t>> tasks_;
};

// The scheme programs, one per file; `scheme` is the name the program reports.
// Build them through the registry (schemes::find(name).make_switch(cfg)).
std::unique_ptr<SwitchProgram> make_switchml(const SwitchConfig& cfg, std::string_view scheme);  // isolated
std::unique_ptr<SwitchProgram> make_atp(const SwitchConfig& cfg, std::string_view scheme);       // shared FCFS
std::unique_ptr<SwitchProgram> make_dsa(const SwitchConfig& cfg, std::string_view scheme);       // preemptive (cfg.dsa)
std::unique_ptr<SwitchProgram> make_grid(const SwitchConfig& cfg, std::string_view scheme);      // routed
std::unique_ptr<SwitchProgram> make_rina(const SwitchConfig& cfg, std::string_view scheme);      // ring-ina ToR
std::unique_ptr<SwitchProgram> make_zebra(const SwitchConfig& cfg, std::string_view scheme);     // sparse hot keys
std::unique_ptr<SwitchProgram> make_aoi(const SwitchConfig& cfg, std::string_view scheme);       // P4INC-AOI segments

// P4INC-AOI's per-aggregator record (instrumentation, not switch state): the
// jobs whose packets addressed the aggregator, in first-touch order, and how
// many fragments completed there. nullptr for a program that is not P4INC-AOI's.
struct AoiSlotRecord {
  std::vector<uint16_t> jobs;
  uint64_t completed = 0;
};
const std::vector<AoiSlotRecord>* aoi_slots(const SwitchProgram& sw);

// Zebra's switch CPU (Zebra_s, §III-F), a node beside the pipeline: it keeps a
// copy of every result packet until each of the job's receivers has
// acknowledged it and retransmits it (unicast, through the switch) to those
// that have not. The receivers are the PS alone (ZebraConfig::hot_results
// ViaPs, acknowledging as rank 0) or the workers by rank (Multicast).
struct SwitchCpuStats {
  uint64_t copies = 0, acks = 0, retransmits = 0, unknown_acks = 0, malformed = 0;
};
class SwitchCpu final : public Node {
 public:
  // rto: the retransmission timeout (backed off per copy). adaptive: it is
  // the floor of an RTT estimate instead (copy to every worker's ack, copies
  // sent once only), for hosts whose acks take longer than any fixed value
  // (the runtime); the simulator keeps the fixed one.
  SwitchCpu(NodeId sw, Time rto, bool adaptive = false)
      : sw_(sw), rto_(rto), adaptive_(adaptive), est_(rto, kSec) {}
  void add_job(uint16_t job, std::vector<NodeId> receivers);
  // Frees the job's held copies (a finished or aborted job); returns how many there were.
  size_t remove_job(uint16_t job, Effects& fx);
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;
  size_t held() const { return held_.size(); }  // result copies not yet acknowledged by every receiver
  const SwitchCpuStats& stats() const { return st_; }

 private:
  struct Held {
    Packet* copy = nullptr;
    RankBits acked;
    Time since = 0, deadline = 0;
    unsigned tries = 0;
  };
  Time timeout() const { return adaptive_ ? est_.timeout() : rto_; }
  static uint64_t key(uint16_t job, uint32_t iter, uint32_t psn) {
    return (static_cast<uint64_t>(job) << 48) ^ (static_cast<uint64_t>(iter & 0xFFFF) << 32) ^ psn;
  }
  void arm(Time at, uint64_t k, Effects& fx);
  NodeId sw_;
  Time rto_;
  bool adaptive_;
  RttEstimator est_;
  std::vector<std::vector<NodeId>> jobs_;  // by job id: receivers by rank
  std::unordered_map<uint64_t, Held> held_;
  DeadlineQueue<uint64_t> dq_;
  SwitchCpuStats st_;
};

}  // namespace ina::dp
