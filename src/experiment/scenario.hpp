#pragma once
// Experiment scenario: a TOML file under scenarios/ describing topology,
// workload, schemes, seeds and the sweep axis. Parsing is strict: an unknown
// section or key, a value of the wrong type, or a value out of range is a
// ScenarioError naming the file, the field and the value.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config_error.hpp"

namespace ina::exp {

using ScenarioError = ina::ConfigError;
using ina::fail_field;

// One concrete configuration (everything a single simulation run needs,
// except scheme and seed). Field names mirror the TOML keys "section.key".
struct Settings {
  // [topology]
  std::string topology_kind = "star";  // topology.kind: star | fat-tree | dragonfly | leaf-spine | testbed | file
  int hosts = 64;                      // topology.hosts: star: worker servers (PS servers are added on top); leaf-spine: servers
  int k = 4;                           // topology.k: fat-tree arity (k^3/4 hosts, k/2 per edge switch)
  int hosts_per_edge = 0;              // topology.hosts_per_edge: fat-tree hosts per edge switch (0: k/2; more
                                       //   oversubscribes the edge: k = 32 with 32 is 16 384 hosts at 2:1)
  std::string dragonfly = "4,9,2";     // topology.dragonfly: "a,g,h" (a routers per group, g groups, h global ports; a/2 hosts per router)
  int spines = 2;                      // topology.spines (leaf-spine)
  int leaves = 4;                      // topology.leaves (leaf-spine)
  std::string topology_file;           // topology.file: JSON topology (topo/graph.hpp), relative to the scenario file
  double link_gbps = 100;              // topology.link_gbps
  double rtt_us = 10;                  // topology.rtt_us: base RTT host-switch-host (4 propagation delays)
  double queue_kb = 1024;              // topology.queue_kb: drop-tail buffer per output queue
  double ecn_kb = 100;                 // topology.ecn_kb: ECN marking threshold (0 = off)
  bool host_ecn = false;               // topology.host_ecn (multi-switch): hosts' NIC queues mark too (default: switch ports only)
  // topology.host_delay_us (star): end-host latency, each way, per packet: the
  // sender's stack (application to NIC) and the receiver's (NIC to
  // application) each add this much, limiting no rate (sim::Simulator::
  // set_host_delay). A host-switch-host round trip grows by 4x this; a
  // worker-switch-worker INA round trip by 2x. 0 = ideal hosts (the papers'
  // stated settings); DSA's calibrated variant (scenarios/dsa/overlay/calibrated.toml)
  // sets it so that a lone job needs ~1 MB of switch memory.
  double host_delay_us = 0;
  // [switch]
  double memory_mb = 5;                // switch.memory_mb: aggregator memory for INA (MiB = 2^20 bytes, as the runner uses it)
  int payload_bytes = 256;             // switch.payload_bytes: values per packet * 4
  int header_bytes = 50;               // switch.header_bytes: modelled wire overhead (306 B packets)
  // switch.packets: "scenario" (every scheme uses payload_bytes/header_bytes)
  // or "per-scheme" (a scheme with a packet of its own paper uses it:
  // schemes::Scheme::paper_payload_bytes; SwitchML 180 B in DSA's §VII-A).
  std::string packets = "scenario";
  std::string ina = "topology";        // switch.ina (network kinds): topology | none | all | tors | planner:N | percent:P | "name,name,..."
  int ina_count = -1;                  // switch.ina_count (network kinds): >= 0 means switch.ina = "planner:N" (sweepable)
  double ina_percent = -1;             // switch.ina_percent (network kinds): >= 0 means switch.ina = "percent:P" (sweepable)
  std::string memory_mb_per_switch;    // switch.memory_mb_per_switch (network kinds): "name=MiB,..." overriding switch.memory_mb
  double ina_gbps = 0;                 // switch.ina_gbps (network kinds): INA aggregation rate cap (Rina's "full speed"); 0 = line rate
  std::string ring_memory = "region";  // switch.ring_memory (network kinds, Rina): region (per job, §V) | pool (shared)
  std::string pool_policy = "atp";     // switch.pool_policy (ring_memory = pool): atp | dsa
  std::string atp_pool = "hashed";     // atp.pool (network kinds, PS-based INA: atp, dsa): hashed (one pool,
                                       //   Hash(job, PSN)) | contiguous (a region per PS shard, Rina §V, §VI-A4)
  std::string segments;                // switch.segments (star, schemes with segments: p4inc-aoi): "M1:S1,M2:S2,..."
                                       //   each job's segment <MemID, Size> in aggregators (non-overlapping, within
                                       //   the array); "" = the array split equally among the jobs in order
  // [workload]
  std::string model = "A";             // workload.model: star: "A", "B" or "mixed" (jobs alternate A, B);
                                       //   network kinds: ResNet50 | VGG16 | InceptionV3 | ResNet101 | BERT-base (workload/model.hpp)
  int jobs = 8;                        // workload.jobs
  int workers_per_job = 8;             // workload.workers_per_job (1..64)
  std::string job_workers;             // workload.job_workers (star): "W1,W2,..." the workers of each job (one per
                                       //   workload.jobs, 1..64 each), instead of workload.workers_per_job; "" = that
  int iterations = 1;                  // workload.iterations per job
  double start_jitter_us = 1000;       // workload.start_jitter_us: job start ~ U(0, x)
  double send_jitter_us = 300;         // workload.send_jitter_us: per-worker send jitter ~ U(0, x)
  double partition_mb = 0;             // workload.partition_mb: 0 = the model's own (A: 4, B: 2)
  double compute_ms = 0;               // workload.compute_ms: star: per layer; network kinds: per iteration; 0 = the model's own
  int workers = 0;                     // workload.workers (network kinds): the job's workers, rack-packed; 0 = every host
                                       //   (with workload.jobs > 1: per job; 0 = the hosts / jobs)
  std::string placement = "rack-packed";  // workload.placement (network kinds): rack-packed | interleaved (sim/network.hpp)
  std::string job_priorities;          // workload.job_priorities (ring_memory = pool, pool_policy = dsa): "P0,P1,..." per job; "" = 1 each
  double gradient_mb = 0;              // workload.gradient_mb (network kinds): MiB per worker and iteration; 0 = the model's
  double gradient_scale = 1;           // workload.gradient_scale (network kinds): simulate gradient x this (a faster, smaller run)
  double straggler_sigma_us = 0;       // workload.straggler_sigma_us (network kinds): per-chunk time ~ N(k/N, sigma^2) (Rina Eq. 1)
  double straggler_k_us = 0;           // workload.straggler_k_us (network kinds): its k
  double step_overhead_us = 0;         // workload.step_overhead_us (network kinds): Rina Eq. 1's O (CollectiveSettings)
  bool step_barrier = false;           // workload.step_barrier (ring schemes): a job-wide barrier per ring step (host/ring.hpp)
  std::string rina_allgather_start = "agent";  // workload.rina_allgather_start (rina): agent | rack (§IV-C's AllGather slow start)
  std::string rina_transport = "paper";        // workload.rina_transport (rina): paper | aimd (exp::CollectiveSettings)
  std::string rina_ag_relay = "members";       // workload.rina_ag_relay (rina): members | agent (exp::CollectiveSettings)
  std::string step_records;                    // run.step_records: a directory for ring runs' step records (exp/step_records.hpp); "" = none
  std::string queue_trace;                     // run.queue_trace: a directory for the queue traces of network runs (exp/queue_trace.hpp); "" = none
  std::string queue_trace_links;               // run.queue_trace_links: the links traced, "from->to, ..." by node names
  double queue_trace_from_ms = 0;              // run.queue_trace_from_ms: the simulated time the trace starts at
  double queue_trace_to_ms = 0;                // run.queue_trace_to_ms: ... and ends at (0: the run's end)
  std::string eq1_priority = "tensor";         // workload.eq1_priority (DSA): tensor (§V: "a tensor's
                                               //   priority") | packet (workload::TrainingConfig::eq1_per_tensor)
  // [transport]
  double init_window_kb = 60;          // transport.init_window_kb
  double ring_min_rto_us = 0;          // transport.ring_min_rto_us: the ring endpoints' RTO floor (0 = RingConfig's 200 us)
  double min_rto_us = 0;               // transport.min_rto_us: RTO floor, also the PS timeout floor (0 = the profile's)
  int reminder_after = 3;              // transport.reminder_after: retransmissions before a reminder
  bool ecn_per_window = false;         // transport.ecn_per_window (star): an ECN echo halves the window once per
                                       //   window of data (RFC 3168), not once per smoothed RTT (host::WorkerConfig)
  // [faults] (probabilities in [0, 1])
  double loss = 0;                     // faults.loss: every link, both directions
  double dup = 0;                      // faults.dup
  double reorder = 0;                  // faults.reorder
  double reorder_delay_us = 5;         // faults.reorder_delay_us: extra delay ~ U(0, x) for reordered packets
  double worker_loss = 0;              // faults.worker_loss: loss on one worker's link (job 1, rank 0), both directions
  double ps_loss = 0;                  // faults.ps_loss: loss on every PS link, both directions
  int fail_rank = -1;                  // faults.fail_rank (network kinds): this worker stops at faults.fail_at_ms (-1: none)
  double fail_at_ms = 0;               // faults.fail_at_ms
  // Sparse training (Zebra; experiment/sparse_point.hpp): set workload.sparse_model to run it.
  std::string sparse_model;            // workload.sparse_model: "" (dense) | oa | se | deeplight | ncf | lstm | trace
  std::string sparse_trace;            // workload.sparse_trace: with sparse_model = "trace", an ina-sparse-trace file
                                       //   (docs/zebra.md), relative to the scenario file
  double sparse_scale = 1;             // workload.sparse_scale: the model's size and keys per batch x this
  int sparse_row_width = 1;            // workload.sparse_row_width: values per key (an embedding row); the model x this
  int sparse_draws = 0;                // workload.sparse_draws: draws per batch of the synthetic model (0: the
                                       //   model's own, docs/zebra.md); sets how dense a batch is
  int hot_keys = 30000;                // zebra.hot_keys: the hot set at full size (x sparse_scale in the run)
  double principle_p = 0;              // zebra.principle_p: > 0 = Principle 1 sizes the hot set (T_k / T_n >= p)
  double principle_c = 1;              // zebra.principle_c: ... within c x switch.memory_mb (switch.memory_mb is
                                       //   already Zebra's share: the paper's 1 MB = 5 % of 20 MB)
  double sample_rate = 1;              // zebra.sample_rate: the hot set from this sample of the batches
  int profile_iterations = 0;          // zebra.profile_iterations: ... of these iterations before the measured (0: the measured)
  int registers = 16;                  // zebra.registers: register arrays the hot slots are spread over
  std::string zebra_placement = "heat";  // zebra.placement: heat | random (Fig. 10's baseline)
  bool layout_aware = true;            // zebra.layout_aware: Algorithm 1 at the workers (false: key order)
  int table_entries = 32768;           // zebra.table_entries: the switch's key table (the prototype's 32,768)
  int pairs = 9;                       // zebra.pairs: <key, value> pairs per packet (the prototype: 9)
  int ps_pairs = 0;                    // zebra.ps_pairs: ... on the streams to and from the PS (0: zebra.pairs;
                                       //   PS-lite over TCP: 120, a 1500-byte frame)
  int ps_ack_every = 1;                // zebra.ps_ack_every: those streams' cumulative acknowledgement per this
                                       //   many packets (1: each, Zebra's §III-F; 2: TCP's delayed acknowledgement)
  int machines = 0;                    // topology.machines (sparse): the workers share this many machines' NICs
                                       //   (0: a NIC each; the paper's testbed: 8)
  std::string zebra_arith = "fixed";   // zebra.arith: fixed (int32, exact) | float16-table (float gradients,
                                       //   float16 table adds on the switch, float32 at the PS; docs/zebra.md)
  std::string zebra_hot_results = "via-ps";  // zebra.hot_results: via-ps (the paper's §III-E: the switch's results
                                       //   to the PS, which sends every sum to the workers) | multicast (to the workers)
  // Ours: the sparse job in a shared pool beside a dense job (exp::SparseSettings::pool).
  std::string sparse_pool;             // zebra.pool: "" (Zebra's own registers) | a pool scheme that hosts sparse jobs (atp, dsa)
  int dense_workers = 0;               // zebra.dense_workers: the dense job beside it (0: none)
  double dense_mb = 0;                 // zebra.dense_mb: its tensor per worker, MiB of int32 values
  int dense_iterations = 1;            // zebra.dense_iterations: its allreduces, back to back
  // [run] (per-run knobs that may also be swept)
  std::string profile = "paper";       // run.profile: engine profile of the hosts (host/profile.hpp): paper | runtime
  bool verify = true;                  // run.verify: check every result against the exact sum
  double max_sim_ms = 10000;           // run.max_sim_ms: safety stop (a run hitting it is reported as failed)
  int threads = 1;                     // run.threads: threads one simulation runs on (multi-switch topologies;
                                       //   sim/partition.hpp splits it by racks; results do not depend on it)
  int partitions = 0;                  // run.partitions: the partitions those threads run, each thread its
                                       //   share one after another per window (0: one per 64 of the jobs'
                                       //   hosts, at least one per thread; exp::RunSplit)
  // Not a field: the directory of the scenario file (topology.file is relative to it).
  std::string scenario_dir;
};

struct Series {
  std::string name;                               // legend / panel name
  std::map<std::string, std::string> overrides;   // "section.key" -> value as text
};

struct Scenario {
  std::string file;        // path it was loaded from ("<embedded>" for built-ins)
  std::string name;        // [scenario] name
  std::string title;       // [scenario] title (plot title)
  Settings base;           // after applying the file's sections
  std::vector<std::string> schemes = {"switchml", "atp", "dsa"};  // run.schemes
  std::vector<uint64_t> seeds = {1};                               // run.seeds
  std::string sweep_key;             // sweep.key, e.g. "workload.jobs" (empty = single point x = 0)
  std::vector<std::string> sweep_values;  // sweep.values, as text, applied like overrides
  std::string x_label;               // sweep.label (default: the key)
  std::vector<Series> series;        // [[series]] tables; empty = one unnamed series
  std::vector<std::string> metrics = {"avg_jct_ms"};  // output.metrics: one plot per metric
  std::string y_label;               // output.y_label (default: the metric name)
  bool x_log = false;                // output.x_log
};

// Known scheme names (validated in run.schemes): the star simulator's, then
// the multi-switch collectives' (schemes::Engine::SimNetwork) not already listed.
const std::vector<std::string>& known_schemes();

// `sets` are `--set key=value` overrides (core/set_override.hpp),
// written into the document before it is read: any key of the file, settings
// and run.schemes, run.seeds, sweep.key, sweep.values, output.* alike (arrays
// as a comma list or a TOML array: --set run.seeds=1 --set sweep.values=1,4).
// A settings key that the sweep sets at every point (sweep.key) is refused.
Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& sets = {});
Scenario parse_scenario(const std::string& toml_text, const std::string& origin,
                        const std::vector<std::string>& sets = {});

