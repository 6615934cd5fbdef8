// `ina switch`, `ina ps`, `ina worker`, `ina run`: the UDP runtime commands.
#include "cli/commands.hpp"

namespace ina::cli {

Runner register_runtime(CLI::App& app) {
  return [] { return 0; };
}

}  // namespace ina::cli
