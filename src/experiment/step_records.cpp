#include "experiment/step_records.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::exp {

void write_step_records(const std::string& dir, uint64_t digest,
                        const std::vector<std::vector<host::RingStepRecord>>& log) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = fmt::format("{}/steps-{:016x}.csv", dir, digest);
  std::ofstream f(path);
  if (!f) throw std::runtime_error(fmt::format("run.step_records: cannot write {}", path));
  const auto t = [](Time x) { return x == kNever ? std::string() : std::to_string(x); };
  f << "endpoint,step,code,send_pkts,recv_pkts,cwnd,current_ps,send_begin_ps,send_done_ps,recv_done_ps,done_ps\n";
  for (size_t e = 0; e < log.size(); ++e)
    for (size_t i = 0; i < log[e].size(); ++i) {
      const host::RingStepRecord& r = log[e][i];
      f << fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", e, i, r.code, r.send_pkts, r.recv_pkts, r.cwnd,
                       t(r.current), t(r.send_begin), t(r.send_done), t(r.recv_done), t(r.done));
    }
  if (!f) throw std::runtime_error(fmt::format("run.step_records: cannot write {}", path));
}

}  // namespace ina::exp
