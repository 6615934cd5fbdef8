#pragma once
// Each subcommand family lives in its own file under src/cli/ and registers
// itself on the app; main() runs whichever was chosen.
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

#include <CLI/CLI.hpp>

namespace ina::cli {

// This `ina` executable, and a program CMake builds into its directory
// (ina-train, ina-ns3-star, ina-mpi-transport.so, the allreduce baselines).
inline std::filesystem::path ina_executable() { return std::filesystem::canonical("/proc/self/exe"); }
inline std::filesystem::path beside_ina(std::string_view name) { return ina_executable().parent_path() / name; }

// Parses the command line: nullopt to go on, or the exit status. CLI11's
// own errors (codes from 100) are usage errors: 2, as any bad input; --help
// is 0, and a command's CLI::RuntimeError keeps its code.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc < static_cast<int>(CLI::ExitCodes::IncorrectConstruction) ? rc : 2;
  }
}

// A registered command: run() is called if its subcommand was selected and
// returns the process exit status.
using Runner = std::function<int()>;

// `ina plan ...`: control-plane planners (src/cli/plan.cpp).
Runner register_plan(CLI::App& app);
// `ina plan zebra` (src/cli/plan_zebra.cpp); -1 when not the chosen command.
Runner register_plan_zebra(CLI::App& plan);
// `ina plan aoi` and `ina plan aoi-sweep` (src/cli/plan_aoi.cpp); -1 when not the chosen command.
Runner register_plan_aoi(CLI::App& plan);

// `ina switch`, `ina ps`, `ina worker`, `ina run`: the UDP runtime (src/cli/runtime.cpp).
Runner register_runtime(CLI::App& app);

}  // namespace ina::cli
