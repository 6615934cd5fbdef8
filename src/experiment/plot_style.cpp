#include "experiment/plot_style.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>

namespace ina::exp {
namespace {

// Metrics whose words alone read badly; everything else is derived from the name.
const std::map<std::string, std::string>& whole_names() {
  static const std::map<std::string, std::string> m = {
      {"ct_bti_s", "CT-BTI (s)"},
      {"reconfigurations", "reconfigured AOI connections"},
      {"reconfig_ts", "TSs with a reconfiguration"},
      {"total_jct_s", "total JCT (s)"},
      {"avg_jct_s", "average JCT (s)"},
      {"avg_wait_s", "average wait in the queue (s)"},
      {"utilization", "utilization (aggregation throughput / link rate)"},
      {"ps_factor", "PS load / PS bandwidth"},
      {"max_switch_factor", "max switch load / capacity"},
      {"max_link_factor", "max link load / capacity"},
      {"hot_share", "hot share of the pairs"},
      {"recirc_per_packet", "recirculations per packet"},
      {"ps_in_ack_share", "share of the PS's inbound bytes that are acks"},
      {"gap", "MILP gap"},
      {"optimal", "MILP optimal (1 = yes)"},
  };
  return m;
}

// Units as the last word of a metric's name.
const std::map<std::string, std::string>& units() {
  static const std::map<std::string, std::string> m = {
      {"ms", "ms"},   {"us", "µs"}, {"s", "s"},     {"gbps", "Gbit/s"}, {"mbps", "Mbit/s"},
      {"mb", "MB"},   {"mib", "MiB"}, {"kb", "KB"}, {"gb", "GB"},       {"tb", "TB"},
  };
  return m;
}

// Abbreviations and words that read better spelled out.
const std::map<std::string, std::string>& words() {
  static const std::map<std::string, std::string> m = {
      {"avg", "average"}, {"jct", "JCT"},     {"ps", "PS"},       {"agg", "aggregation"}, {"ecn", "ECN"},
      {"aoi", "AOI"},     {"inc", "INC"},     {"lp", "LP"},       {"bom", "BOM"},         {"cpu", "CPU"},
      {"rss", "RSS"},     {"ina", "INA"},     {"rtt", "RTT"},     {"kv", "KV"},           {"bti", "BTI"},
      {"ict", "ICT"},     {"sync", "sync time"}, {"iteration", "iteration time"}, {"recirc", "recirculations"},
      {"pdp", "PDP"},     {"sim", "simulated"},
  };
  return m;
}

std::vector<std::string> split_words(const std::string& name) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= name.size()) {
    const size_t u = name.find('_', at);
    out.push_back(name.substr(at, u == std::string::npos ? std::string::npos : u - at));
    if (u == std::string::npos) break;
    at = u + 1;
  }
  return out;
}

// Okabe & Ito (2008), colour-blind safe; then Paul Tol's muted scheme and two of his extras.
constexpr const char* kBlack = "#000000";
constexpr const char* kOrange = "#E69F00";
constexpr const char* kSkyBlue = "#56B4E9";
constexpr const char* kBluishGreen = "#009E73";
constexpr const char* kBlue = "#0072B2";
constexpr const char* kVermillion = "#D55E00";
constexpr const char* kReddishPurple = "#CC79A7";
constexpr const char* kIndigo = "#332288";
constexpr const char* kWine = "#882255";
constexpr const char* kGreen = "#117733";
constexpr const char* kOlive = "#999933";
constexpr const char* kTeal = "#44AA99";
constexpr const char* kPurple = "#AA4499";
constexpr const char* kSand = "#DDCC77";
constexpr const char* kRose = "#CC6677";
constexpr const char* kGrey = "#888888";
constexpr const char* kBrown = "#663333";
// For names without an entry.
constexpr const char* kReserve[] = {"#F0E442", "#88CCEE", "#5D8AA8", "#A0522D", "#6B8E23", "#4B0082"};

}  // namespace

