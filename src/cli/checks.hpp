#pragma once
// CLI11 validators for numeric flags. CLI11's own Range/PositiveNumber let
// NaN through (every comparison with NaN is false) and accept infinities; the
// checks here do not. A failure reads "--flag: <what>, got '<value>'" (CLI11
// prefixes the flag name) and exits before anything runs.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "schemes/registry.hpp"

namespace ina::cli {

// A finite number in [lo, hi] (lo excluded if lo_open). `unit` follows the
// bounds in the message, e.g. "KiB".
inline CLI::Validator Finite(double lo, double hi, bool lo_open = false, std::string unit = {}) {
  const std::string range = fmt::format("{}{}, {}]{}", lo_open ? "(" : "[", lo, hi, unit.empty() ? "" : " " + unit);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* b = text.c_str();
        char* end = nullptr;
        const double v = std::strtod(b, &end);
        if (text.empty() || end != b + text.size()) return fmt::format("expected a number, got '{}'", text);
        if (!std::isfinite(v)) return fmt::format("must be a finite number in {}, got '{}'", range, text);
        if ((lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
          return fmt::format("must be in {}, got '{}'", range, text);
        return {};
      },
      "FINITE in " + range, "Finite");
}

// A byte count of whole float32 values: a positive multiple of 4 up to `max`.
inline CLI::Validator FloatBytes(uint64_t max) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        uint64_t v = 0;
        const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || v == 0 || v % 4 != 0 || v > max)
          return fmt::format("must be a positive multiple of 4 bytes (whole float32 values) up to {}, got '{}'", max,
                             text);
        return {};
      },
      fmt::format("multiple of 4 in [4, {}]", max), "FloatBytes");
}

// A scheme of the registry that engine `e` runs, by name or alias; the
// option receives the canonical name.
// A scheme `e` runs, or one `also` runs (`ina switch`: the runtime's, or a static layout's).
inline CLI::Validator SchemeOf(schemes::Engine e, std::optional<schemes::Engine> also = std::nullopt) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        try {
          const schemes::Scheme* s = schemes::lookup(text);
          text = s && also && s->supports(*also) ? s->name : schemes::find(text, e).name;
        } catch (const schemes::UnknownScheme& x) {
          return x.what();
        }
        return {};
      },
      "SCHEME", "Scheme");
}

// Switch aggregator memory, in MiB as everywhere else in ina (a scenario's
// switch.memory_mb, `ina plan zebra --memory-mb`): --memory-mb MIB or
// --memory BYTES, into `bytes`. The two exclude each other; both are checked
// against `bytes_range`.
inline void add_memory_options(CLI::App* app, uint64_t& bytes, const std::string& what,
                               const CLI::Validator& bytes_range) {
  auto* by = app->add_option("--memory", bytes, what + " in bytes (or --memory-mb)")
                 ->capture_default_str()
                 ->check(bytes_range);
  auto* mb = app->add_option_function<double>(
                    "--memory-mb",
                    [&bytes, bytes_range](const double& mib) {
                      const double b = std::round(mib * 1048576.0);
                      std::string text = b >= 1 && b <= 1e18 ? std::to_string(static_cast<uint64_t>(b)) : "0";
                      if (const std::string err = bytes_range(text); !err.empty())
                        throw CLI::ValidationError("--memory-mb", fmt::format("{} MiB is {} bytes: {}", mib, text, err));
                      bytes = static_cast<uint64_t>(b);
                    },
                    what + " in MiB (2^20 bytes; fractions allowed), as a scenario's switch.memory_mb")
                 ->check(Finite(0, 1e6, true, "MiB"));
  mb->excludes(by);
}

// Help text for the --scheme option of `ina switch`: the runtime's schemes
// that have a switch program (rar and h-ar run without a switch, `ina
// ring-worker`: `ina switch` refuses them).
inline std::string switch_scheme_help() {
  std::string out;
  for (const auto& s : schemes::all()) {
    const bool star = s.supports(schemes::Engine::Runtime);
    if (!(star || s.supports(schemes::Engine::Layout)) || !s.factory) continue;
    std::string n = s.name;
    for (const auto& a : s.aliases) n += "|" + a;
    out += fmt::format("\n  {:<22} {}{}", n, s.description, star ? "" : " (with --layout only)");
  }
  return out;
}

}  // namespace ina::cli
