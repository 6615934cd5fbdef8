#pragma once
// The fortune files of a directory (Debian's `fortunes` package): its
// regular files besides the strfile indexes (.dat) and the UTF-8 copies
// (.u8), sorted by name. Without libtorch, so `ina train` can check --data
// before it starts anything.
#include <filesystem>
#include <string>
#include <vector>

namespace ina::fortunes {

// Throws std::runtime_error if `dir` is not a directory or holds none.
std::vector<std::filesystem::path> fortune_files(const std::string& dir);

}  // namespace ina::fortunes
