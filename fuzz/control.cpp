// Fuzz target: the control plane's message reader (src/runtime/net.cpp
// LineChannel::parse_line, src/runtime/control.cpp parse_control_request),
// i.e. everything `ina switch` does with a control line before it checks a
// proof. Input: newline-separated lines. RuntimeError is the documented
// answer to a bad line; anything else (nlohmann's exceptions included, a
// crash, a sanitizer report) is a finding. An accepted request must be in range.
#include <string>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/control.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.empty()) continue;
    try {
      const auto req = ina::rt::parse_control_request(ina::rt::LineChannel::parse_line(line));
      if (const auto* j = std::get_if<ina::rt::JoinRequest>(&req)) {
        FUZZ_CHECK(j->job >= 1 && j->nworkers >= 1 && j->nworkers <= ina::kMaxWireWorkers, "join out of range");
        FUZZ_CHECK(j->rank < j->nworkers, "join rank %u of %u", j->rank, j->nworkers);
        FUZZ_CHECK(j->udp.size() <= 64 && j->proof.size() <= 64, "join strings too long");
      }
      if (const auto* r = std::get_if<ina::rt::ReconfigureRequest>(&req)) {
        FUZZ_CHECK(r->job >= 1 && r->epoch >= 1 && r->epoch <= 255, "reconfigure job %u epoch %u", r->job, r->epoch);
        FUZZ_CHECK(r->workers.size() <= ina::kMaxRingWorkers && r->rack.size() <= ina::kMaxRingWorkers &&
                       r->upstream.size() <= ina::kMaxRingWorkers && r->proof.size() <= 64,
                   "reconfigure lists too long");
        for (auto x : r->rack) FUZZ_CHECK(x < ina::kMaxRingWorkers, "reconfigure rack rank %u", x);
        for (auto x : r->upstream) FUZZ_CHECK(x < ina::kMaxRingWorkers, "reconfigure upstream rank %u", x);
        for (auto w : r->workers) FUZZ_CHECK(w < ina::kMulticast, "reconfigure worker node %u", static_cast<unsigned>(w));
      }
    } catch (const ina::rt::RuntimeError&) {
    }
  }
  return 0;
}
