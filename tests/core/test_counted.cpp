#include "core/counted.hpp"

#include <gtest/gtest.h>

namespace ina {
namespace {

TEST(Counted, OneTakesTheSingularEveryOtherCountThePlural) {
  EXPECT_EQ(counted(1, "allreduce"), "1 allreduce");
  EXPECT_EQ(counted(0, "allreduce"), "0 allreduces");
  EXPECT_EQ(counted(2, "allreduce"), "2 allreduces");
  EXPECT_EQ(counted(1, "PS", "PSes"), "1 PS");
  EXPECT_EQ(counted(3, "PS", "PSes"), "3 PSes");
  EXPECT_EQ(counted(0, "TS", "TSs"), "0 TSs");
}

}  // namespace
}  // namespace ina
