// Fuzz target: the switch programs' on_packet (src/dataplane/), every scheme.
//
// Input: 6 configuration bytes, then events (fuzz.hpp):
//   [0] scheme's program (% 4: switchml (isolated), atp (shared FCFS), dsa (preemptive), grid (routed))
//   [1] bits 0-1 preempt mode (% 3); bit 2 the engine has multicast trees;
//       bit 3 packets have twice the payload capacity of the switch
//   [2] payload values per packet (1 + b % 8; 64 if b % 16 == 15)
//   [3] aggregators (6 + b % 27): few, so that tasks collide
//   [4] Routed: capacity (0 = unlimited, else b % 64 * 0.5 Gbps); agg masks
//   [5] Routed: evict_after (1 + b % 8)
// Three jobs are registered: job 1 (workers 1, 2, 3; PS 100), job 2 (worker
// 4; PS 101), job 3 (64 workers 200..263; PS 102); the switch is node 50.
// kControl removes job 1 + arg % 3, or registers it again.
// Findings: crash, sanitizer report, an exception, a packet leaked, freed or
// sent twice, a sent packet the decoder would reject, occupancy beyond the
// aggregator count, or aggregators still held by a removed job.
#include <array>
#include <stdexcept>

#include "dataplane/switch.hpp"
#include "effects.hpp"

using namespace ina;

