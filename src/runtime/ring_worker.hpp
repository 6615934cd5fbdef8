#pragma once
// `ina ring-worker`: one rank of a ring job (RAR, H-AR, Rina) over UDP, or
// of ATP over racks (a host::WorkerNode whose datagrams go to its rack's ToR;
// `--ps` runs that job's PS, host::ParameterServer, behind rack 0's ToR). The
// rank is a host::RingEndpoint (the simulator's very node) in a UdpEngine
// whose address book is the job's layout (runtime/ring_layout.hpp): datagrams
// go straight to the peer or ToR they are addressed to, and are accepted only
// from the registered address of their claimed source.
//
// Gradients are host::SyntheticTensor values (int32, the same stream on every
// rank; the exact sum is known in closed form): every result value is checked.
//
// Start and end are barriers in a shared directory (`--barrier DIR`, like
// gloo's file store): a rank starts its first allreduce when every rank has
// bound its socket (file ready.R), and, once done, keeps answering its peers
// (a peer may still miss an acknowledgement) until every rank is done (file
// done.R). Then nobody needs anything: the rank waits until its engine holds
// no timer and no packet, and reports them (a leak is a failure).
//
// Failures (Rina §IV-C; --fail-detect-ms MS > 0, ring schemes with a plan
// that survives a failure: RAR and Rina). Detection: every rank rewrites its
// heartbeat file alive.R (a counter, replaced atomically) every MS/10 (at
// least every 5 ms) while it runs; a member of the current membership whose
// counter has not changed for MS by the observer's own clock is silent
// (ranks whose done file for the current epoch exists are not watched; an
// observer that itself did not look for MS/2 starts its clocks again, and
// one that finds more than half of the others silent suspects nobody). Each
// rank keeps state.E.R (E: the next epoch) naming the members it finds
// silent and its current op, and removes it when they beat again. The
// control node, the lowest member it does not find silent (Rina's global
// control node, the agent of group 0), waits until every member it does not
// find silent names the same set, re-plans the job with
// host::ring_failover (the simulator's very decision), registers the job
// under epoch E at every ToR switch holding it ("reconfigure" on its
// control port, proven with the job's key: runtime/control.hpp; short
// calls, heartbeats between them, an error retried at the next look), and
// then publishes membership.E.json (survivors, node ids, racks, ToRs, the
// ToRs holding the job, restart op) with link(2): the first control node
// wins, another applies its file. Every decision up to the re-plan is
// host::FailureAgreement's (sans-I/O); this file does the I/O. Each
// survivor reads the file, checks it (host::membership_problem), restricts its tensor's check to the survivors'
// contributions and reconfigures its endpoint (host::RingEndpoint::
// reconfigure); the end barrier then waits for the survivors' done files of
// epoch E; a rank the membership leaves out stops with an error.
// --crash-at-op K injects the failure: the rank's endpoint stops for good
// (drops everything, sends nothing) inside op K, and the process writes its
// report ("crashed": true) and exits at once.
//
// Datagram authentication: a layout with "datagram_salt" (ring_layout.hpp)
// has every datagram of the job tagged; the rank (or PS) derives the datagram
// key from the job's key (--key-file, INA_JOB_KEY or INA_SWITCH_KEY) and the
// salt, and refuses to start without the key. The failure handling's own
// traffic is files in --barrier and TCP calls to the ToRs, never UDP.
#include <cstdint>
#include <string>

#include "host/profile.hpp"
#include "runtime/udp_engine.hpp"

namespace ina::rt {

struct RingWorkerConfig {
  std::string layout;        // the layout file (every ToR serving the job with its address)
  unsigned rank = 0;
  bool ps = false;           // ATP over racks: run the job's PS (behind rack 0's ToR), not a rank
  uint64_t bytes = 1 << 20;  // per allreduce (int32 values: bytes / 4)
  unsigned iterations = 1;
  uint64_t seed = 1;
  FaultConfig faults;
  int udp_fd = -1;           // a bound UDP socket to adopt (ina run); -1: bind the layout's address
  std::string barrier;       // directory for the start and end barriers
  std::string report;        // JSON report file ("" = none)
  double timeout_s = 300;
  // The ring transport's RTO floor: the runtime profile's, as every other
  // runtime transport's (processes sharing cores get descheduled for ms).
  Time min_rto = host::kRuntimeProfile.min_rto;
  // Queueing delay that halves the window (host/delay_signal.hpp;
  // tc-shaped links and kernel bridges mark no ECN). 0: off. Below the
  // runtime profile's 10 ms: in a ring, delay-controlled senders share links
  // (an autonomous rank's shard and an INA rack's sum into its agent), whose
  // standing queue sits near the target, and round trips of the target plus
  // its spread must stay below the 20 ms RTO floor (at 10 ms they reached
  // it: docs/results/rina.md, Fig. 12 on the emulated cluster).
  Time delay_target = 4 * kMs;
  double window_kb = 0;      // initial send window (0: kDefaultWindowKb, in bytes whatever the payload)
  // The PS (ps): the floor of its reminder timeout (0: the runtime
  // profile's). Scaled networks raise it with the RTO floor: a PS that
  // reminds before a slow path's partial can arrive takes apart what a
  // switch is still aggregating.
  Time ps_min_timeout = 0;
  // This worker's link rate (Gbit/s; 0: unknown). Given, a Rina worker of an
  // INA rack paces what it sends at most at it, as in the simulator
  // (host::RingConfig::nic_gbps): its window does not queue behind its own link.
  double nic_gbps = 0;
  bool log = true;
  // Failures (Rina §IV-C; ring schemes RAR and Rina, see "Failures" above).
  double fail_detect_ms = 0; // > 0: heartbeats; a rank whose heartbeat has not changed for this long has failed
  int crash_at_op = -1;      // fault injection: stop for good inside this op (0-based), then exit
  unsigned crash_after = 16; //   after this many packets received in it (or at its end, if fewer came)
  std::string key_file;      // the job's key: the datagram key of a layout with "datagram_salt", and the
                             //   control node's reconfiguration of the ToRs ("": INA_JOB_KEY, else
                             //   derived from INA_SWITCH_KEY)
  bool datagram_auth = false;// require tagged datagrams: refuse a layout without "datagram_salt"
};

// The shortest --fail-detect-ms: a rank looks at the heartbeats about every
// 10 ms, and a look more than half the detection time after the previous
// one restarts the clocks (host::FailureAgreement), so a detection time
// near 20 ms would never detect anything.
inline constexpr double kMinFailDetectMs = 50;

// Publishes `text` as the file `path` unless it exists: written to
// `path`.tmp.`rank` (two ranks never share a temporary file), then linked
// into place (link(2) never replaces), so of several writers the first
// wins. Returns whether this one did; throws RuntimeError on I/O errors.
bool publish_once(const std::string& path, uint16_t rank, const std::string& text);

// Returns 0 (every value exact, no state left), 3 (a value differed) or 1
// (leaked timers or packets); throws RuntimeError on bad input or timeout.
int run_ring_worker(const RingWorkerConfig& cfg);

}  // namespace ina::rt
