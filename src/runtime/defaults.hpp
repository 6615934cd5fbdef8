#pragma once
// Defaults of the UDP runtime shared by its commands and libraries.
#include <cstdint>

namespace ina::rt {

// The runtime's default payload (`ina switch`, `ina run`, `ina train`):
// 2048 int32 values, an 8228-byte datagram, the largest that fits one
// 9000-byte jumbo frame (so no IP fragmentation on a jumbo-frame network),
// and with segmentation offload the payload one switch thread serves best
// among those that do (docs/results/runtime.md, "Payload defaults"). The
// Tofino-faithful 64 values (256 B) stay one option away (--payload 64).
constexpr uint16_t kDefaultPayload = 2048;

}  // namespace ina::rt
