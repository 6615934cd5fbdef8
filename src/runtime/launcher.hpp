#pragma once
// `ina run`: a local job on loopback. Ring schemes: see LaunchConfig::racks. Starts `ina switch`, one `ina ps` per
// job (shared policies) and N `ina worker`s per job as child processes of the
// same binary, all in one new process group; verifies every result (the
// workers do, against the exact reference); prints goodput per job and the
// switch's statistics; shuts everything down.
//
// Never hangs and leaves no orphans:
//  - children get PR_SET_PDEATHSIG, so they die with the launcher even if it is killed hard;
//  - SIGINT / SIGTERM to the launcher are forwarded to the group (SIGTERM,
//    then SIGKILL after a grace period), and the launcher exits 130 / 143;
//  - the first child that dies unexpectedly (non-zero status, a signal, or a
//    daemon leaving early) is named, the rest are stopped, and the exit status is non-zero;
//  - the whole run is bounded by `timeout_s`.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/defaults.hpp"
#include "schemes/registry.hpp"

namespace ina::rt {

struct LaunchConfig {
  std::string binary;             // the `ina` executable; empty: /proc/self/exe
  std::string scheme{schemes::kDefaultRuntimeScheme};  // a runtime scheme of the registry
  unsigned workers = 2;           // per job (when job_workers is empty)
  unsigned jobs = 1;
  std::vector<unsigned> job_workers;  // one worker count per job (`--workers 3,2`); empty: `workers` each
  uint64_t size_bytes = 1 << 20;  // per allreduce
  unsigned iterations = 3;
  uint16_t payload = kDefaultPayload;  // values per packet (runtime/defaults.hpp)
  uint64_t memory_bytes = 5'000'000;
  double loss = 0, duplicate = 0, reorder = 0;  // per datagram, in every process's send path
  double delay_us = 0;            // extra delay for one worker's datagrams ...
  unsigned delay_job = 0, delay_rank = 0;       // ... this one (job 0: nobody)
  std::vector<uint32_t> priorities;  // per job (DSA); empty: job j gets 2^20 / j
  double window_kb = 0;           // 0: the communicator's default
  uint16_t port = 0;              // switch port; 0: ephemeral
  unsigned switch_threads = 1;    // `ina switch --threads` (job J on thread J mod T; not for static layouts)
  bool datagram_auth = false;     // every process with --datagram-auth (datagram_tag.hpp; layouts: a salt in the layout)
  double timeout_s = 300;
  uint64_t seed = 1;
  std::string json_out;           // write a JSON summary here
  std::string work_dir;           // generated configs and reports; empty: a fresh temp dir (removed after)
  bool verbose = false;           // children log their events
  bool force = false;             // start beyond the process bound or the memory estimate (never beyond RLIMIT_NPROC)
  // <key, value> schemes (zebra, ps-lite): the workers run sparse allreduces
  // of size_bytes / 4 pairs (WorkerAppConfig::sparse). Zebra's hot set: the
  // keys of hot_keys_file, or else the hot_set_size keys a profile of every
  // rank's first hot_iterations batches finds hottest. A zebra job without
  // one aggregates nothing in the switch: refused.
  uint64_t hot_set_size = 32768;  // the Zebra prototype's key table (dp::ZebraConfig::kv_table_entries)
  unsigned hot_iterations = 1;
  std::string hot_keys_file;
  // Ring schemes (rar, h-ar, rina; one job): the workers in `racks` equal
  // racks of consecutive ranks; Rina, and ATP / DSA over racks (at least
  // one): the racks listed in `ina_racks` ("0,1"; "none"; empty: every rack)
  // have an INA ToR, one `ina switch` each. The
  // workers are `ina ring-worker`s reading a generated layout
  // (runtime/ring_layout.hpp) and talking to each other and their ToR directly.
  unsigned racks = 1;
  std::string ina_racks;
  // Rina above the ToR (§IV-D): one INA switch above the racks listed here
  // ("0,1"; empty: none), the layout's "aggregation" entry; their ranks are
  // one group, each INA ToR below it a level that aggregates its rack first.
  std::string rina_above;
  // Ring schemes that survive a failure (rar, rina; Rina §IV-C): rank
  // `fail_rank` stops for good inside op `fail_at_op` (`ina ring-worker
  // --crash-at-op`); every rank watches heartbeats (--fail-detect-ms) and the
  // job finishes over the survivors. -1: no failure.
  // `ina train-py`: the workers run this command (argv[0] an absolute path)
  // instead of `ina worker`, one job, each with the job's settings in its
  // environment: INA_CONFIG (the job's [communicator]/[faults] file),
  // INA_RANK, INA_JOB_KEY, INA_FAULT_SEED and torchrun's RANK, WORLD_SIZE,
  // LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (a free loopback
  // port for torch.distributed's own rendezvous). The run then checks the
  // processes' exit statuses and the switch's statistics; --size and
  // --iterations do not apply.
  std::vector<std::string> command;
  // `ina train-py`: prepended to the workers' PYTHONPATH (the `ina` package
  // built or installed with this binary), so that `import ina` finds it.
  std::string python_path;
  // Progress lines on stderr while the workers run: the first after
  // progress_after_s, then every progress_every_s (0: none).
  double progress_after_s = 3, progress_every_s = 5;
  int fail_rank = -1;
  int fail_at_op = -1;
  double fail_detect_ms = 500;

  unsigned workers_of(unsigned job) const { return job_workers.empty() ? workers : job_workers.at(job - 1); }
  unsigned total_workers() const;
};

// What a launch needs, computed before anything starts: every process of the
// run (launcher, switch, PSes, workers), their threads (a worker has the
// Communicator's I/O thread besides its main thread), and peak memory (per
// process: kProcessBaseline; per worker: its gradient, the fixed-point copy
// and the results the Communicator retains, about 7 x --size; the switch's
// register arrays).
struct LaunchEstimate {
  uint64_t processes = 0, threads = 0, memory_bytes = 0;
  uint64_t worker_bytes = 0, switch_bytes = 0;  // per worker; the switch's arrays
};
inline constexpr uint64_t kProcessBaseline = 8 << 20;
LaunchEstimate estimate_launch(const LaunchConfig& cfg);

// Throws RuntimeError naming --workers / --jobs (and the numbers) if the run
// would start more processes than 64 per CPU or need more memory than
// MemAvailable (unless cfg.force), or more tasks than RLIMIT_NPROC.
void check_launch_resources(const LaunchConfig& cfg);

// Returns the process exit status: 0 success, 1 failure, 3 a result
// mismatch, 130/143 interrupted. Messages go to `out` (summary) and stderr;
// the failure's message is printed last, after the other processes were
// stopped. `ina train-py`: the scripts' standard error passes through the
// launcher, which adds the last lines of a failed script's to its message.
// With json_out, the JSON summary is written on every outcome after the
// configuration was accepted: "ok", "problems", and on a failure "failure"
// naming the process (name, kind, job, rank, pid, exit_code or signal) and
// the message; "ps" holds each PS's statistics (PsStats, incl. "malformed").
int launch(const LaunchConfig& cfg, std::ostream& out);

}  // namespace ina::rt
