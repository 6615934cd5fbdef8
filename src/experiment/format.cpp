#include "experiment/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ina::exp {
namespace {

// Drops the trailing zeros of a fixed-notation number, and its point if nothing is left after it.
std::string strip_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::string format_number(double v, int sig) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";  // also -0
  sig = std::max(sig, 1);
  const double a = std::fabs(v);
  if (a < 1e-9 || a >= 1e15) {
    // Scientific, mantissa without trailing zeros: "1.5e-12".
    std::string s = fmt::format("{:.{}e}", v, sig - 1);
    const size_t e = s.find('e');
    return strip_zeros(s.substr(0, e)) + s.substr(e);
  }
  // Digits after the point for `sig` significant digits; none once the integer part has them all.
  const int magnitude = static_cast<int>(std::floor(std::log10(a)));
  const int decimals = std::max(0, sig - 1 - magnitude);
  std::string s = strip_zeros(fmt::format("{:.{}f}", v, decimals));
  return s == "-0" ? "0" : s;
}

}  // namespace ina::exp
