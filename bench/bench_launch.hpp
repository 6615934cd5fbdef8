#pragma once
// A benchmark's run of `ina run` in-process (ina::rt::launch): its JSON
// summary, or nothing after marking the benchmark skipped with the reason.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "runtime/launcher.hpp"

namespace ina::bench {

// cfg.json_out must name the summary file.
inline std::optional<nlohmann::json> launch_summary(const rt::LaunchConfig& cfg, benchmark::State& state) {
  std::ostringstream log;
  const int rc = rt::launch(cfg, log);
  std::ifstream in(cfg.json_out);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.value("ok", false)) {
    const std::string text = log.str();
    const std::string tail = text.size() > 400 ? text.substr(text.size() - 400) : text;
    state.SkipWithError(("ina run failed (status " + std::to_string(rc) + "): " + tail).c_str());
    return std::nullopt;
  }
  return j;
}

}  // namespace ina::bench
