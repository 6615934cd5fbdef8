// The Facebook coflow trace (P4INC-AOI's MapReduce jobs, its [61]) and the
// strict parser of its format (workload/coflow.hpp).
#include <gtest/gtest.h>

#include <string>

#include "workload/coflow.hpp"

using namespace ina::workload;

namespace {

const std::string kTrace = std::string(INA_SOURCE_DIR) + "/data/coflow/FB2010-1Hr-150-0.txt";

std::string error_of(const std::string& text) {
  try {
    parse_coflow_trace(text, "t.txt");
  } catch (const CoflowTraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Values read off the file by hand (its first, fourth and last lines) and
// facts of the whole trace computed once outside ina (a Python script):
// 526 coflows on 150 racks, arrivals in order up to 3 629 235 ms, racks up
// to 149, at most 147 mappers and 145 reducers, 35 533 534 MB shuffled.
TEST(CoflowTrace, TheFacebookTraceAsPublished) {
  const CoflowTrace t = load_coflow_trace(kTrace);
  EXPECT_EQ(t.ports, 150u);
  ASSERT_EQ(t.coflows.size(), 526u);
  const Coflow& first = t.coflows.front();
  EXPECT_EQ(first.id, 1u);
  EXPECT_EQ(first.arrival_ms, 0u);
  EXPECT_EQ(first.mappers, (std::vector<unsigned>{22}));
  ASSERT_EQ(first.reducers.size(), 1u);
  EXPECT_EQ(first.reducers[0].rack, 65u);
  EXPECT_EQ(first.reducers[0].shuffle_mb, 1.0);
  const Coflow& fourth = t.coflows[3];  // "4 15531 27 0 2 4 ... 116 0:648.0 1:972.0 ..."
  EXPECT_EQ(fourth.arrival_ms, 15531u);
  EXPECT_EQ(fourth.mappers.size(), 27u);
  EXPECT_EQ(fourth.mappers.front(), 0u);
  EXPECT_EQ(fourth.mappers.back(), 142u);
  EXPECT_EQ(fourth.reducers.front().rack, 0u);
  EXPECT_EQ(fourth.reducers.front().shuffle_mb, 648.0);
  const Coflow& last = t.coflows.back();  // "526 3629235 2 43 79 1 60:10.0"
  EXPECT_EQ(last.id, 526u);
  EXPECT_EQ(last.arrival_ms, 3629235u);
  EXPECT_EQ(last.mappers, (std::vector<unsigned>{43, 79}));
  ASSERT_EQ(last.reducers.size(), 1u);
  EXPECT_EQ(last.reducers[0].rack, 60u);
  EXPECT_EQ(last.shuffle_mb(), 10.0);
  double total = 0;
  size_t most_mappers = 0, most_reducers = 0;
  for (const Coflow& c : t.coflows) {
    total += c.shuffle_mb();
    most_mappers = std::max(most_mappers, c.mappers.size());
    most_reducers = std::max(most_reducers, c.reducers.size());
  }
  EXPECT_EQ(total, 35533534.0);  // whole megabytes: exact in a double
  EXPECT_EQ(most_mappers, 147u);
  EXPECT_EQ(most_reducers, 145u);
}

// Every malformed line is refused, naming the file, the line, the field and the value.
TEST(CoflowTrace, BadInputNamesLineFieldAndValue) {
  struct Case {
    std::string text, want;
  };
  const Case cases[] = {
      {"", "t.txt: empty"},
      {"150\n", "line 1: field 'header' (value: '150')"},
      {"0 1\n1 0 1 0 1 0:1\n", "line 1: field 'ports' (value: '0')"},
      {"4 2\n1 0 1 0 1 0:1\n", "field 'coflows' (value: 2): the file has 1 coflows"},
      {"4 1\n1 0 2 0 1 0:1\n", "line 2: field 'reducers' (value: '0:1'): not a non-negative integer"},
      {"4 1\n1 0 1 0 0 0:1\n", "line 2: field 'reducers' (value: '0'): a coflow needs at least one reducer"},
      {"4 1\n1 0 1 0 2 0:1\n", "line 2: field 'reducers' (value: '2'): 1 reducer fields follow, not 2"},
      {"4 1\n1 0 1 4 1 0:1\n", "line 2: field 'mapper rack' (value: '4'): above 3"},
      {"4 1\n1 0 1 0 1 7:1\n", "line 2: field 'reducer rack' (value: '7'): above 3"},
      {"4 1\n1 0 1 0 1 0-1\n", "line 2: field 'reducer' (value: '0-1'): must be <rack>:<shuffle MB>"},
      {"4 1\n1 0 1 0 1 0:-2\n", "line 2: field 'shuffle MB' (value: '-2'): must be finite and >= 0"},
      {"4 1\n1 0 1 0 1 0:nan\n", "line 2: field 'shuffle MB' (value: 'nan')"},
      {"4 1\n1 x 1 0 1 0:1\n", "line 2: field 'arrival_ms' (value: 'x'): not a non-negative integer"},
      {"4 2\n1 5 1 0 1 0:1\n2 4 1 0 1 0:1\n", "line 3: field 'arrival_ms' (value: '4'): before the previous coflow's 5"},
      {"4 2\n1 0 1 0 1 0:1\n1 0 1 0 1 0:1\n", "line 3: field 'id' (value: '1'): repeats an earlier coflow's id"},
      {"4 1\n1 0 0 1 0:1\n", "line 2: field 'mappers' (value: '0'): a coflow needs at least one mapper"},
      {"4 1\n1 0 1 0\n", "line 2: field 'coflow' (value: '1 0 1 0')"},
      {"4 1\n1 0 3 0 1\n", "line 2: field 'mappers' (value: '3'): the line has only 5 fields"},
      {"4 1\n1 0 3 0 1 2 3\n", "line 2: field 'reducers' (value: '3'): 0 reducer fields follow, not 3"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_NE(e.find(c.want), std::string::npos) << "input:\n" << c.text << "error: " << e;
    if (c.text.size() > 1) {
      EXPECT_EQ(e.rfind("t.txt: ", 0), 0u) << e;
    }
  }
  try {
    load_coflow_trace("/nonexistent/trace.txt");
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const CoflowTraceError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/trace.txt: cannot open"), std::string::npos) << e.what();
  }
}
