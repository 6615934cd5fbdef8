#pragma once
// Result records, their JSON/CSV forms, and PNG plots (gnuplot).
#include <map>
#include <string>
#include <vector>

#include "experiment/scenario.hpp"

namespace ina::exp {

struct Record {
  std::string series;   // "" for a single-series scenario
  std::string scheme;
  double x = 0;
  int seeds = 1;        // how many seeds the metrics are averaged over
  std::map<std::string, double> metrics;  // e.g. avg_jct_ms, utilization
};

// Writes DIR/results.json (a JSON array of records: {"series", "scheme", "x",
// "seeds", <metric>: value, ...}), DIR/results.csv (one row per record, one
// column per metric, union of metric names) and, for each metric named in
// sc.metrics that some record has, DIR/<metric>.png. Creates DIR. Returns
// the files written.
std::vector<std::string> write_results(const std::string& dir, const Scenario& sc,
                                       const std::vector<Record>& records);

// Plots one metric: one line per scheme, each scheme in its own colour and
// point type (scheme_style, plot_style.hpp); one panel per series
// (multiplot) when there are several series; the title is the scenario's
// title and the metric's label, the key below the plot, whole-number tics on
// axes whose values are all whole numbers. Uses gnuplot (pngcairo or png terminal).
// Throws std::runtime_error if gnuplot fails.
// Keeps the gnuplot input beside the PNG (<stem>.dat, <stem>.gp; re-plot with
// `gnuplot <stem>.gp` in that directory). Without a sweep axis each scheme is
// one bar. Records without a finite value of the metric are skipped; having
// none left is an error.
void plot_metric(const std::string& png_path, const Scenario& sc, const std::vector<Record>& records,
                 const std::string& metric);

// Mean of records that share (series, scheme, x): metrics averaged, seeds summed.
// The mean is weighted by each record's seeds, so averages can be re-averaged.
std::vector<Record> average_over_seeds(const std::vector<Record>& per_seed);

// A fixed-width text table: rows = (series, x), columns = schemes, cells =
// metric, every number through format_number (format.hpp). An empty x_name
// (a scenario without a sweep) leaves the x column out.
std::string format_table(const std::vector<Record>& records, const std::string& metric,
                         const std::string& x_name = "x");

// The metrics the records have: those of `first` that any record has, in
// that order, then every other one by name.
std::vector<std::string> metric_names(const std::vector<Record>& records, const std::vector<std::string>& first);

// One format_table per metric, each under a line naming it
// ("average JCT (ms) [avg_jct_ms] by jobs and scheme:", or "... by scheme:"
// without x_name), blank lines between.
std::string format_tables(const std::vector<Record>& records, const std::vector<std::string>& metrics,
                          const std::string& x_name = "x");

// A plot's y-axis label for `metric`: the scenario's output.y_label, which
// labels its first metric (or every metric when the scenario names none),
// else metric_label(metric) (plot_style.hpp).
std::string axis_label(const Scenario& sc, const std::string& metric);

}  // namespace ina::exp
