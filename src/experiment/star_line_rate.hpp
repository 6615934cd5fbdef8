#pragma once
// The star workload of `ina bench sim` (sim/star_line_rate_1ms) and of its
// ns-3 baseline (bench/baselines/ns3_star.cc): N hosts on one switch, each
// on its own pair of links (rate `gbps`, one-way delay `delay`), every host
// streaming packets of header_bytes + 4 * payload_values bytes (306 B) to
// the switch with `window` packets outstanding (above the bandwidth-delay
// product: the uplinks stay busy), the switch aggregating them (SwitchML
// program: a slot completes when all N contributions arrived, then its
// result goes to every host). Runs until `duration` of simulated time.
//
// Hops: a hop is one packet delivered at the far end of one link by
// `duration` (a delivery at exactly `duration` counts). Here that is
//   up hops   = data packets delivered host -> switch, and
//   down hops = result packets delivered switch -> host;
// hops = up + down; nothing else crosses a link in this workload (no
// retransmission happens: `retransmits` says so). On an idle start every
// host's k-th packet (k = 0, 1, ...) reaches the switch at (k + 1) s + d and
// its result reaches every host at (k + 2) s + 2 d, with s the serialization
// time of one packet and d the delay, so per host
//   up = floor((T - d) / s),  down = floor((T - 2 d) / s) - 1,
// and aggregations = up (all hosts' k-th packets arrive together).
#include <cstdint>

#include "core/time.hpp"

namespace ina::exp {

struct StarLineRateSettings {
  int hosts = 16;
  Time duration = 1 * kMs;
  double gbps = 100;
  Time delay = 2500 * kNs;
  uint16_t payload_values = 64;
  uint32_t header_bytes = 50;  // 50 + 4 * 64 = 306 B on the wire
  uint32_t window = 512;       // packets outstanding per host (the BDP is ~410 at 100 Gbps, 2.5 us)
  uint64_t memory_bytes = 5 << 20;  // switch aggregator memory
};

struct StarLineRateResult {
  uint64_t hops = 0, up_hops = 0, down_hops = 0;
  uint64_t aggregations = 0;  // slots completed at the switch
  uint64_t events = 0;        // hops plus timer firings
  uint64_t retransmits = 0;   // all hosts
  // Every value of every result a host receives is compared with the host
  // count (every gradient value is 1): values compared, and those that differed.
  uint64_t values_checked = 0, bad_values = 0;
  // Every value of every result delivered was checked and right (checked = down hops x payload, none bad).
  bool values_ok(const StarLineRateSettings& s) const {
    return bad_values == 0 && values_checked == down_hops * s.payload_values;
  }
  uint32_t pool_slots = 0;    // the job's slots per pool (hosts keep at most this many past their lowest unacknowledged packet)
  double wall_s = 0;          // wall time of the simulation loop alone (not setup)
  double cpu_s = 0;           // CPU time of the same (the thread's own: less disturbed by a shared machine)
};

// Builds and runs one star; throws std::invalid_argument for hosts outside 1..64.
StarLineRateResult run_star_line_rate(const StarLineRateSettings& s);

}  // namespace ina::exp
