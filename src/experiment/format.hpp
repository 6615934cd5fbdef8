#pragma once
// Numbers as a person reads them in terminal tables and demo lines.
#include <string>

namespace ina::exp {

// `v` in fixed notation with `sig` significant digits (default 4), without
// float noise or trailing zeros: 1.5252916520000002 -> "1.525",
// 12345.0 -> "12345" (an integer part is never rounded away), 0.1 -> "0.1",
// 1e-7 -> "0.0000001", 0 -> "0", -2.5 -> "-2.5". Magnitudes below 1e-9 or
// at least 1e15 fall back to scientific notation ("1.5e-12", "2e+15"), where
// fixed notation would be a wall of zeros. NaN -> "nan", infinities -> "inf" /
// "-inf". `sig` below 1 counts as 1.
std::string format_number(double v, int sig = 4);

}  // namespace ina::exp
