#include "experiment/results.hpp"

#include "experiment/format.hpp"
#include "experiment/plot_style.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace ina::exp {
namespace {

namespace fs = std::filesystem;

void add_unique(std::vector<std::string>& list, const std::string& v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

// Orders `names` by their position in `preferred`; unknown names keep their order at the end.
void order_like(std::vector<std::string>& names, const std::vector<std::string>& preferred) {
  auto rank = [&](const std::string& n) { return std::find(preferred.begin(), preferred.end(), n) - preferred.begin(); };
  std::stable_sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_integer(double v) { return std::isfinite(v) && std::fabs(v) < 1e15 && v == std::round(v); }

// The smallest 1, 2 or 5 x 10^k at least `raw`, and never below 1: tics of an integer axis.
double integer_step(double raw) {
  double step = 1;
  while (step < raw) {
    if (step * 2 >= raw) return step * 2;
    if (step * 5 >= raw) return step * 5;
    step *= 10;
  }
  return step;
}

// Tics for an axis whose values are all whole numbers (workers, jobs, switch
// counts): at the values themselves when they are few and far enough apart
// to label, else every integer_step; never between two integers.
std::string integer_tics(const std::string& axis, std::vector<double> values, bool log) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  const double range = values.back() - values.front();
  bool spaced = values.size() <= 12;
  for (size_t i = 1; spaced && i < values.size(); ++i)
    spaced = log ? values[i] >= 1.3 * values[i - 1] : values[i] - values[i - 1] >= range / 15;
  if (spaced) {
    std::vector<std::string> at;
    for (double v : values) at.push_back(format_number(v, 15));
    return fmt::format("set {}tics ({})\nset m{}tics 1\n", axis, fmt::join(at, ", "), axis);
  }
  if (log) return fmt::format("set format {} \"%.0f\"\n", axis);  // log tics sit at powers of 10
  return fmt::format("set {}tics {}\nset m{}tics 1\nset format {} \"%.0f\"\n", axis,
                     format_number(integer_step(range / 8), 15), axis, axis);
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

}  // namespace

std::string axis_label(const Scenario& sc, const std::string& metric) {
  const bool own = sc.metrics.empty() || sc.metrics.front() == metric;
  return !sc.y_label.empty() && own ? sc.y_label : metric_label(metric);
}

std::vector<std::string> write_results(const std::string& dir, const Scenario& sc,
                                       const std::vector<Record>& records) {
  const fs::path base(dir);
  fs::create_directories(base);

  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  std::set<std::string> names;
  for (const Record& r : records) {
    auto& obj = json.emplace_back(nlohmann::ordered_json{
        {"series", r.series}, {"scheme", r.scheme}, {"x", r.x}, {"seeds", r.seeds}});
    for (const auto& [name, value] : r.metrics) {
      obj[name] = value;
      names.insert(name);
    }
  }
  const fs::path json_path = base / "results.json";
  write_file(json_path, json.dump(2) + "\n");

  std::string csv = "series,scheme,x,seeds";
  for (const auto& name : names) csv += "," + csv_field(name);
  csv += "\n";
  for (const Record& r : records) {
    csv += fmt::format("{},{},{},{}", csv_field(r.series), csv_field(r.scheme), r.x, r.seeds);
    for (const auto& name : names) {
      auto it = r.metrics.find(name);
      csv += it == r.metrics.end() ? "," : fmt::format(",{}", it->second);
    }
    csv += "\n";
  }
  const fs::path csv_path = base / "results.csv";
  write_file(csv_path, csv);

  std::vector<std::string> written = {json_path.string(), csv_path.string()};
  for (const auto& metric : sc.metrics) {
    // A metric no run has (samples_per_s of a scaled gradient) gets no plot;
    // the tables say "no results" for it, and the other files still matter.
    const bool any = std::any_of(records.begin(), records.end(), [&](const Record& r) {
      const auto it = r.metrics.find(metric);
      return it != r.metrics.end() && std::isfinite(it->second);
    });
    if (!any) continue;
    const fs::path png = base / (metric + ".png");
    plot_metric(png.string(), sc, records, metric);
    written.push_back(png.string());
  }
  return written;
}

void plot_metric(const std::string& png_path, const Scenario& sc, const std::vector<Record>& records,
                 const std::string& metric) {
  std::vector<const Record*> rows;
  std::vector<std::string> panels, schemes;
  for (const Record& r : records) {
    auto it = r.metrics.find(metric);
    if (it == r.metrics.end() || !std::isfinite(it->second)) continue;
    rows.push_back(&r);
    add_unique(panels, r.series);
    add_unique(schemes, r.scheme);
  }
  if (rows.empty()) throw std::runtime_error(fmt::format("{}: no record has a value for '{}'", png_path, metric));
  std::vector<std::string> series_order;
  for (const Series& s : sc.series) series_order.push_back(s.name);
  order_like(panels, series_order);
  order_like(schemes, sc.schemes);

  // Without a sweep axis each scheme is one bar at its own x position.
  const bool bars = sc.sweep_key.empty();
  const fs::path png = fs::absolute(png_path);
  const fs::path dat = fs::path(png).replace_extension(".dat");
  const fs::path gp = fs::path(png).replace_extension(".gp");

  std::string data = fmt::format("# {}: one block per (series, scheme); columns: x {}\n", sc.name, metric);
  const std::string x_label = bars ? "" : sc.x_label.empty() ? sc.sweep_key : sc.x_label;
  const std::string y_label = axis_label(sc, metric);
  std::string script = fmt::format("# {} of {}. Re-plot: run `gnuplot {}` in this directory.\n", metric, sc.file,
                                   gp.filename().string());
  // The key goes below each panel: as many entries per row as fit its plot
  // area (about 8 px per character, each entry its name and a 4-character
  // sample: two entries of 15 characters fit, two of 17 do not), and a
  // bottom margin for the tics, the x label and the key's rows, which
  // gnuplot's automatic margin undercounts in a multiplot. A key of more
  // than 4 rows makes the canvas taller by a row's height (18 px) each, so
  // that the plot keeps its size.
  size_t longest = 1;
  for (const auto& n : schemes) longest = std::max(longest, n.size());
  const size_t cols = std::clamp<size_t>(48 / (longest + 8), 1, std::max<size_t>(schemes.size(), 1));
  const size_t key_rows = (schemes.size() + cols - 1) / cols;
  const size_t height = bars ? 400 : 440 + 18 * (key_rows > 4 ? key_rows - 4 : 0);
  script += fmt::format(
      "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {{\n"
      "  set terminal pngcairo noenhanced size {0},{1}\n"
      "}} else {{\n"
      "  set terminal png noenhanced size {0},{1}\n"
      "}}\n",
      480 * panels.size(), height);
  // The figure title is wrapped at word boundaries to the canvas width (about
  // 8 px per character of the default font), or gnuplot cuts it off at both ends.
  const size_t title_chars = (480 * panels.size() - 40) / 8;
  std::string title, line;
  // Each figure of a scenario names what it shows: the scenario's title, then the metric.
  const std::string label = metric_label(metric);
  std::istringstream words(sc.title.empty() ? label : sc.title + ": " + label);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > title_chars) {
      title += (title.empty() ? "" : "\n") + line;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) title += (title.empty() ? "" : "\n") + line;
  std::string title_gp = gp_string(title);  // newlines inside a double-quoted gnuplot string are "\n"
  for (size_t at = 0; (at = title_gp.find('\n', at)) != std::string::npos;) title_gp.replace(at, 1, "\\n");
  script += fmt::format("set output {}\nset multiplot layout 1,{} title {}\n", gp_string(png.filename().string()),
                        panels.size(), title_gp);
  script += fmt::format("set xlabel {}\nset ylabel {}\n", gp_string(x_label), gp_string(y_label));
  // The key goes below the plot, where it covers no data.
  script += "set yrange [0:*]\nset offsets 0, 0, graph 0.05, 0\nset grid\n";
  if (bars)
    script += "unset key\n";
  else
    script += fmt::format("set key below horizontal maxcols {}\nset bmargin {}\n", cols, key_rows + 4);
  if (sc.x_log) script += "set logscale x\n";
  // Whole-number axes (workers, jobs, switch counts, counters) get whole-number tics.
  std::vector<double> xs, ys;
  for (const Record* r : rows) {
    xs.push_back(r->x);
    ys.push_back(r->metrics.at(metric));
  }
  if (!bars && std::all_of(xs.begin(), xs.end(), is_integer)) script += integer_tics("x", xs, sc.x_log);
  if (std::all_of(ys.begin(), ys.end(), is_integer)) {
    const double top = std::max(1.0, *std::max_element(ys.begin(), ys.end()));
    script += fmt::format("set ytics {}\nset mytics 1\nset format y \"%.0f\"\n", format_number(integer_step(top / 8), 15));
  }
  if (bars) {
    std::vector<std::string> tics;
    for (size_t i = 0; i < schemes.size(); ++i) tics.push_back(fmt::format("{} {}", gp_string(schemes[i]), i));
    script += fmt::format("set xtics ({})\nset xrange [-0.5:{}]\nset boxwidth 0.6\nset style fill solid 0.6\n",
                          fmt::join(tics, ", "), schemes.size() - 0.5);
  }

  // A scheme keeps its colour and point type in every plot (plot_style.hpp).
  auto style = [&](size_t i) {
    const SchemeStyle st = scheme_style(schemes[i]);
    return fmt::format("lc rgb {} pt {} lw 2{}", gp_string(st.colour), st.point, st.dashed ? " dt 2" : "");
  };
  int block = 0;
  for (const auto& panel : panels) {
    std::vector<std::string> plots;
    for (size_t i = 0; i < schemes.size(); ++i) {
      std::vector<std::pair<double, double>> points;
      for (const Record* r : rows)
        if (r->series == panel && r->scheme == schemes[i])
          points.emplace_back(bars ? static_cast<double>(i) : r->x, r->metrics.at(metric));
      if (points.empty()) continue;
      std::sort(points.begin(), points.end());
      data += fmt::format("# block {}: series '{}', scheme '{}'\n", block, panel, schemes[i]);
      for (const auto& [x, y] : points) data += fmt::format("{} {}\n", x, y);
      data += "\n\n";
      plots.push_back(fmt::format("{} index {} using 1:2 with {} {} {}", gp_string(dat.filename().string()),
                                  block++, bars ? "boxes" : "linespoints", style(i),
                                  bars ? "notitle" : "title " + gp_string(schemes[i])));
    }
    script += fmt::format("set title {}\nplot {}\n", gp_string(panel), fmt::join(plots, ", \\\n     "));
  }
  script += "unset multiplot\n";
  write_file(dat, data);
  write_file(gp, script);

  const std::string cmd = fmt::format("cd {} && gnuplot {} 2>&1", sh_quote(png.parent_path().string()),
                                      sh_quote(gp.filename().string()));
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error(fmt::format("cannot run gnuplot for {}", gp.string()));
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) output += buf;
  const int status = pclose(pipe);
  if (status != 0)
    throw std::runtime_error(fmt::format("gnuplot failed (exit status {}) on {}: {}",
                                         WIFEXITED(status) ? WEXITSTATUS(status) : status, gp.string(), output));
}