namespace {

constexpr NodeId kSwitch = 50;

std::array<dp::SwitchJob, 3> jobs_for(size_t n, uint8_t mask_bits) {
  std::array<dp::SwitchJob, 3> js;
  const uint32_t region = std::max<uint32_t>(2, static_cast<uint32_t>(n / 3) & ~1u);
  for (uint16_t k = 0; k < 3; ++k) {
    dp::SwitchJob& j = js[k];
    j.job = static_cast<uint16_t>(k + 1);
    j.ps = static_cast<NodeId>(100 + k);
    if (k == 0) j.workers = {1, 2, 3};
    if (k == 1) j.workers = {4};
    if (k == 2)
      for (NodeId w = 200; w < 264; ++w) j.workers.push_back(w);
    j.region_offset = k * region;
    j.region_size = region;
    // Routed: which ranks this switch aggregates (never empty).
    const RankBits full = full_bitmap(static_cast<unsigned>(j.workers.size()));
    const RankBits pick = k == 0 ? (mask_bits & 7) : k == 1 ? 1 : (mask_bits & 8 ? ~0ULL : 0xF0F0F0F0F0F0F0F0ULL);
    j.agg_mask = (pick & full) ? (pick & full) : full;
  }
  return js;
}

// Findings of this target, now fixed; their reproducers stay in the corpus
// as regression inputs and nothing is tolerated any more:
// 1. When a packet preempts (DSA) or evicts (GRID) another job's aggregator,
//    swap_with() hands the victim's partial to the victim's PS in a packet
//    that keeps the preempting packet's nworkers/rank/src. With jobs of
//    different sizes the PS (valid(): nworkers mismatch) or the wire decoder
//    (bitmap beyond nworkers) drops the evicted partial.
//    Reproducer: corpus/switch_program/finding_evicted_nworkers.
// 2. The switch does not check the nworkers of the PS's packets against the
//    job table (Data is checked by valid_data()), and keeps it in its answer:
//    handle_ps_ack() multicasts a result Ack with the job's full bitmap and
//    the PS's nworkers; handle_fetch() answers a Fetch with the aggregator's
//    bitmap and the Fetch's nworkers. Either is a packet the decoder rejects
//    (bitmap beyond nworkers). Needs a faulty PS. Reproducers:
//    corpus/switch_program/finding_ps_ack_nworkers, finding_fetch_nworkers.
// Fixed: swap_with writes the victim's header; handle_ps_ack and
// handle_fetch write the job's worker count.

// Gradients and partials the switch sends to a job's PS, in answer to a
// packet addressed to the switch, must be that job's (the PS drops any other
// as malformed): the job and the worker count of the PS's job. (A FetchReply
// echoes the Fetch's header, whatever the PS put there.)
void check_sent(const std::vector<test::Sent>& sent, const std::array<dp::SwitchJob, 3>& jobs) {
  for (const test::Sent& p : sent)
    for (const dp::SwitchJob& j : jobs)
      if (p.h.type == PktType::Data && p.h.dst == j.ps)
        FUZZ_CHECK(p.h.job == j.job && p.h.nworkers == j.workers.size(),
                   "sent to the PS of job %u (%zu workers) a packet it drops as malformed: %s", j.job,
                   j.workers.size(), describe(p.h).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  dp::SwitchConfig cfg;
  const unsigned program = in.u8() % 4;
  const uint8_t b1 = in.u8();
  cfg.dsa.preempt = static_cast<dp::PreemptMode>((b1 & 3) % 3);
  const bool multicast = b1 & 4;
  const bool wide_packets = b1 & 8;
  const uint8_t b2 = in.u8();
  cfg.payload_values = static_cast<uint16_t>(b2 % 16 == 15 ? 64 : 1 + b2 % 8);
  const size_t n = 6 + in.u8() % 27;
  cfg.memory_bytes = n * 4ULL * cfg.payload_values;
  const uint8_t b4 = in.u8();
  cfg.grid.capacity_gbps = (b4 & 0xC0) ? 0.5 * (b4 % 64) : 0;
  cfg.grid.evict_after = 1 + in.u8() % 8;
  cfg.seed = 7;

  // The programs themselves (not the registry: this target links src/dataplane/ only).
  auto sw = program == 0 ? dp::make_switchml(cfg, "switchml")
            : program == 1 ? dp::make_atp(cfg, "atp")
            : program == 2 ? dp::make_dsa(cfg, "dsa")
                           : dp::make_grid(cfg, "grid");
  sw->set_id(kSwitch);
  FUZZ_CHECK(sw->aggregators() == n, "aggregators %zu, expected %zu", sw->aggregators(), n);
  const auto jobs = jobs_for(n, b4);
  std::array<bool, 3> registered{};
  for (size_t k = 0; k < jobs.size(); ++k) {
    sw->add_job(jobs[k]);
    registered[k] = true;
  }

  test::FakeEffects fx(static_cast<uint16_t>(cfg.payload_values * (wide_packets ? 2 : 1)), multicast);
  fuzz::report_violations_as_findings(fx);
  while (!in.exhausted() && in.remaining() > 0) {
    const uint8_t op = in.u8();
    const unsigned arg = op >> 2;
    switch (op & 3) {
      case fuzz::kPacket:
      case fuzz::kBurst: {
        const auto wire = in.bytes(in.next_packet_bytes());
        if (wire.empty()) break;
        const Time t = fx.now() + ((op & 3) == fuzz::kPacket ? static_cast<Time>(arg) * 10 * kUs : 0);
        fx.advance(t, [](uint64_t, Time) {});  // the switch sets no timers
        Packet* p = fx.inject(wire);
        if (!p) break;
        const bool for_switch = p->h.dst == kSwitch;  // else plain forwarding, unchanged
        sw->on_packet(p, fx.now(), fx);
        const auto sent = fx.settle("on_packet");
        if (for_switch) check_sent(sent, jobs);
        break;
      }
      case fuzz::kAdvance: fx.advance(fx.now() + static_cast<Time>(arg) * kMs, [](uint64_t, Time) {}); break;
      case fuzz::kControl: {
        const size_t k = arg % 3;
        if (registered[k]) {
          const size_t held = sw->occupied_by(jobs[k].job);
          const size_t freed = sw->remove_job(jobs[k].job);
          FUZZ_CHECK(freed == held, "remove_job(%u) freed %zu aggregators, job held %zu", jobs[k].job, freed, held);
          FUZZ_CHECK(sw->occupied_by(jobs[k].job) == 0, "job %u still holds aggregators after remove_job",
                     jobs[k].job);
        } else {
          sw->add_job(jobs[k]);
        }
        registered[k] = !registered[k];
        break;
      }
    }
    FUZZ_CHECK(sw->occupied() <= sw->aggregators(), "occupied %zu > %zu", sw->occupied(), sw->aggregators());
    for (size_t k = 0; k < jobs.size(); ++k)
      if (!registered[k])
        FUZZ_CHECK(sw->occupied_by(jobs[k].job) == 0, "removed job %u holds aggregators", jobs[k].job);
  }
  fx.settle("end");
  if (fuzz::verbose()) {
    const auto& st = sw->stats();
    std::fprintf(stderr,
                 "%s: data_in %llu aggregated %llu completed %llu to_ps %llu collisions %llu won %llu lost %llu "
                 "dup %llu stale %llu resend_served %llu fetches %llu/%llu acks %llu released %llu malformed %llu "
                 "forwarded %llu rate_syncs %llu evictions %llu overflow %llu foreign %llu; rejected %zu\n",
                 sw->scheme().c_str(), (unsigned long long)st.data_in, (unsigned long long)st.aggregated,
                 (unsigned long long)st.completed, (unsigned long long)st.to_ps, (unsigned long long)st.collisions,
                 (unsigned long long)st.preempt_won, (unsigned long long)st.preempt_lost,
                 (unsigned long long)st.duplicates, (unsigned long long)st.stale,
                 (unsigned long long)st.resend_served, (unsigned long long)st.fetch_hits,
                 (unsigned long long)st.fetches, (unsigned long long)st.acks_multicast,
                 (unsigned long long)st.released_by_ack, (unsigned long long)st.malformed,
                 (unsigned long long)st.forwarded, (unsigned long long)st.rate_syncs,
                 (unsigned long long)st.evictions, (unsigned long long)st.overflow,
                 (unsigned long long)st.foreign(), fx.rejected());
  }
  return 0;
}
