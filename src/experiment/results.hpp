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
// sc.metrics, DIR/<metric>.png. Creates DIR. Returns the files written.
std::vector<std::string> write_results(const std::string& dir, const Scenario& sc,
                                       const std::vector<Record>& records);

// Plots one metric: one line per scheme; one panel per series (multiplot)
// when there are several series. Uses gnuplot (pngcairo or png terminal).
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

// A fixed-width text table: rows = (series, x), columns = schemes, cells = metric.
std::string format_table(const std::vector<Record>& records, const std::string& metric,
                         const std::string& x_name = "x");

}  // namespace ina::exp
