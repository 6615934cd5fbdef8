#pragma once
// The steps every launcher (`ina run`, `ina train-py`, ina-train) takes with
// its child processes (runtime/supervisor.hpp): start a switch and learn its
// port, wait for the workers while naming the first process that failed, let
// the PSes leave, stop the switches, and read the reports the children left.
// Each step returns the failure it met (the caller reports it and stops the
// rest); none waits beyond its deadline.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.hpp"
#include "runtime/supervisor.hpp"

namespace ina::rt {

// Why a run ends early: the exit status, the message, and the process that failed (if one did).
struct LaunchFailure {
  int status;
  std::string message;
  const Child* child = nullptr;
};

// 128 + the signal the launcher was stopped by.
LaunchFailure interrupted_failure(const Supervisor& sup);
// The child's status: 3 if it exited 3 (a result mismatch), else 1.
LaunchFailure child_failure(const Child& c);

// Spawns `binary args... --ready-fd N` as Kind::Switch `name` (job, rank, with
// `env` added to its environment) and waits until it writes its port and a
// newline to that pipe (within 15 s and `deadline`); sets `sw` and `port`.
std::optional<LaunchFailure> start_switch(Supervisor& sup, const std::string& binary, std::vector<std::string> args,
                                          const std::string& name, unsigned job, unsigned rank, Time deadline,
                                          Child*& sw, uint16_t& port, std::vector<std::string> env = {});

// How wait_for_workers watches and orders the failures it sees.
struct WorkerWait {
  // Among children that failed together, a worker (a user's script) is named
  // before a PS or switch that failed because of it.
  bool workers_first = false;
  // Called after progress_after_s (0: never) and then every progress_every_s
  // with the seconds elapsed, the workers finished and all workers.
  double progress_after_s = 0, progress_every_s = 5;
  std::function<void(double, unsigned, unsigned)> progress;
  // A failed child for which echo() holds said it failed because another's
  // failure aborted its job: it is named after one that did not.
  std::function<bool(const Child&)> echo;
};

// Until every worker has exited 0. Anything else that exits (a switch even
// with status 0; a PS only with a failure), a signal to the launcher or the
// deadline is the failure returned.
std::optional<LaunchFailure> wait_for_workers(Supervisor& sup, Time deadline, double timeout_s, const WorkerWait& how = {});

// After the workers: every PS exits 0 (the switch tells it its job finished)
// within 10 s and `deadline`.
std::optional<LaunchFailure> wait_for_ps_exit(Supervisor& sup, Time deadline);

// SIGTERM to every switch, then each must exit 0 within 5 s.
std::optional<LaunchFailure> stop_switches(Supervisor& sup, const std::vector<Child*>& switches);

// A JSON file a child wrote (report, statistics); discarded if it is missing,
// does not parse, or nests deeper than kMaxJsonDepth (core/json_depth.hpp;
// checked before the recursive parser sees it).
nlohmann::json read_json_report(const std::string& path);

}  // namespace ina::rt
