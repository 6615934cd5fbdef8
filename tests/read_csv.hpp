#pragma once
// A CSV file as rows of cells (no quoting: the files ina writes have none);
// a line ending in a comma has an empty last cell.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ina::test {

inline std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace ina::test
