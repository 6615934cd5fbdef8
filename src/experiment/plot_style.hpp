#pragma once
// How results look to a person: a metric's axis label, a scheme's colour and
// point type. One mapping for every plot and table, so that a metric reads
// the same everywhere and a scheme has the same colour in every figure.
#include <string>
#include <utility>
#include <vector>

namespace ina::exp {

// A human label with its unit, from the metric's name: "throughput_gbps" ->
// "throughput (Gbit/s)", "job4_jct_ms" -> "job 4 JCT (ms)", "avg_jct_ms" ->
// "average JCT (ms)". The name's last word, if a unit (ms, us, s, gbps, mbps,
// mb, mib, kb, gb, tb), becomes the unit in brackets; "jobN_" becomes "job N ";
// the other words pass through a small table of abbreviations (avg, jct, ps,
// agg, ecn, ...). A few metrics whose name says too little have a label of
// their own (ct_bti_s, reconfigurations, utilization, *_factor, ...).
std::string metric_label(const std::string& metric);

// A scheme's (or planner variant's) look in every plot.
struct SchemeStyle {
  std::string colour;  // "#RRGGBB"
  int point = 7;       // gnuplot point type
  bool dashed = false; // a named variant of a base scheme, drawn dashed in its colour
};

// The fixed style of a scheme name: every scheme of the registry
// (schemes::all()), GRID's planner baselines (geryon, grid-exact,
// grid-published) and P4INC-AOI's scheduler variants (INC-TW, noINC-FCFS,
// MILP, ...; a "-need" variant is its base's colour and point, dashed) have an entry. The first
// colours are Okabe and Ito's colour-blind-safe set, the rest Paul Tol's
// muted set; the registry's schemes and GRID's baselines each get a colour of
// their own. AOI's variants are never plotted beside the packet schemes and
// reuse Okabe-Ito colours among themselves. A name without an entry gets a
// reserve colour chosen by a hash of the name, the same in every plot.
SchemeStyle scheme_style(const std::string& name);

// The table behind scheme_style: (name, style) in a fixed order.
const std::vector<std::pair<std::string, SchemeStyle>>& scheme_palette();

}  // namespace ina::exp
