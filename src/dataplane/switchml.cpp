// SwitchML: synchronous INA with an isolated per-job region.
//
// The job's region holds two pools of S = region_size / 2 slots. Packet PSN
// uses slot offset + ((PSN / S) % 2) * S + PSN % S. Workers keep at most S
// packets outstanding past their lowest unacknowledged PSN, so when PSN + 2S
// reaches a slot, every worker already holds PSN's result and the slot may be
// reused. Until then the completed slot keeps the result (the "shadow copy")
// and answers retransmissions of workers whose result was lost. No PS.
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class SwitchMLSwitch final : public SwitchProgram {
 public:
  SwitchMLSwitch(const SwitchConfig& cfg, std::string_view scheme) : SwitchProgram(cfg, scheme), complete_(n_) {}

 protected:
  void check_job(const SwitchJob& j) const override {
    if (j.region_size % 2)
      throw std::invalid_argument(fmt::format("switch: job {} region size {} is odd (two pools)", j.job, j.region_size));
    check_region(j, 2);
  }

  uint32_t index_of(const SwitchJob& j, uint32_t psn) const override {
    const uint32_t s = j.region_size / 2;
    return j.region_offset + ((psn / s) % 2) * s + psn % s;
  }
  // (The same rule, without a second virtual call per packet.)
  uint32_t index_for(const Packet& p, const SwitchJob& j) const override { return SwitchMLSwitch::index_of(j, p.h.psn); }

  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time, Effects& fx) override {
    Agg& a = agg(i);
    const uint64_t k = key_of(p->h.job, p->h.psn);
    if (a.key == k) {
      if (complete_[i]) {
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
      complete_[i] = 0;
    } else {
      ++st_.stale;     // a delayed copy from a phase already reused
      fx.free(p);
      return;
    }
    if (!full(i, j)) { fx.free(p); return; }
    complete_[i] = 1;
    ++st_.completed;
    load_into(i, *p);
    multicast_result(p, j, fx);
  }

 private:
  size_t own_register_bytes() const override { return bytes_of(complete_); }
  Registers<uint8_t> complete_;  // register: the slot holds its phase's result (the shadow copy)
};

}  // namespace

std::unique_ptr<SwitchProgram> make_switchml(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<SwitchMLSwitch>(cfg, scheme);
}

}  // namespace ina::dp
