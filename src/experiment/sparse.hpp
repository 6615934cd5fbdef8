#pragma once
// Sparse aggregation in the packet simulator (Zebra): one star (a
// switch, N workers, one PS, and for Zebra the switch CPU on its own link),
// iterations of a SparseSource's per-worker key sets pushed through the
// sparse hosts (host/sparse.hpp) and, for Zebra, the switch program
// (dataplane/zebra.cpp). Every run is checked: every worker's sums equal the
// exact per-key sums of every worker's values for the union of keys, and
// nothing is left (no packet in the pool, no result copy at the CPU or PS,
// no register in use, no event). With KvArith::Float16Table the values are
// float gradients (workload::sparse_gradient) and each sum must be within
// fp16::TableAdder::sum_bound of the exact float64 sum instead (ValueError).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/zebra_layout.hpp"
#include "dataplane/switch.hpp"
#include "host/sparse.hpp"
#include "sim/engine.hpp"
#include "workload/sparse.hpp"

namespace ina::exp {

struct SparseSettings {
  std::string scheme = "zebra";     // a registered sparse scheme: zebra, ps-lite
  unsigned workers = 8;             // the first `workers` of the source's workers
  unsigned iterations = 3;          // of the source, from `first_iteration`
  unsigned first_iteration = 0;
  uint64_t seed = 1;                // values and link faults
  // The hot set: the top `hot_keys` keys by update count over the source's
  // iterations [profile_first, profile_first + profile_iterations) (sampled
  // at `sample_rate`: a seeded sample of the (iteration, worker) batches).
  // With principle_p > 0, Principle 1 sets the size instead: the smallest k
  // with T_k / T_n >= principle_p and 4 B * k <= principle_c * memory_bytes
  // (the run fails if p is out of reach within that memory).
  size_t hot_keys = 30000;
  unsigned profile_first = 0, profile_iterations = 0;  // 0: the measured iterations themselves
  double sample_rate = 1.0;
  double principle_p = 0, principle_c = 1;
  uint32_t registers = 16;          // register arrays the hot slots are spread over (m)
  dp::zebra::Placement placement = dp::zebra::Placement::Heat;
  bool layout_aware = true;         // Algorithm 1 at the workers
  unsigned pairs = 9;               // per packet
  // The streams between the workers and the PS (host::SparseConfig): pairs
  // per packet (0: `pairs`) and an acknowledgement per this many in order.
  unsigned ps_pairs = 0;
  unsigned ack_every = 1;
  // The workers share the NICs of this many machines (cluster::wire_machines;
  // 0: a NIC each); the PS and the switch CPU keep their own links.
  unsigned machines = 0;
  // A dense scheme's (SwitchML's) int32 values per packet.
  uint16_t dense_payload_values = 64;
  uint32_t table_entries = 32768;   // the switch's key table (dp::ZebraConfig::kv_table_entries)
  uint64_t memory_bytes = 1 << 20;  // the switch's aggregation memory (the paper's 1 MB cap)
  sim::LinkParams link;             // every host link
  Time cpu_delay = 2225 * kUs;      // switch pipeline <-> CPU, one way (the paper: 4.45 ms round trip, §V-E)
  Time cpu_rto = 1 * kMs;
  Time compute = 0;                 // between iterations
  double init_window = 64;
  Time time_limit = 60 * kSec;      // of simulated time: a run still going then fails, saying where each worker is
  KvArith arith = KvArith::Fixed;   // values: int32 exact, or float (hot: float16 table adds, cold: float32 at the PS)
  kv::HotRoute hot_results = kv::HotRoute::ViaPs;  // the switch's hot results: to the PS (the paper's) or to the workers
  double grad_sigma = 0.01;         // Float16Table: the gradients' scale (workload::sparse_gradient)
  // Hot-set updates (online identification): from iteration `from` on, the
  // top `hot_keys` of iterations [profile_first, + profile_iterations); the
  // workers and/or the switch take it (both: the scheduler's update; one
  // only: a table out of step, which must still lose no gradient).
  struct HotUpdate {
    unsigned from = 0, profile_first = 0, profile_iterations = 1;
    bool workers = true, sw = true;
  };
  std::vector<HotUpdate> updates;
  // Every hot set the switch takes (the first and each update with `sw`)
  // reaches it as the runtime's do: each worker submits its list to the
  // switch's admission (schemes::Admission::hot_set) and the agreed list is
  // installed. The control plane gives every worker the same list; this
  // hook (tests) may change worker `rank`'s before it is submitted, and
  // lists that differ fail the run with the admission's reason.
  std::function<void(unsigned rank, std::vector<uint64_t>& keys)> hot_list;
  // Beyond the paper: the sparse job shares its switch
  // with a dense job. `pool` names a shared-pool scheme (Scheme::hosts_sparse:
  // atp, dsa) whose program runs both; the sparse job's hot values live in
  // aggregators pinned from that pool (dp::ZebraConfig::kv_pool), so its
  // layout spreads the hot set over an aggregator's 64 value lanes
  // (`registers` is not used). The dense job (`dense_workers` workers, one
  // allreduce of `dense_values` int32 values each `dense_iterations` times,
  // back to back, checked exactly as every dense run; its own PS) starts with
  // the sparse job. Empty: Zebra's own program, no dense job.
  std::string pool;
  unsigned dense_workers = 0;
  uint64_t dense_values = 0;
  unsigned dense_iterations = 1;
  // Targeted faults (tests): a packet `fault` selects is dropped — on arrival
  // at (outgoing = false) or on leaving (outgoing = true) worker node `node`
  // (ranks are nodes 1..N), or on arrival at the PS (node N + 1).
  std::function<bool(NodeId node, bool outgoing, const Packet& p)> fault;
};

struct SparseIteration {
  Time start = 0, end = 0;          // first begin() to last worker's completion
  uint64_t pairs = 0;               // non-zero pairs pushed by all workers
  uint64_t union_keys = 0;
  // The PS's phases (observed at its NIC, not protocol state): the last
  // gradient packet with pairs in, every worker's closing (empty, kLast)
  // cold packet in (the PS then sends the sums), and the bytes on its link
  // in each direction as the simulator counts them (headers included; acks,
  // results and retransmissions too).
  // With the hot results via the PS (kv::HotRoute::ViaPs): the last of the
  // switch's results in before the PS's first result goes out (later ones
  // are resends after a lost acknowledgement), and their bytes (all of them).
  Time ps_last_data = 0, ps_all_in = 0, ps_hot_in = 0, ps_first_out = 0;
  uint64_t ps_in_bytes = 0, ps_out_bytes = 0;
  uint64_t ps_in_ack_bytes = 0;     // of ps_in_bytes: the workers' acknowledgements of the PS's results
  uint64_t ps_in_hot_bytes = 0;     // of ps_in_bytes: the switch's results
};

// Float16Table runs: the results every worker received vs the exact float64
// sums of the float32 gradients (docs/zebra.md, "Float16 values and the table adder").
struct ValueError {
  uint64_t values = 0;        // result values checked (every worker's)
  double max_rel = 0;         // max |got - exact| / |exact| over values with exact != 0
  double mean_rel = 0;        // mean of the same
  double max_scaled = 0;      // max |got - exact| / sum |x_i| (what the bound limits)
  double max_over_bound = 0;  // max |got - exact| / fp16::TableAdder::sum_bound (<= 1, else the run fails)
  double vec_rel = 0;         // ||got - exact||_2 / ||exact||_2 over all result values
};

struct SparseRun {
  std::string scheme;
  std::vector<SparseIteration> iters;
  Time total = 0;                   // first push of the first iteration to the last result of the last
  double agg_throughput_gbps = 0;   // pushed pairs x 12 B (8 B key + 4 B value) x 8 / total
  uint64_t pairs = 0, hot_pairs = 0, cold_pairs = 0;
  size_t hot_keys = 0;
  uint64_t hot_union_keys = 0;      // summed over iterations: keys of the union the workers' table holds
  double hot_share = 0;             // hot pairs / all pairs
  double recirc_per_packet = 0;     // switch recirculations per hot gradient packet
  dp::SwitchStats sw;
  dp::SwitchCpuStats cpu;
  host::SparsePsStats ps;
  host::SparseWorkerStats workers;  // summed
  uint64_t events = 0;
  uint64_t queue_drops = 0;         // packets dropped at full link queues (every link of the star)
  uint64_t faults = 0;              // packets dropped by SparseSettings::fault
  ValueError value_error;           // Float16Table only
  // With a pool (SparseSettings::pool).
  size_t pinned = 0;                // aggregators the sparse job's tables pinned
  size_t pool_aggregators = 0;      // of the pool's
  struct Dense {
    Time finish = 0;                // last worker's last result (all start at 0)
    double goodput_gbps = 0;        // per worker: its allreduces' int32 bytes x 8 / finish
    uint64_t verified = 0;          // result values checked exactly (every worker's)
    uint64_t retransmits = 0, ps_completions = 0;
    size_t late_aggregators = 0;    // held at the end by late copies (dup/reorder faults only), freed on removal
  } dense;
};

// Runs and checks (throws std::runtime_error naming the first wrong key, or what leaked).
SparseRun run_sparse(const SparseSettings& s, const workload::SparseSource& src);

// The top-k keys by update count over the given iterations of the first
// `workers` workers (ties: smaller key first), over a sample of the batches
// at sample_rate < 1 (control::zebra::count_updates).
std::vector<uint64_t> top_keys(const workload::SparseSource& src, unsigned workers, unsigned first, unsigned count,
                               size_t k, double sample_rate = 1.0, uint64_t seed = 1);

}  // namespace ina::exp