// Applies "section.key=value" to settings with the same validation as the
// file; throws ScenarioError naming `origin`, the key and the value.
void apply_setting(Settings& s, const std::string& key, const std::string& value, const std::string& origin);

// An overlay: a TOML file of settings sections ([topology], [switch],
// [workload], [transport], [faults], [zebra], [run]'s profile/verify/
// max_sim_ms) applied over a scenario's base settings, as `--set` would; the
// scenario's series and sweep still apply on top. An optional [overlay]
// table names the variant: `name` is appended to the scenario's name
// ("fig8-calibrated"), `title` to its title. A key that is not a setting is
// a ScenarioError naming `origin`, the key and the value; every point is
// checked again. DSA's calibrated variant is one (scenarios/dsa/overlay/calibrated.toml).
void apply_overlay(Scenario& sc, const std::string& toml_text, const std::string& origin);
Scenario load_overlay_file(Scenario sc, const std::string& path);
// The settings keys of `--set` overrides applied to sc.base once more, as
// load_scenario_file read them (`ina sim`: a --set wins over an --overlay),
// every point checked again.
void apply_setting_sets(Scenario& sc, const std::vector<std::string>& sets);
// Keeps the series named in `names` (`ina sim --series`, in the file's
// order); empty keeps all. A name the file does not have is a
// ScenarioError naming the file, --series, the name and the file's series;
// sc is then unchanged.
void keep_series(Scenario& sc, const std::vector<std::string>& names);

// Cross-field checks (e.g. jobs * workers_per_job > hosts), run on every
// concrete Settings before anything is simulated.
void validate(const Settings& s, const std::string& origin);
// The same, plus the checks that depend on the schemes to run (switchml's regions).
void validate(const Settings& s, const std::vector<std::string>& schemes, const std::string& origin);

// The star's workers of each job: workload.job_workers, or workload.jobs x
// workload.workers_per_job. Each job's segment {MemID, Size} from
// switch.segments (empty: none given). Both throw ScenarioError naming
// `origin`, the field and the value (validate() runs them on every point).
std::vector<int> star_job_workers(const Settings& s, const std::string& origin = "settings");
std::vector<std::pair<uint32_t, uint32_t>> star_segments(const Settings& s, const std::string& origin = "settings");

// Expands a scenario into concrete points: for each series, for each sweep
// value, the Settings with overrides applied (series first, then the sweep).
struct Point {
  std::string series;
  double x = 0;
  Settings settings;
};
std::vector<Point> expand(const Scenario& sc);

}  // namespace ina::exp