std::vector<Record> average_over_seeds(const std::vector<Record>& per_seed) {
  // Weighted by each record's seeds, so already-averaged records combine correctly.
  struct Group {
    Record record;
    std::map<std::string, std::pair<double, double>> sums;  // metric -> (sum of w * value, sum of w)
  };
  std::vector<Group> groups;
  std::map<std::tuple<std::string, std::string, double>, size_t> index;
  for (const Record& r : per_seed) {
    auto [it, fresh] = index.try_emplace({r.series, r.scheme, r.x}, groups.size());
    if (fresh) groups.push_back({Record{r.series, r.scheme, r.x, 0, {}}, {}});
    Group& g = groups[it->second];
    g.record.seeds += r.seeds;
    const double w = std::max(1, r.seeds);
    for (const auto& [name, value] : r.metrics) {
      g.sums[name].first += w * value;
      g.sums[name].second += w;
    }
  }
  std::vector<Record> out;
  for (Group& g : groups) {
    for (const auto& [name, sum] : g.sums) g.record.metrics[name] = sum.first / sum.second;
    out.push_back(std::move(g.record));
  }
  return out;
}

std::string format_table(const std::vector<Record>& records, const std::string& metric, const std::string& x_name) {
  std::vector<std::string> schemes, series;
  std::vector<std::pair<std::string, double>> rows;  // (series, x)
  std::map<std::tuple<std::string, double, std::string>, double> cells;
  for (const Record& r : records) {
    auto it = r.metrics.find(metric);
    if (it == r.metrics.end()) continue;
    add_unique(schemes, r.scheme);
    add_unique(series, r.series);
    if (std::find(rows.begin(), rows.end(), std::pair{r.series, r.x}) == rows.end()) rows.emplace_back(r.series, r.x);
    cells[{r.series, r.x, r.scheme}] = it->second;
  }
  if (rows.empty()) return fmt::format("(no results for {})\n", metric);
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    auto rank = [&](const std::string& s) { return std::find(series.begin(), series.end(), s) - series.begin(); };
    return std::pair{rank(a.first), a.second} < std::pair{rank(b.first), b.second};
  });

  const bool named = series.size() > 1 || !series.front().empty();
  std::vector<std::vector<std::string>> table;
  table.push_back({"series", x_name});
  table.back().insert(table.back().end(), schemes.begin(), schemes.end());
  for (const auto& [s, x] : rows) {
    table.push_back({s, format_number(x, 6)});
    for (const auto& scheme : schemes) {
      auto it = cells.find({s, x, scheme});
      table.back().push_back(it == cells.end() ? "-" : format_number(it->second));
    }
  }
  std::vector<size_t> width(table.front().size(), 0);
  for (const auto& row : table)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  const bool with_x = !x_name.empty();  // (no sweep: every run's x is 0, which says nothing)
  for (const auto& row : table) {
    std::string line;
    for (size_t c = named ? 0 : 1; c < row.size(); ++c) {
      if (c == 1 && !with_x) continue;
      line += c == 0 ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("  {:>{}}", row[c], width[c]);
    }
    out += line.substr(named ? 0 : 2) + "\n";
  }
  return out;
}

std::vector<std::string> metric_names(const std::vector<Record>& records, const std::vector<std::string>& first) {
  std::vector<std::string> out;
  std::set<std::string> present;
  for (const Record& r : records)
    for (const auto& [name, value] : r.metrics) present.insert(name);
  for (const auto& m : first)
    if (present.erase(m)) out.push_back(m);
  out.insert(out.end(), present.begin(), present.end());
  return out;
}

std::string format_tables(const std::vector<Record>& records, const std::vector<std::string>& metrics,
                          const std::string& x_name) {
  std::string out;
  for (const auto& m : metrics) {
    const std::string label = metric_label(m);
    out += fmt::format("{}{} by {}scheme:\n", out.empty() ? "" : "\n",
                       label == m ? m : fmt::format("{} [{}]", label, m), x_name.empty() ? "" : x_name + " and ");
    out += format_table(records, m, x_name);
  }
  return out;
}

}  // namespace ina::exp
