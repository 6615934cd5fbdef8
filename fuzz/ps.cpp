// Fuzz target: the PS / fallback server (src/host/ps.cpp), on_packet with
// on_timer calls interleaved.
//
// Input: 3 configuration bytes, then events (fuzz.hpp):
//   [0] workers (1 + b % 8; 64 if b % 9 == 8)
//   [1] bit 0 targeted_known_results; bits 1-2 further switches (% 3);
//       bit 3 the engine has multicast trees (the PS never uses it)
//   [2] payload values (1 + b % 8; 64 if b % 16 == 15)
// The PS is node 100 for job 1, workers are nodes 1..n, the switch is node 50
// (further switches 51, 52). Timers the PS sets fire when time passes them;
// kControl fires a stale timer (token arg) at the current time.
// Findings: crash, sanitizer report, an exception, a packet leaked, freed or
// sent twice, a sent packet the decoder would reject, or one that breaks the
// PS's own contract (results with a full bitmap to the job's group or its
// workers, Fetches to its switches, GradRequests to a worker with its rank).
#include <algorithm>
#include <vector>

#include "effects.hpp"
#include "host/ps.hpp"

using namespace ina;

namespace {

constexpr NodeId kPsNode = 100;
constexpr NodeId kSwitch = 50;

void check_sent(const std::vector<test::Sent>& sent, const host::PsConfig& cfg) {
  const RankBits full = full_bitmap(static_cast<unsigned>(cfg.workers.size()));
  for (const test::Sent& p : sent) {
    const Header& h = p.h;
    FUZZ_CHECK(h.src == kPsNode && h.job == cfg.job && h.nworkers == cfg.workers.size(), "PS sent %s",
               describe(h).c_str());
    switch (h.type) {
      case PktType::Ack: {
        FUZZ_CHECK(h.bitmap == full && h.has(flag::kResult), "result without full bitmap: %s", describe(h).c_str());
        FUZZ_CHECK(h.count <= cfg.payload_values, "result count %u", h.count);
        const bool to_worker = std::find(cfg.workers.begin(), cfg.workers.end(), h.dst) != cfg.workers.end();
        FUZZ_CHECK(h.dst == kMulticast || (cfg.targeted_known_results && to_worker), "result to %u", h.dst);
        break;
      }
      case PktType::Fetch:
        FUZZ_CHECK(h.dst == cfg.sw || std::find(cfg.more_switches.begin(), cfg.more_switches.end(), h.dst) !=
                                          cfg.more_switches.end(),
                   "Fetch to %u", h.dst);
        break;
      case PktType::GradRequest:
        FUZZ_CHECK(h.rank < cfg.workers.size() && h.dst == cfg.workers[h.rank], "GradRequest %s",
                   describe(h).c_str());
        break;
      default: FUZZ_CHECK(false, "PS sent a packet of type %d", static_cast<int>(h.type));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  host::PsConfig cfg;
  cfg.job = 1;
  const uint8_t b0 = in.u8();
  const unsigned n = b0 % 9 == 8 ? 64 : 1 + b0 % 8;
  for (unsigned r = 0; r < n; ++r) cfg.workers.push_back(static_cast<NodeId>(1 + r));
  const uint8_t b1 = in.u8();
  cfg.targeted_known_results = b1 & 1;
  for (unsigned s = 0; s < ((b1 >> 1) & 3) % 3; ++s) cfg.more_switches.push_back(static_cast<NodeId>(kSwitch + 1 + s));
  const bool multicast = b1 & 8;
  const uint8_t b2 = in.u8();
  cfg.payload_values = static_cast<uint16_t>(b2 % 16 == 15 ? 64 : 1 + b2 % 8);
  cfg.sw = kSwitch;

  host::ParameterServer ps(cfg);
  ps.set_id(kPsNode);
  test::FakeEffects fx(cfg.payload_values, multicast);
  fuzz::report_violations_as_findings(fx);
  auto fire = [&](uint64_t token, Time at) {
    ps.on_timer(token, at, fx);
    check_sent(fx.settle("on_timer"), cfg);
  };
  ps.on_start(0, fx);
  fx.settle("on_start");

  while (!in.exhausted() && in.remaining() > 0) {
    const uint8_t op = in.u8();
    const unsigned arg = op >> 2;
    switch (op & 3) {
      case fuzz::kPacket:
      case fuzz::kBurst: {
        const auto wire = in.bytes(in.next_packet_bytes());
        if (wire.empty()) break;
        fx.advance(fx.now() + ((op & 3) == fuzz::kPacket ? static_cast<Time>(arg) * 10 * kUs : 0), fire);
        Packet* p = fx.inject(wire);
        if (!p) break;
        ps.on_packet(p, fx.now(), fx);
        check_sent(fx.settle("on_packet"), cfg);
        break;
      }
      case fuzz::kAdvance: fx.advance(fx.now() + static_cast<Time>(arg) * kMs, fire); break;
      case fuzz::kControl: fire(arg, fx.now()); break;
    }
  }
  // A few more timer firings (bounded: an entry nobody answers keeps
  // reminding, which is the protocol's liveness at work).
  for (int i = 0; i < 8 && fx.pending_timers() > 0; ++i) fx.advance(fx.next_timer(), fire);
  fx.settle("end");
  if (fuzz::verbose()) {
    const auto& st = ps.stats();
    std::fprintf(stderr,
                 "ps(%u workers): data_in %llu completions %llu dup %llu superseded %llu conflicts %llu "
                 "timeout_reminders %llu worker_reminders %llu fetches %llu/%llu grad_requests %llu retired %llu "
                 "known %llu unicast %llu unneeded %llu malformed %llu entries left %zu; rejected %zu\n",
                 n, (unsigned long long)st.data_in, (unsigned long long)st.completions,
                 (unsigned long long)st.duplicates, (unsigned long long)st.superseded,
                 (unsigned long long)st.conflicts, (unsigned long long)st.timeout_reminders,
                 (unsigned long long)st.worker_reminders, (unsigned long long)st.fetch_hits,
                 (unsigned long long)st.fetches, (unsigned long long)st.grad_requests, (unsigned long long)st.retired,
                 (unsigned long long)st.known_results, (unsigned long long)st.unicast_results,
                 (unsigned long long)st.unneeded_results, (unsigned long long)st.malformed, ps.entries(),
                 fx.rejected());
  }
  return 0;
}
