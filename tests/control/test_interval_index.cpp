// control/interval_index.hpp against a scan of every interval.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "control/interval_index.hpp"

namespace ina::control {
namespace {

struct Iv {
  double from, to;
};

std::vector<size_t> scan_stab(const std::vector<Iv>& v, double t) {
  std::vector<size_t> out;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].from <= t && t < v[i].to) out.push_back(i);
  return out;
}

std::vector<size_t> scan_starting(const std::vector<Iv>& v, double lo, double hi) {
  std::vector<size_t> out;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].to > v[i].from && lo < v[i].from && v[i].from < hi) out.push_back(i);
  return out;
}

IntervalIndex built(const std::vector<Iv>& v) {
  IntervalIndex x;
  for (const Iv& i : v) x.add(i.from, i.to);
  x.build();
  return x;
}

// Short intervals and a few spanning everything, empty ones, shared ends,
// queries at every end point and outside the range: the same intervals as
// the scan, stab in insertion order, starting each once.
TEST(IntervalIndex, AnswersAsAScanOfEveryInterval) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> at(0, 1000), len(0, 20);
  for (int round = 0; round < 20; ++round) {
    std::vector<Iv> v;
    for (int i = 0; i < 300; ++i) {
      const double a = at(rng);
      v.push_back({a, a + len(rng)});
    }
    v.push_back({-50, 2000});  // spans every bin
    v.push_back({500, 500});   // empty
    v.push_back({v[3].to, v[3].to + 5});  // begins where another ends
    const IntervalIndex x = built(v);
    std::vector<double> ts = {-100, -50, 0, 999.5, 2000, 2500};
    for (const Iv& i : v) {
      ts.push_back(i.from);
      ts.push_back(i.to);
    }
    for (int k = 0; k < 200; ++k) ts.push_back(at(rng));
    for (const double t : ts) {
      std::vector<size_t> got;
      x.stab(t, [&](size_t i) { got.push_back(i); });
      ASSERT_EQ(got, scan_stab(v, t)) << "t " << t;
    }
    for (int k = 0; k < 200; ++k) {
      const double lo = at(rng) - 100, hi = lo + len(rng) * 10;
      std::vector<size_t> got;
      x.starting(lo, hi, [&](size_t i) { got.push_back(i); });
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, scan_starting(v, lo, hi)) << "(" << lo << ", " << hi << ")";
    }
  }
}

TEST(IntervalIndex, EmptyAndClearedIndexesAnswerNothing) {
  IntervalIndex x;
  int calls = 0;
  x.stab(1, [&](size_t) { ++calls; });
  x.starting(0, 2, [&](size_t) { ++calls; });
  x.add(0, 10);
  x.build();
  x.stab(5, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 1);
  x.clear();
  x.build();
  x.stab(5, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(x.size(), 0u);
}

// Every interval at one point: a zero-width range gets one bin.
TEST(IntervalIndex, IntervalsAtOnePoint) {
  const IntervalIndex x = built({{3, 3}, {3, 3}});
  int calls = 0;
  x.stab(3, [&](size_t) { ++calls; });
  x.starting(2, 4, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);  // empty intervals contain nothing and begin nothing
  const IntervalIndex y = built({{3, 4}, {3, 4}});
  std::vector<size_t> got;
  y.stab(3, [&](size_t i) { got.push_back(i); });
  EXPECT_EQ(got, (std::vector<size_t>{0, 1}));
}

// Ends at infinity, and a span too narrow for its bins: answers as the
// scan, no bin computed from a NaN.
TEST(IntervalIndex, InfiniteEndsAndNarrowSpans) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Iv> v = {{0, inf}, {-inf, 5}, {2, 3}};
  const IntervalIndex x = built(v);
  for (const double t : {-1e300, -1.0, 0.0, 2.5, 4.0, 1e300}) {
    std::vector<size_t> got;
    x.stab(t, [&](size_t i) { got.push_back(i); });
    EXPECT_EQ(got, scan_stab(v, t)) << "t " << t;
  }
  int calls = 0;
  x.stab(std::numeric_limits<double>::quiet_NaN(), [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  const double d = std::numeric_limits<double>::denorm_min();
  const std::vector<Iv> w = {{0, d}, {0, d}, {0, d}, {0, d}};
  const IntervalIndex y = built(w);
  std::vector<size_t> got;
  y.stab(0, [&](size_t i) { got.push_back(i); });
  EXPECT_EQ(got, scan_stab(w, 0));
}

}  // namespace
}  // namespace ina::control
