#include "train/fortune_files.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::fortunes {

std::vector<std::filesystem::path> fortune_files(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error(fmt::format("{}: not a directory of fortune files (install Debian's fortunes)", dir));
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto ext = it->path().extension().string();
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && ext != ".dat" && ext != ".u8") files.push_back(it->path());
  }
  if (ec) throw std::runtime_error(fmt::format("{}: cannot read the directory ({})", dir, ec.message()));
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error(fmt::format("{}: no fortune files (install Debian's fortunes)", dir));
  return files;
}

}  // namespace ina::fortunes
