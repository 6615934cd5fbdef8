#pragma once
// `ina run` / `ina train-py` on loopback, shared by the launcher's files (private to them):
//   launcher.cpp     the entry: validation, resource checks, the work directory, the Run
//                    (clock, processes, failure report) and the helpers both launches use
//   launch_star.cpp  one switch for every job (a star): switch, PSes, workers or scripts
//   launch_ring.cpp  one job over a static layout (ring schemes, ATP over racks): ToRs, PS, ranks
// The steps every launcher takes with its children are in runtime/launch_steps.hpp.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/time.hpp"
#include "runtime/launch_steps.hpp"
#include "runtime/launcher.hpp"
#include "runtime/stderr_tee.hpp"
#include "runtime/supervisor.hpp"

namespace ina::rt {
namespace launching {

namespace fs = std::filesystem;
using Failure = LaunchFailure;

// One launch on loopback: its configuration, clock, processes and reporting.
// A failure is reported last: after the other processes were stopped (and
// said what they say when their job goes), with a failed script's own last
// lines of standard error.
class Run {
 public:
  Run(const LaunchConfig& c, std::ostream& o);

  const LaunchConfig& cfg;
  std::ostream& out;
  const Time t_start, deadline;
  const bool with_ps;
  const std::string me;  // the command, in messages
  Supervisor sup;
  StderrTee tee;  // train-py: the scripts' stderr

  std::vector<std::string> quiet() const { return cfg.verbose ? std::vector<std::string>{} : std::vector<std::string>{"--quiet"}; }
  double wall_seconds() const { return to_ms(monotonic_now() - t_start) / 1000; }

  // Each PS writes its statistics here at exit (also when stopped or failed).
  fs::path ps_stats_path(unsigned j) const { return fs::path(cfg.work_dir) / fmt::format("ps-job{}.json", j); }
  nlohmann::json read_ps_stats() const;
  nlohmann::json config_json() const;
  void write_json(const nlohmann::json& j) const;

  // Stops every process, prints the failure (and a failed script's last
  // stderr lines), writes the JSON summary; returns the exit status.
  int fail(const Failure& f);
};

// `ina run` / `ina train-py` with one switch for every job (launch_star.cpp).
int launch_star(Run& run);
// `ina run` for a static layout: one job of `ina ring-worker`s (launch_ring.cpp).
int launch_ring(Run& run);

// Helpers both launches use (launcher.cpp).

// "1.0 MiB", "4.0 KiB", "12 B".
std::string mib(uint64_t bytes);
// The run's injected faults as flags of `ina switch`, `ina ps`, `ina ring-worker`.
std::vector<std::string> fault_args(const LaunchConfig& c);
// Whether the scheme's jobs have a PS (the registry's word; an unknown name is refused by validate()).
bool has_ps(const std::string& scheme);
// --ina-racks: "" (every rack), "none", or "0,1,..."; throws naming --ina-racks.
std::vector<unsigned> ina_rack_list(const LaunchConfig& c);
// Datagrams an engine refused (malformed or foreign) that came from a member's
// address: a protocol bug in this run. Those from addresses no member has
// (rx_unattributed) are noise from outside the job, e.g. a stray datagram to
// the switch's port: reported by noise_line, never a failure.
uint64_t member_refused(const nlohmann::json& engine);
std::string noise_line(uint64_t n);
// Starts `ina switch` (args + the run's memory, payload, seeds, faults) and
// waits until it reports its port once both sockets are bound.
std::optional<Failure> start_run_switch(Supervisor& sup, const LaunchConfig& cfg, std::vector<std::string> args,
                                        const std::string& name, unsigned rank, Time deadline, Child*& sw, uint16_t& port);

}  // namespace launching
}  // namespace ina::rt
