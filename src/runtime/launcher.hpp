#pragma once
// `ina run`: a local job on loopback. Starts `ina switch`, one `ina ps` per
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

namespace ina::rt {

struct LaunchConfig {
  std::string binary;             // the `ina` executable; empty: /proc/self/exe
  std::string scheme = "dsa";     // dsa | atp | switchml
  unsigned workers = 2;           // per job
  unsigned jobs = 1;
  uint64_t size_bytes = 1 << 20;  // per allreduce
  unsigned iterations = 3;
  uint16_t payload = 64;          // values per packet
  uint64_t memory_bytes = 5'000'000;
  double loss = 0, duplicate = 0, reorder = 0;  // per datagram, in every process's send path
  double delay_us = 0;            // extra delay for one worker's datagrams ...
  unsigned delay_job = 0, delay_rank = 0;       // ... this one (job 0: nobody)
  std::vector<uint32_t> priorities;  // per job (DSA); empty: job j gets 2^20 / j
  double window_kb = 0;           // 0: the communicator's default
  uint16_t port = 0;              // switch port; 0: ephemeral
  double timeout_s = 300;
  uint64_t seed = 1;
  std::string json_out;           // write a JSON summary here
  std::string work_dir;           // generated configs and reports; empty: a fresh temp dir (removed after)
  bool verbose = false;           // children log their events
};

// Returns the process exit status: 0 success, 1 failure, 3 a result
// mismatch, 130/143 interrupted. Messages go to `out` (summary) and stderr.
int launch(const LaunchConfig& cfg, std::ostream& out);

}  // namespace ina::rt