std::string metric_label(const std::string& metric) {
  if (auto it = whole_names().find(metric); it != whole_names().end()) return it->second;
  std::vector<std::string> w = split_words(metric);
  std::string prefix;
  // "job4_jct_ms" -> "job 4 " + the label of "jct_ms".
  if (w.size() > 1 && w[0].size() > 3 && w[0].rfind("job", 0) == 0 &&
      std::all_of(w[0].begin() + 3, w[0].end(), [](unsigned char c) { return std::isdigit(c); })) {
    prefix = "job " + w[0].substr(3) + " ";
    w.erase(w.begin());
    std::string rest;
    for (const auto& x : w) rest += (rest.empty() ? "" : "_") + x;
    if (auto it = whole_names().find(rest); it != whole_names().end()) return prefix + it->second;
  }
  std::string unit;
  if (w.size() > 1)
    if (auto it = units().find(w.back()); it != units().end()) {
      unit = it->second;
      w.pop_back();
    }
  std::string text;
  for (const auto& x : w) {
    auto it = words().find(x);
    text += (text.empty() ? "" : " ") + (it == words().end() ? x : it->second);
  }
  return prefix + text + (unit.empty() ? "" : " (" + unit + ")");
}

const std::vector<std::pair<std::string, SchemeStyle>>& scheme_palette() {
  // Schemes that share plots get colours far apart: DSA's star (switchml,
  // atp, dsa and its variants), the multi-switch collectives (ps, rar, h-ar,
  // atp, dsa, rina: no two of orange, vermillion and their like together),
  // Zebra's sparse runs (zebra, ps-lite, switchml) and GRID's planners (grid,
  // grid-exact, grid-published, atp, switchml, geryon). p4inc-aoi runs alone.
  static const std::vector<std::pair<std::string, SchemeStyle>> p = {
      {"switchml", {kIndigo, 5}},
      {"atp", {kOrange, 7}},
      {"dsa", {kBluishGreen, 9}},
      {"dsa-join", {kReddishPurple, 11}},
      {"dsa-always", {kBrown, 13}},
      {"dsa-coin", {kBlue, 15}},
      {"p4inc-aoi", {kVermillion, 5}},
      {"grid", {kRose, 9}},
      {"grid-exact", {kWine, 11}},
      {"grid-published", {kSand, 13}},
      {"geryon", {kGreen, 15}},
      {"ps", {kGrey, 13}},
      {"rar", {kSkyBlue, 11}},
      {"h-ar", {kPurple, 15}},
      {"rina", {kBlack, 9}},
      {"zebra", {kTeal, 9}},
      {"ps-lite", {kOlive, 11}},
      // P4INC-AOI's schedulers: a family of their own.
      {"INC-TW", {kVermillion, 7}},
      {"INC-FCFS", {kBlue, 5}},
      {"noINC-TW", {kOrange, 9}},
      {"noINC-FCFS", {kSkyBlue, 11}},
      {"MILP", {kBlack, 13}},
      {"noINC-MILP", {kGrey, 15}},
      {"INC-TW-NoRecon", {kBluishGreen, 4}},
      {"noINC-TW-NoRecon", {kReddishPurple, 6}},
      {"INC-FCFS-strict", {kIndigo, 4}},
      {"noINC-FCFS-strict", {kTeal, 6}},
      {"INC-FCFS-NoRecon", {kOlive, 8}},
      {"noINC-FCFS-NoRecon", {kBrown, 10}},
  };
  return p;
}

SchemeStyle scheme_style(const std::string& name) {
  const auto& p = scheme_palette();
  std::string base = name;
  const bool variant = base.size() > 5 && base.compare(base.size() - 5, 5, "-need") == 0;
  if (variant) base.resize(base.size() - 5);
  for (auto [n, s] : p)
    if (n == base) {
      s.dashed = variant;
      return s;
    }
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same name, the same reserve colour
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return {kReserve[h % std::size(kReserve)], static_cast<int>(1 + h / std::size(kReserve) % 4)};
}

}  // namespace ina::exp
