// GRID: gradient routing with in-network aggregation (GRID §3.4, §5).
//
// Every fragment carries its aggregation node in the header's destination
// (the "node id"): a worker routed to this switch addresses its fragments
// here, all others pass through as plain forwarding. For its own fragments the
// switch uses memory unit Hash(fragment id) % M, with the job folded in. Per
// §5.2 a collision means a fragment arrived while the one M ids before it was
// still aggregating, i.e. the index is the fragment id mod M (consecutive
// fragments in flight never collide; asynchrony between workers does):
//  - same fragment: deduplicate by bitmap, else add; once the aggregation
//    count of the routing policy is reached (every rank in the job's agg_mask
//    here), the partial aggregate goes to the PS and the unit is freed;
//  - free unit: reserve it;
//  - another fragment (collision): drop the incoming fragment and send the
//    worker a rate-synchronization control packet (§5.2); the worker halves
//    its window and resends.
// Processing capacity C_s is a token bucket on aggregated bytes; a fragment
// beyond it is dropped with a rate-sync as well.
// Beyond the paper, for liveness: a unit that has caused `evict_after`
// collisions hands its partial to the PS and takes the new fragment, so a
// unit whose fragment can no longer complete (a late copy) never blocks its
// index for good. The PS completes every aggregation (its reminder fetches
// partials from the job's switches).
#include <algorithm>

#include "dataplane/grid.hpp"
#include "dataplane/switch.hpp"

namespace ina::dp {
namespace {

class GridSwitch final : public SwitchProgram {
 public:
  GridSwitch(const SwitchConfig& cfg, std::string_view scheme)
      : SwitchProgram(cfg, scheme), collisions_(n_), bits_per_ps_(cfg.grid.capacity_gbps / 1000.0), depth_(64 * 1024 * 8),
        tokens_(depth_) {}

 protected:
  uint32_t index_of(const SwitchJob& j, uint32_t psn) const override {
    return static_cast<uint32_t>((psn + static_cast<uint64_t>(j.job) * 0x9E3779B1ULL) % n_);
  }

  void on_data(Packet* p, const SwitchJob& j, uint32_t i, Time now, Effects& fx) override {
    if (!(p->h.bitmap & j.agg_mask)) {  // not routed here: the PS aggregates it
      send_to_ps(p, j, flag::kToPs, fx);
      return;
    }
    Agg& a = agg(i);
    if (a.key == key_of(p->h.job, p->h.psn)) {
      if (a.bitmap & p->h.bitmap) { ++st_.duplicates; fx.free(p); return; }
      if (!take(*p, now)) { rate_sync(p, true, fx); return; }
      accumulate(i, *p);
      finish_or_free(i, p, j, fx);
      return;
    }
    if (a.key == 0) {
      if (!take(*p, now)) { rate_sync(p, true, fx); return; }
      reserve(i, *p);
      collisions_[i] = 0;
      finish_or_free(i, p, j, fx);
      return;
    }
    ++st_.collisions;
    if (++collisions_[i] < cfg_.grid.evict_after || !take(*p, now)) { rate_sync(p, false, fx); return; }
    // The unit keeps losing to newer fragments: its partial goes to its PS.
    ++st_.evictions;
    ++st_.resubmits;  // the swap needs a second pass, as DSA's
    const SwitchJob* victim = swap_with(i, *p);
    collisions_[i] = 0;
    if (victim) send_to_ps(p, *victim, flag::kPartial | flag::kEvicted, fx);
    else fx.free(p);
  }

 private:
  bool take(const Packet& p, Time now) {
    if (bits_per_ps_ <= 0) return true;
    tokens_ = std::min(depth_, tokens_ + static_cast<double>(now - last_) * bits_per_ps_);
    last_ = now;
    const double need = 32.0 * p.h.count;
    if (tokens_ < need) return false;
    tokens_ -= need;
    return true;
  }

  void rate_sync(Packet* p, bool capacity, Effects& fx) {
    ++st_.rate_syncs;
    st_.capacity_drops += capacity;
    p->h.type = PktType::RateSync;
    p->h.dst = p->h.src;
    p->h.src = id();
    p->h.flags = flag::kEce;
    p->h.count = 0;
    fx.send(p);
  }

  void finish_or_free(uint32_t i, Packet* p, const SwitchJob& j, Effects& fx) {
    if (agg(i).bitmap != j.agg_mask) { fx.free(p); return; }
    load_into(i, *p);
    release(i);
    ++st_.completed;
    send_to_ps(p, j, flag::kPartial, fx);
  }

  size_t own_register_bytes() const override { return bytes_of(collisions_); }
  Registers<uint32_t> collisions_;  // register: collisions the held fragment has caused
  double bits_per_ps_, depth_, tokens_;
  Time last_ = 0;
};

}  // namespace

std::unique_ptr<SwitchProgram> make_grid(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<GridSwitch>(cfg, scheme);
}

}  // namespace ina::dp
