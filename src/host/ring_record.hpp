#pragma once
// One step of an op at one ring endpoint (host::RingEndpoint::step_log, the
// last op started; exp::CollectiveResult::step_log for job 0): when the step
// became current, its send started (after the agent's pull and any
// straggler delay) and was fully acknowledged, its incoming shard was
// complete (possibly before the step became current: a shard may arrive
// early), and the step ended. kNever where the step has no such event.
// For reports and the time model's comparison (docs/results/rina_bom.md).
#include <cstdint>

#include "core/time.hpp"

namespace ina::host {

struct RingStepRecord {
  uint8_t code = 0;                  // the step code (the tag's low byte)
  uint32_t send_pkts = 0, recv_pkts = 0;
  double cwnd = 0;                   // the window when the send started (packets)
  Time current = kNever, send_begin = kNever, send_done = kNever, recv_done = kNever, done = kNever;
};

}  // namespace ina::host
