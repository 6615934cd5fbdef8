#include "train/fortune_files.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::fortunes {

std::vector<std::filesystem::path> fortune_files(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error(fmt::format("{}: not a directory of fortune files (install Debian's fortunes)", dir));
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto ext = e.path().extension().string();
    if (e.is_regular_file() && ext != ".dat" && ext != ".u8") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error(fmt::format("{}: no fortune files (install Debian's fortunes)", dir));
  return files;
}

}  // namespace ina::fortunes
