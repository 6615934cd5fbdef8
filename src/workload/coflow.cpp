#include "workload/coflow.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

namespace ina::workload {

double Coflow::shuffle_mb() const {
  double t = 0;
  for (const auto& r : reducers) t += r.shuffle_mb;
  return t;
}

namespace {

// The whitespace-separated fields of one line.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t b = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > b) out.push_back(line.substr(b, i - b));
  }
  return out;
}

class LineParser {
 public:
  LineParser(const std::string& origin, size_t line) : origin_(origin), line_(line) {}

  [[noreturn]] void fail(std::string_view field, std::string_view value, std::string_view why) const {
    throw CoflowTraceError(
        fmt::format("{}: line {}: field '{}' (value: '{}'): {}", origin_, line_, field, value, why));
  }
  uint64_t integer(std::string_view s, std::string_view field, uint64_t max) const {
    uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) fail(field, s, "not a non-negative integer");
    if (v > max) fail(field, s, fmt::format("above {}", max));
    return v;
  }
  double megabytes(std::string_view s, std::string_view field) const {
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) fail(field, s, "not a number");
    if (!std::isfinite(v) || v < 0) fail(field, s, "must be finite and >= 0");
    return v;
  }

 private:
  const std::string& origin_;
  size_t line_;
};

}  // namespace

CoflowTrace parse_coflow_trace(const std::string& text, const std::string& origin) {
  CoflowTrace t;
  t.origin = origin;
  std::istringstream in(text);
  std::string raw;
  size_t lineno = 0;
  uint64_t expected = 0;
  bool header = false;
  std::set<uint64_t> ids;
  while (std::getline(in, raw)) {
    ++lineno;
    const auto f = fields(raw);
    if (f.empty()) continue;
    const LineParser lp(origin, lineno);
    if (!header) {
      if (f.size() != 2) lp.fail("header", raw, "must be '<ports> <coflows>'");
      t.ports = static_cast<unsigned>(lp.integer(f[0], "ports", 1'000'000));
      if (t.ports == 0) lp.fail("ports", f[0], "must be at least 1");
      expected = lp.integer(f[1], "coflows", 10'000'000);
      header = true;
      continue;
    }
    if (f.size() < 5) lp.fail("coflow", raw, "needs <id> <arrival ms> <mappers> <racks>... <reducers> <rack:MB>...");
    Coflow c;
    c.id = lp.integer(f[0], "id", UINT64_MAX);
    if (!ids.insert(c.id).second) lp.fail("id", f[0], "repeats an earlier coflow's id");
    c.arrival_ms = lp.integer(f[1], "arrival_ms", UINT64_MAX);
    if (!t.coflows.empty() && c.arrival_ms < t.coflows.back().arrival_ms)
      lp.fail("arrival_ms", f[1], fmt::format("before the previous coflow's {}", t.coflows.back().arrival_ms));
    const uint64_t m = lp.integer(f[2], "mappers", t.ports);
    if (m == 0) lp.fail("mappers", f[2], "a coflow needs at least one mapper");
    if (f.size() < 3 + m + 1) lp.fail("mappers", f[2], fmt::format("the line has only {} fields", f.size()));
    for (uint64_t k = 0; k < m; ++k)
      c.mappers.push_back(static_cast<unsigned>(lp.integer(f[3 + k], "mapper rack", t.ports - 1)));
    const std::string_view rs = f[3 + m];
    const uint64_t r = lp.integer(rs, "reducers", t.ports);
    if (r == 0) lp.fail("reducers", rs, "a coflow needs at least one reducer");
    if (f.size() != 4 + m + r)
      lp.fail("reducers", rs, fmt::format("{} reducer fields follow, not {}", f.size() - 4 - m, r));
    for (uint64_t k = 0; k < r; ++k) {
      const std::string_view x = f[4 + m + k];
      const size_t colon = x.find(':');
      if (colon == std::string_view::npos) lp.fail("reducer", x, "must be <rack>:<shuffle MB>");
      c.reducers.push_back({static_cast<unsigned>(lp.integer(x.substr(0, colon), "reducer rack", t.ports - 1)),
                            lp.megabytes(x.substr(colon + 1), "shuffle MB")});
    }
    t.coflows.push_back(std::move(c));
  }
  if (!header) throw CoflowTraceError(fmt::format("{}: empty: no '<ports> <coflows>' header", origin));
  if (t.coflows.size() != expected)
    throw CoflowTraceError(fmt::format("{}: field 'coflows' (value: {}): the file has {} coflows", origin, expected,
                                       t.coflows.size()));
  return t;
}

CoflowTrace load_coflow_trace(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw CoflowTraceError(fmt::format("{}: cannot open the coflow trace", path));
  std::ostringstream s;
  s << f.rdbuf();
  return parse_coflow_trace(s.str(), path);
}

}  // namespace ina::workload
