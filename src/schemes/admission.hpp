#pragma once
// Admission of jobs to one switch, sans I/O: no sockets, no clocks (the
// caller passes the time). It decides how the aggregator memory is given to
// jobs (one shared pool, an isolated region per job, or a segment per job),
// which node ids a job's members get, a job's window cap, who may join a job
// (worker count, ranks, one PS, the payload) and when a job's workers agree
// on a hot-set list (Zebra). Every refusal carries its reason as the text the
// member is told.
//
// Used by the star simulator (cluster/star.cpp), the ring and sparse
// experiments and the runtime switch (runtime/switch_jobs.cpp). The memory
// rule follows the registry's flags (Scheme::isolated, Scheme::segments,
// Scheme::has_ps); nothing here looks at a scheme's name.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/time.hpp"
#include "dataplane/switch.hpp"

namespace ina::schemes {

struct Scheme;

// How a switch's aggregators are given to its jobs.
enum class Memory : uint8_t {
  Pool,      // one pool shared by every job (ATP, DSA, Zebra): no region, no window cap
  Regions,   // equal isolated regions, one per live job (SwitchML; a ring job's share on a ToR;
             //   a contiguous shared pool, dp::PoolAddressing::Contiguous)
  Segments,  // a segment <MemID, Size> per job, given or the equal split (P4INC-AOI): no window cap
};
const char* to_string(Memory m);

// The memory rule of a scheme's jobs: Regions if isolated, Segments if it
// has segments, else Pool.
Memory memory_of(const Scheme& s);
// The same for a switch whose shared pool is addressed `pool`: a scheme whose
// jobs share a pool (shares_pool) gets Regions, one pool each (no shadow
// copy: config_of's pools = 1), when the pool is Contiguous.
Memory memory_of(const Scheme& s, dp::PoolAddressing pool);
// Its jobs share one pool of dense aggregators that any job may fill
// (ATP and DSA): a dense switch program, no regions or segments, not routed,
// not sparse, not a ring's ToR.
bool shares_pool(const Scheme& s);

// A job's segment <MemID, Size> of the aggregator array (P4INC-AOI).
struct Segment {
  uint32_t mem_id = 0, size = 0;
};

class Admission {
 public:
  struct Config {
    Memory memory = Memory::Pool;
    size_t aggregators = 0;  // of one shard's switch program
    // Job J is served by shard J mod shards, each with `aggregators` of its own.
    unsigned shards = 1;
    // Regions and Segments: the equal parts of each shard's aggregators (the
    // most jobs live at once on a shard, with Regions).
    unsigned regions = 1;
    // Regions: aggregators per window slot (SwitchML: 2, its shadow copy). A
    // region is rounded down to a multiple of it and the window cap is
    // region / pools; a region of fewer than `pools` aggregators is none.
    unsigned pools = 2;
    bool has_ps = false;      // every job has one PS (it must join before the job starts)
    uint16_t payload = 0;     // values per packet: a join asking for another is refused
    // Node ids for members that join (join()): allocated round robin from
    // 1..kMulticast-1, never one of these (the switch's own, its CPU's).
    std::vector<NodeId> reserved;
    // For the texts: the scheme and its policy, and whether its switch keeps
    // a hot-set table (Zebra: hot_set() refuses otherwise).
    std::string scheme, policy;
    bool hot_sets = false;
  };
  // Memory, pools, has_ps, hot_sets and the texts from the registry; sizes
  // from the caller; `pool`: how the switch addresses a shared pool (memory_of).
  static Config config_of(const Scheme& s, size_t aggregators, unsigned regions, unsigned shards = 1,
                          dp::PoolAddressing pool = dp::PoolAddressing::Hashed);

  explicit Admission(Config cfg);

  const Config& config() const { return cfg_; }
  // Regions and Segments: aggregators in each region (0: the memory cannot
  // be split so; memory_error() says why). Pool: 0.
  uint32_t region_size() const { return region_size_; }
  // Why the memory cannot be split into cfg.regions parts; empty if it can.
  std::string memory_error() const;
  // The window cap of every job: region_size / pools with Regions, else 0 (none).
  uint32_t window_cap() const;
  unsigned shard_of(uint16_t job) const { return job % cfg_.shards; }

  // What a job is given.
  struct Grant {
    uint16_t job = 0;
    unsigned shard = 0;
    int region = -1;  // Regions: its region's index on its shard; else -1
    uint32_t region_offset = 0, region_size = 0;
    uint32_t window_cap = 0;
    std::vector<NodeId> workers;  // by rank
    NodeId ps = kNoNode;
    // The switch program's entry: job, workers, PS, region (or segment).
    dp::SwitchJob switch_job() const;
  };
  struct Refusal {
    std::string reason;
  };

