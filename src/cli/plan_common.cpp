#include "cli/plan_common.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "control/grid.hpp"
#include "control/rina_bom.hpp"
#include "core/config_error.hpp"

namespace ina::cli::plancmd {

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const topo::TopologyError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const control::grid::PlanError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const control::rina::BomError& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 2;
}

int worker_count(const std::vector<std::string>& workers, int min) {
  if (workers.size() != 1) return -1;
  const std::string& w = workers[0];
  int n = 0;
  const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), n);
  if (ec != std::errc() || end != w.data() + w.size()) return -1;
  if (n < min)
    throw UsageError(fmt::format("--workers: need at least {} worker{}, got {}", min, min == 1 ? "" : "s", w));
  return n;
}

TopologyChoice load_topology(const std::string& spec, const topo::InaDeployment& d, uint64_t seed,
                             const std::string& what) {
  if (auto g = topo::generate(spec)) {
    topo::deploy_ina(*g, d, seed);
    return {std::move(*g), true, std::nullopt};
  }
  if (!std::filesystem::exists(spec))
    throw UsageError(fmt::format("{}: no such file '{}' (or use fat-tree:K, fat-tree-paper, leaf-spine-paper, dragonfly:A,G,H)", what, spec));
  auto file = topo::load_topology_file(spec);
  return {std::move(file.graph), false, std::move(file.job)};
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : std::string(sep)) + parts[i];
  return out;
}

double gbps(double v) { return std::round(v * 1e9) / 1e9; }

}  // namespace ina::cli::plancmd
