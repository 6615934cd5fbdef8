// SwitchML: synchronous INA with an isolated per-job region.
//
// The job's region holds two pools of S = region_size / 2 slots. Packet PSN
// uses slot offset + ((PSN / S) % 2) * S + PSN % S. Workers keep at most S
// packets outstanding past their lowest unacknowledged PSN, so when PSN + 2S
// reaches a slot, every worker already holds PSN's result and the slot may be
// reused. Until then the completed slot keeps the result (the "shadow copy")
// and answers retransmissions of workers whose result was lost. No PS.
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class SwitchMLSwitch final : public SwitchProgram {
 public:
  using SwitchProgram::SwitchProgram;

 protected:
  uint32_t index_of(const SwitchJob& j, uint32_t psn) const override {
    const uint32_t s = j.region_size / 2;
    return j.region_offset + ((psn / s) % 2) * s + psn % s;
  }

  void on_data(Packet* p, const SwitchJob& j, Time, Effects& fx) override {
    const uint32_t i = p->h.agg_index;
    Agg& a = agg(i);
    const uint64_t k = key_of(p->h.job, p->h.psn);
    if (a.key == k) {
      if (a.complete) {
        // Retransmission after completion: unicast the kept result.
        const NodeId to = j.workers[p->h.rank];
        load_into(i, *p);
        p->h.type = PktType::Ack;
        p->h.flags = flag::kResult;
        p->h.dst = to;
        p->h.src = id();
        ++st_.resend_served;
        fx.send(p);
        return;
      }
      if (a.bitmap & p->h.bitmap) { ++st_.duplicates; fx.free(p); return; }
      accumulate(i, *p);
    } else if (a.key == 0 || static_cast<uint32_t>(a.key) < p->h.psn) {
      reserve(i, *p);  // a new phase of this slot
    } else {
      ++st_.stale;     // a delayed copy from a phase already reused
      fx.free(p);
      return;
    }
    if (!full(i, j)) { fx.free(p); return; }
    a.complete = 1;
    ++st_.completed;
    load_into(i, *p);
    multicast_result(p, j, fx);
  }
};

}  // namespace

std::unique_ptr<SwitchProgram> make_switchml(const SwitchConfig& cfg) { return std::make_unique<SwitchMLSwitch>(cfg); }

}  // namespace ina::dp