  // A whole job at once (the simulators: ids from their plan). `ids`: the
  // workers by rank, then the PS if the job has one. `segment`: Segments
  // only; none takes the job's part of the equal split (its index among the
  // jobs admitted so far on its shard).
  struct JobRequest {
    uint16_t job = 0;
    std::vector<NodeId> workers;
    NodeId ps = kNoNode;
    std::optional<Segment> segment;
  };
  std::variant<Grant, Refusal> admit(const JobRequest& r);

  // One member at a time (the runtime's control plane). A job starts once all
  // its workers (and its PS, if it has one) have joined: then its region and
  // node ids are granted, or the whole job is refused (no free region) and
  // forgotten.
  struct Join {
    uint16_t job = 0;
    bool ps = false;
    unsigned rank = 0;       // workers
    unsigned nworkers = 0;
    uint64_t payload = 0;    // 0: any
    uint64_t retain_ops = 0;
  };
  struct Waiting {
    unsigned workers_joined = 0, nworkers = 0;
    bool ps_joined = false, ps_needed = false;
  };
  struct JobRefused {  // every member of the job is refused with this reason
    std::string reason;
  };
  using JoinAnswer = std::variant<Refusal, Waiting, Grant, JobRefused>;
  JoinAnswer join(const Join& m, Time now);
  // A member of a job that has not started leaves (its connection closed);
  // the job is forgotten once no member is left.
  void leave(uint16_t job, bool ps, unsigned rank);
  // A started job whose switch entry could not be installed: its ids and
  // region go back and it waits again with all its members.
  void revoke(uint16_t job);
  // A started job ends: its node ids and region are free again and the job is forgotten.
  void release(uint16_t job);

  struct JobState {
    unsigned nworkers = 0;
    std::vector<bool> workers;  // joined, by rank
    bool ps = false;            // joined
    uint64_t retain_ops = 0;
    bool live = false;
    Time since = 0;             // first join, then the start
    std::optional<Grant> grant; // live jobs
    unsigned workers_joined() const;
    // The hot-set lists being received, per rank (hot_set()).
    struct HotList {
      uint32_t from = 0;
      uint64_t total = 0;
      std::vector<uint64_t> keys;
      bool complete() const { return keys.size() == total; }
    };
    std::vector<std::optional<HotList>> hot;
    uint32_t hot_version = 0;  // of the table installed last (0: none)
  };
  const JobState* job(uint16_t id) const;
  const std::map<uint16_t, JobState>& jobs() const { return jobs_; }

  // Zebra's hot-set agreement: worker `rank` of a live job sends its list in
  // chunks (offset = keys sent before). Once every worker's list is complete
  // they must be equal (same keys, same first iteration): Agreed, with the
  // version the table gets if the caller installs it (then installed()); or
  // Disagreed. Either way the lists are cleared for the next round. A chunk
  // that does not continue its worker's list is refused (nothing changes).
  // Keys per chunk of a worker's hot-set list (a runtime hot_set message,
  // well under the control line limit of 64 KiB; the simulator sends the same).
  static constexpr size_t kHotChunkKeys = 2048;
  struct HotChunk {
    uint32_t from = 0;
    uint64_t total = 0, offset = 0;
    std::vector<uint64_t> keys;
  };
  struct HotPending {};
  struct HotAgreed {
    uint32_t from = 0, version = 0;
    std::vector<uint64_t> keys;
  };
  struct HotDisagreed {
    uint32_t from = 0;  // rank 0's
    uint64_t keys = 0;  // rank 0's count
    std::string reason;
  };
  using HotAnswer = std::variant<Refusal, HotPending, HotAgreed, HotDisagreed>;
  HotAnswer hot_set(uint16_t job, unsigned rank, const HotChunk& c);
  // The caller installed the agreed table of version v.
  void installed(uint16_t job, uint32_t version);

 private:
  Config cfg_;
  uint32_t region_size_ = 0;
  std::map<uint16_t, JobState> jobs_;
  std::vector<std::vector<bool>> region_used_;  // by shard, by region (Regions)
  std::vector<unsigned> admitted_;              // by shard: jobs admitted through admit() (equal segments)
  std::vector<bool> id_used_;
  NodeId next_id_ = 1;

  std::variant<int, Refusal> take_region(uint16_t job);
  void give_back(const Grant& g);
  std::optional<NodeId> alloc_id();
  Grant grant_of(uint16_t job, int region) const;
};

}  // namespace ina::schemes
