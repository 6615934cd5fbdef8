#pragma once
// A count with its noun in agreement: counted(1, "allreduce") is
// "1 allreduce", counted(2, "allreduce") "2 allreduces"; nouns whose plural
// is not the noun plus "s" give it (counted(3, "PS", "PSes")).
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ina {

inline std::string counted(uint64_t n, std::string_view one, std::string_view many = {}) {
  if (n == 1) return fmt::format("1 {}", one);
  if (many.empty()) return fmt::format("{} {}s", n, one);
  return fmt::format("{} {}", n, many);
}

}  // namespace ina
