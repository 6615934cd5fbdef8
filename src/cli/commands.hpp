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

// Unsigned options of `app` and its subcommands refuse a negative value:
// CLI11 reads "-1" into one as 2^64 - 1 (strtoull wraps), which a command
// would take as the user's number.
inline void refuse_negative_unsigned(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (o->get_type_name().rfind("UINT", 0) == 0)
      o->check(CLI::Validator(
          [](std::string& v) { return !v.empty() && v.front() == '-' ? "must not be negative, got '" + v + "'" : std::string(); },
          "", "non-negative"));
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_negative_unsigned(*sub);
}

// Parses the command line: nullopt to go on, or the exit status. CLI11's
// own errors (codes from 100) are usage errors: 2, as any bad input; --help
// is 0, and a command's CLI::RuntimeError keeps its code.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  refuse_negative_unsigned(app);
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
