#pragma once
// `ina ps`: the PS / fallback server of one job. Joins the job at the switch
// (control.hpp), then hosts a host::ParameterServer in a Host UdpEngine whose
// gateway is the switch, until the switch reports the job finished.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/auth.hpp"
#include "host/profile.hpp"
#include "runtime/udp_engine.hpp"

namespace ina::rt {

struct PsDaemonConfig {
  Endpoint sw = Endpoint::parse("127.0.0.1:7700");
  uint16_t job = 1;
  unsigned nworkers = 1;
  Key key{};                // the job's credential; unless has_key, from INA_JOB_KEY / INA_SWITCH_KEY
  bool has_key = false;
  std::string bind_ip;      // empty: the address that reaches the switch
  FaultConfig faults;
  // Defaults: the `runtime` profile (host/profile.hpp); `ina ps --profile paper` selects the papers'.
  Time min_timeout = host::kRuntimeProfile.ps_min_timeout;                   // reminder timeout floor
  bool targeted_known_results = host::kRuntimeProfile.targeted_known_results;  // host::PsConfig; off: the papers' multicast
  // Require datagram authentication (datagram_tag.hpp): refuse a switch that
  // does not tag. Tags are used whenever the switch announces them.
  bool datagram_auth = false;
  Time connect_timeout = 10 * kSec;
  Time rendezvous_timeout = 60 * kSec;
  // With `log`, a job that takes longer than this to assemble is said on stderr.
  Time assemble_notice_after = 5 * kSec;
  bool log = true;
};

class PsDaemon {
 public:
  // Connects and joins (blocking, bounded by the timeouts); throws RuntimeError.
  explicit PsDaemon(const PsDaemonConfig& cfg);
  ~PsDaemon();
  // Serves until the job finishes (returns) or is aborted (throws
  // RuntimeError with the switch's reason), or until request_stop().
  void run();
  void request_stop();  // thread-safe, async-signal-safe
  UdpEngine& engine();
  nlohmann::json stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ina::rt
