#pragma once
// Engine profiles: the host settings that differ on purpose between the
// papers' testbed and the UDP runtime. `paper` reproduces DSA's evaluation
// (microsecond RTTs, a dedicated switch, lossless unless a scenario injects
// faults); `runtime` suits software switches and processes on shared hosts,
// where scheduling delays reach tens of milliseconds. The simulator uses
// `paper` unless a scenario says `run.profile = "runtime"`; the runtime
// (ina::Communicator, `ina ps`, `ina run`) uses `runtime` unless its
// configuration says `profile = "paper"` (`INA_PROFILE`, `ina ps --profile`).
// docs/architecture.md ("Engine profiles") gives the reason for every field.
//
// WorkerConfig and PsConfig default to `paper`; rt::CommConfig and
// rt::PsDaemonConfig default to `runtime`.
#include <cstddef>
#include <string>
#include <string_view>

#include "core/time.hpp"

namespace ina::host {

struct WorkerConfig;
struct PsConfig;

struct Profile {
  std::string_view name;
  // Worker transport (host/worker.hpp).
  Time min_rto;                 // RTO floor
  bool fast_retransmit;         // time-based (RACK-style) fast retransmit
  Time delay_target;            // queueing delay that halves the window like an ECN echo (0: off)
  size_t retain_ops;            // completed ops kept to answer a PS's GradRequest
  // PS (host/ps.hpp).
  Time ps_min_timeout;          // floor of the reminder timeout
  bool targeted_known_results;  // a result a worker already held goes only to the workers waiting for it

  // Sets these fields of a worker's or PS's configuration, leaving the rest.
  void apply(WorkerConfig& w) const;
  void apply(PsConfig& p) const;
};

inline constexpr Profile kPaperProfile{
    .name = "paper",
    .min_rto = 1 * kMs,
    .fast_retransmit = false,
    .delay_target = 0,
    .retain_ops = 64,
    .ps_min_timeout = 1 * kMs,
    .targeted_known_results = false,
};

inline constexpr Profile kRuntimeProfile{
    .name = "runtime",
    .min_rto = 20 * kMs,
    .fast_retransmit = true,
    .delay_target = 10 * kMs,
    .retain_ops = 8,
    .ps_min_timeout = 5 * kMs,
    .targeted_known_results = true,
};

// By name; nullptr if unknown.
const Profile* find_profile(std::string_view name);
// By name; throws std::invalid_argument naming the known profiles.
const Profile& profile(std::string_view name);
// "paper or runtime", for messages.
std::string profile_names();

}  // namespace ina::host
