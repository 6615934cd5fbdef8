// The simulator's DSA training worker (workload/training_worker.hpp) driven
// directly: which Eq. 1 priority its packets carry.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "fake_effects.hpp"
#include "workload/training_worker.hpp"

namespace ina::test {
namespace {

constexpr NodeId kSwitch = 0, kSelf = 1;

// DNN A with one-packet partitions (sent L2·P1, L1·P1, L1·P2, L2·P2 as PSNs
// 0..3) and a window of two packets: PSNs 0 and 1 leave when the gradients
// are ready, 2 and 3 when the results of 0 and 1 come back 100 us later, so
// T_j, and with it Eq. 1, has moved between a layer's two partitions.
std::map<uint32_t, uint32_t> priorities_by_psn(bool per_tensor) {
  workload::TrainingConfig c;
  c.transport.job = 1;
  c.transport.rank = 0;
  c.transport.nworkers = 2;
  c.transport.self = kSelf;
  c.transport.aggregator = kSwitch;
  c.transport.payload_values = 64;
  c.transport.init_window = 2;
  c.transport.aimd = false;
  c.model = workload::dsa_model('A', 256.0 / (1 << 20));  // 64 int32 values per partition
  c.dsa_priority = true;
  c.eq1_per_tensor = per_tensor;
  c.link_gbps = 0.001;  // T_j's first estimate: 8.8 ms, mostly the gradients at 1 Mbit/s
  workload::TrainingWorker w(c);
  FakeEffects fx;
  w.on_start(0, fx);
  // The two layers' compute (0.64 ms); the first RTO would fire after 1 ms more.
  fx.advance(700 * kUs, [&](uint64_t token, Time now) { w.on_timer(token, now, fx); });
  std::map<uint32_t, uint32_t> prio;
  std::vector<uint32_t> first;
  for (const auto& p : fx.take()) {
    prio[p.h.psn] = p.h.priority;
    first.push_back(p.h.psn);
  }
  EXPECT_EQ(first, (std::vector<uint32_t>{0, 1}));
  const Time later = fx.now() + 100 * kUs;
  for (uint32_t psn : first) {
    Packet* a = fx.alloc();
    a->h = {.type = PktType::Ack, .flags = flag::kResult, .job = 1, .src = kSwitch, .dst = kSelf, .nworkers = 2,
            .psn = psn, .bitmap = full_bitmap(2), .count = 64};
    w.on_packet(a, later, fx);
  }
  for (const auto& p : fx.take())
    if (p.h.type == PktType::Data) prio[p.h.psn] = p.h.priority;
  EXPECT_EQ(prio.size(), 4u);
  return prio;
}

TEST(TrainingWorker, PerTensorALayersPartitionsShareItsFirstPacketsPriority) {
  const auto tensor = priorities_by_psn(true), packet = priorities_by_psn(false);
  // PSN 0 and 3 are layer 2's partitions, 1 and 2 layer 1's.
  EXPECT_EQ(tensor.at(3), tensor.at(0));
  EXPECT_EQ(tensor.at(2), tensor.at(1));
  EXPECT_NE(tensor.at(0), tensor.at(1));  // Eq. 1 ranks the layers apart
  // Per packet, the partitions sent 100 us later take the priority of then.
  EXPECT_EQ(packet.at(0), tensor.at(0));
  EXPECT_EQ(packet.at(1), tensor.at(1));
  EXPECT_NE(packet.at(3), packet.at(0));
  EXPECT_NE(packet.at(2), packet.at(1));
}

}  // namespace
}  // namespace ina::test
