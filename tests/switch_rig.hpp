#pragma once
// A switch program driven directly, for the unit tests of the switch
// programs, the PS and the worker: two jobs on one switch (job 1: workers 1,
// 2, 3 with PS 10; job 2: workers 4, 5 with PS 11), and the check of a
// result multicast.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster_fixture.hpp"
#include "schemes/registry.hpp"

namespace ina::test {

inline constexpr NodeId kSw = 0;
inline constexpr NodeId kPs1 = 10, kPs2 = 11;
// Job 1: workers 1, 2, 3 (ranks 0..2). Job 2: workers 4, 5.
inline const std::vector<NodeId> kJob1 = {1, 2, 3};
inline const std::vector<NodeId> kJob2 = {4, 5};

inline std::unique_ptr<dp::SwitchProgram> make_sw(const std::string& scheme, uint64_t aggregators) {
  dp::SwitchConfig c;
  c.payload_values = 64;
  c.memory_bytes = aggregators * 256;
  c.track_tasks = true;
  auto sw = schemes::find(scheme).make_switch(c);
  sw->set_id(kSw);
  return sw;
}

inline void add_shared_jobs(dp::SwitchProgram& sw) {
  dp::SwitchJob j1;
  j1.job = 1;
  j1.workers = kJob1;
  j1.ps = kPs1;
  sw.add_job(j1);
  dp::SwitchJob j2;
  j2.job = 2;
  j2.workers = kJob2;
  j2.ps = kPs2;
  sw.add_job(j2);
}

// Job `job`'s PS `ps` sending the result of task `psn` to its multicast
// group: an Ack with the complete values, every rank in its bitmap.
inline Packet* ps_result(FakeEffects& fx, uint16_t job, uint32_t psn, NodeId ps, uint8_t nworkers,
                         const std::vector<int32_t>& values) {
  Packet* a = fx.alloc();
  a->h.type = PktType::Ack;
  a->h.flags = flag::kResult;
  a->h.job = job;
  a->h.psn = psn;
  a->h.src = ps;
  a->h.dst = kMulticast;
  a->h.nworkers = nworkers;
  a->h.bitmap = full_bitmap(nworkers);
  a->h.count = static_cast<uint16_t>(values.size());
  std::copy(values.begin(), values.end(), a->payload());
  return a;
}

inline void expect_multicast(const std::vector<Sent>& out, const std::vector<NodeId>& workers, uint16_t job, uint32_t psn,
                      const std::vector<int32_t>& sum) {
  ASSERT_EQ(out.size(), workers.size());
  std::set<NodeId> dsts;
  for (const auto& s : out) {
    dsts.insert(s.h.dst);
    EXPECT_EQ(s.h.type, PktType::Ack);
    EXPECT_TRUE(s.h.has(flag::kResult));
    EXPECT_EQ(s.h.job, job);
    EXPECT_EQ(s.h.psn, psn);
    EXPECT_EQ(s.h.bitmap, full_bitmap(static_cast<unsigned>(workers.size())));
    EXPECT_EQ(s.h.count, sum.size());
    EXPECT_EQ(s.v, sum);
  }
  EXPECT_EQ(dsts, std::set<NodeId>(workers.begin(), workers.end()));
}

inline constexpr NodeId kPsId = 10;  // the PS of the PS and worker rigs

// SwitchML: job `job` on the isolated region [off, off + size).
inline void add_isolated_job(dp::SwitchProgram& sw, uint16_t job, std::vector<NodeId> workers, uint32_t off, uint32_t size) {
  dp::SwitchJob j;
  j.job = job;
  j.workers = std::move(workers);
  j.region_offset = off;
  j.region_size = size;
  sw.add_job(j);
}

}  // namespace ina::test
