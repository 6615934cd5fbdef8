#include "experiment/estimate_ring.hpp"

#include <algorithm>
#include <stdexcept>

#include "host/ring_footprint.hpp"
#include "host/value_store.hpp"

namespace ina::exp {

RingBuffers ring_buffers(const std::vector<std::vector<host::RingStage>>& plan, uint64_t iterations,
                         uint16_t payload_values, uint64_t ahead, uint64_t ahead_ina) {
  RingBuffers b;
  const uint16_t width = std::max<uint16_t>(1, payload_values);
  for (size_t rank = 0; rank < plan.size(); ++rank) {
    const auto me = static_cast<uint16_t>(rank);
    bool ina = false;  // in a Rina group in some stage
    for (const host::RingStage& st : plan[rank])
      for (const host::RingGroup& g : st.groups)
        if (g.ina() && std::find(g.ranks.begin(), g.ranks.end(), me) != g.ranks.end()) ina = true;
    const uint64_t a = ina ? ahead_ina : ahead;
    host::RingFootprint f;
    try {
      f = host::ring_footprint(plan[rank], me, width, a, std::max<uint64_t>(iterations, 1));
    } catch (const std::invalid_argument&) {
      continue;  // a rank the endpoint refuses: the run reports it
    }
    // The simulator's gradients have a basis (host::SyntheticTensor), so a
    // buffer is a few records (host/value_store.hpp), not its values.
    b.values += host::kValueRecordBytes * kRecordsPerBuffer * (f.held_buffers + 1);
    b.records += f.slot_bytes + host::kRingSendRecordBytes * f.send_packets;
    b.send_packets = std::max(b.send_packets, f.send_packets);
  }
  return b;
}

}  // namespace ina::exp
