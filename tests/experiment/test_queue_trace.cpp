// experiment/queue_trace.hpp: the queues of named links of a network run,
// written as CSV (scenario keys run.queue_trace and run.queue_trace_links).
#include "experiment/queue_trace.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "experiment/collective.hpp"
#include "read_csv.hpp"
#include "ring_settings.hpp"
#include "topo/graph.hpp"

namespace ina {
namespace {

using test::read_csv;

// RAR on the Rina testbed (two ToRs of four hosts): the trace of a host's
// uplink holds every packet it carried (its bytes are the link's counted
// bytes), in time order, none dropped, and the link between the ToRs, which
// the ring crosses once, carries as much; tracing changes nothing of the
// run; a window keeps its own packets only.
TEST(QueueTrace, ARunWritesEveryPacketOfItsLinksAndChangesNothing) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ina-queue-{}", ::getpid());
  std::filesystem::remove_all(dir);
  const topo::Graph g = topo::rina_testbed(100);
  auto s = test::small_ring(0.0625);
  const auto plain = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(plain.ok) << plain.problems;
  s.queue_trace = dir.string();
  s.queue_trace_links = "tor0->tor1, h0->tor0";
  const auto r = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.digest, plain.digest) << "tracing changes nothing of the run";
  const auto rows = read_csv((dir / fmt::format("queue-{:016x}.csv", r.digest)).string());
  ASSERT_GT(rows.size(), 1u);
  EXPECT_EQ(rows[0].size(), 13u);
  EXPECT_EQ(rows[0][0], "link");
  std::map<std::string, uint64_t> bytes, count;
  std::map<std::string, long long> last_t;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), 13u) << i;
    const std::string& link = row[0];
    ASSERT_TRUE(link == "tor0->tor1" || link == "h0->tor0") << link;
    if (link == "h0->tor0") {
      EXPECT_EQ(row[11], "h0") << "a host's uplink carries its own packets";
    }
    EXPECT_EQ(row[5], "sent");
    EXPECT_TRUE(row[4] == "RingData" || row[4] == "RingAck") << "a ring's packets, by type name: " << row[4];
    const long long t = std::stoll(row[1]);
    EXPECT_GE(t, last_t[link]) << "in the order the queue was offered them";
    last_t[link] = t;
    EXPECT_GE(std::stoll(row[2]), 0);
    bytes[link] += std::stoull(row[3]);
    ++count[link];
  }
  ASSERT_EQ(count.size(), 2u) << "the links in the order named";
  EXPECT_EQ(rows[1][0], "tor0->tor1");
  // The run's own count of h0's uplink (the busiest links: every host's, in link order).
  bool found = false;
  for (const auto& l : r.busiest_links)
    if (l.link == "h0->tor0") {
      found = true;
      EXPECT_EQ(bytes["h0->tor0"], l.bytes);
    }
  EXPECT_TRUE(found) << "h0->tor0 is among the busiest links";
  EXPECT_EQ(bytes["tor0->tor1"], bytes["h0->tor0"]) << "the ring's one crossing carries a host's share";

  // The same run split in two partitions on two threads: the same trace.
  {
    auto split = s;
    split.threads = 2;
    split.partitions = 2;
    const auto p2 = exp::run_collective(g, "rar", split);
    ASSERT_TRUE(p2.ok) << p2.problems;
    ASSERT_EQ(p2.digest, plain.digest);
    EXPECT_GT(p2.windows, 0u) << "it ran in windows";
    EXPECT_EQ(read_csv((dir / fmt::format("queue-{:016x}.csv", p2.digest)).string()), rows);
  }

  // The middle of the run only.
  const double mid_ms = static_cast<double>(last_t["tor0->tor1"]) / 1e9 / 2;
  s.queue_trace_from_ms = mid_ms / 2;
  s.queue_trace_to_ms = mid_ms;
  const auto w = exp::run_collective(g, "rar", s);
  ASSERT_TRUE(w.ok) << w.problems;
  EXPECT_EQ(w.digest, plain.digest);
  const auto part = read_csv((dir / fmt::format("queue-{:016x}.csv", w.digest)).string());
  size_t in_window = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const double t_ms = std::stod(rows[i][1]) / 1e9;
    in_window += t_ms >= mid_ms / 2 && t_ms < mid_ms;
  }
  ASSERT_GT(in_window, 0u);
  EXPECT_EQ(part.size(), 1 + in_window) << "exactly the whole trace's rows in the window";
  std::filesystem::remove_all(dir);
}

TEST(QueueTrace, LinksAreNamedByTheirNodes) {
  const topo::Graph g = topo::rina_testbed(100);
  const auto links = exp::queue_trace_links(g, " tor0->tor1 ,h7->tor1");
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(g.node(links[0].first).name, "tor0");
  EXPECT_EQ(g.node(links[0].second).name, "tor1");
  EXPECT_EQ(g.node(links[1].first).name, "h7");
  EXPECT_THROW(exp::queue_trace_links(g, "tor0-tor1"), std::invalid_argument);
  EXPECT_THROW(exp::queue_trace_links(g, " , "), std::invalid_argument);
  try {
    exp::queue_trace_links(g, "tor0->h7");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tor0's links go to h0, h1, h2, h3, tor1"), std::string::npos) << e.what();
  }
  auto s = test::small_ring(0.0625);
  s.queue_trace = "/proc/no-such-dir";
  s.queue_trace_links = "tor0->tor1";
  try {
    exp::run_collective(g, "rar", s);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot make the directory '/proc/no-such-dir'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ina
