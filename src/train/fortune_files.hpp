#pragma once
// The fortune files of a directory (Debian's `fortunes` package): its
// regular files besides the strfile indexes (.dat) and the UTF-8 copies
// (.u8), sorted by name. Apart from fortunes.hpp, which includes
// <torch/torch.h>: the training launcher checks --data with it and compiles
// without torch's headers.
#include <filesystem>
#include <string>
#include <vector>

namespace ina::fortunes {

// Throws std::runtime_error if `dir` is not a directory, cannot be read or
// holds none.
std::vector<std::filesystem::path> fortune_files(const std::string& dir);

}  // namespace ina::fortunes
