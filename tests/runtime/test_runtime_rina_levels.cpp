// Rina above the ToR (§IV-D) in the UDP runtime: a layout's "aggregation"
// entry is an INA switch above racks (runtime/ring_layout.hpp); the racks'
// ranks are one group (host::merge_rina_group), each INA ToR below it a
// level that aggregates its rack first and sends one partial up, the ranks
// of a rack without one send to the switch above directly
// (host/rina_levels.hpp, as the simulator builds the BOM's groups).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "host/ring.hpp"
#include "runtime/control.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime_fixture.hpp"
#include "test_keys.hpp"

namespace {

namespace fs = std::filesystem;
using ina::rt::RingLayout;

fs::path tmp(const std::string& name) {
  return fs::temp_directory_path() / ("ina_rina_levels_" + std::to_string(::getpid()) + "_" + name);
}

// 8 workers in 2 racks of 4 (both INA unless told), one switch above both.
nlohmann::json layout_json(bool ina1 = true) {
  nlohmann::json w = nlohmann::json::array();
  for (int r = 0; r < 8; ++r) w.push_back("127.0.0.1:" + std::to_string(2001 + r));
  return {{"job", 1u}, {"scheme", "rina"}, {"payload", 64u}, {"memory_bytes", 100000u}, {"workers", w},
          {"racks", {{{"ranks", {0u, 1u, 2u, 3u}}, {"ina", true}, {"switch", "127.0.0.1:3001"}},
                     {{"ranks", {4u, 5u, 6u, 7u}}, {"ina", ina1}, {"switch", ina1 ? nlohmann::json("127.0.0.1:3002") : nlohmann::json()}}}},
          {"aggregation", {{{"switch", "127.0.0.1:3003"}, {"racks", {0u, 1u}}}}}};
}

// The plan and every switch's level from the layout: one group of the 8 ranks
// under node 11 (N + 1 + R + 0), each rank entering at its rack's ToR (nodes
// 9 and 10); the ToRs are levels with the group's bits of their ranks, the
// switch above has both as children with the bits below each.
TEST(RuntimeRinaLevels, LayoutMergesTheRacksIntoOneGroupUnderTheSwitchAbove) {
  const RingLayout L = RingLayout::from_json(layout_json(), "test", true);
  ASSERT_EQ(L.switch_count(), 3u);
  EXPECT_EQ(L.switch_id(2), 11);
  const auto plan = L.plan(8 * 64);
  ASSERT_EQ(plan.size(), 8u);
  for (const auto& stages : plan) {
    ASSERT_EQ(stages.size(), 1u);
    ASSERT_EQ(stages[0].groups.size(), 1u);  // G = 1
    const auto& g = stages[0].groups[0];
    EXPECT_EQ(g.ranks, (std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(g.tor, 11);
    EXPECT_EQ(g.entry, (std::vector<ina::NodeId>{9, 9, 9, 9, 10, 10, 10, 10}));
  }
  EXPECT_EQ(ina::host::ring_steps(plan[0], 0), 2u);  // G ScatterReduce + max(G - 1, 1) AllGather steps
  const auto groups = L.rina_groups();
  ASSERT_EQ(groups.size(), 1u);
  const auto& lv = groups[0].levels;
  ASSERT_EQ(lv.size(), 3u);
  EXPECT_EQ(lv[0].sw, 11);  // the top
  EXPECT_EQ(lv[0].parent, ina::kNoNode);
  EXPECT_EQ(lv[0].children, (std::vector<ina::NodeId>{9, 10}));
  EXPECT_EQ(lv[0].child_bits, (std::vector<uint64_t>{0x0f, 0xf0}));
  EXPECT_EQ(lv[1].sw, 9);
  EXPECT_EQ(lv[1].parent, 11);
  EXPECT_EQ(lv[1].rack, (std::vector<uint16_t>{0, 1, 2, 3}));
  EXPECT_EQ(lv[1].bits, (std::vector<uint8_t>{0, 1, 2, 3}));
  EXPECT_EQ(lv[2].sw, 10);
  EXPECT_EQ(lv[2].bits, (std::vector<uint8_t>{4, 5, 6, 7}));
  // Rack 1 without INA: its ranks enter at the switch above, which has one child.
  const RingLayout M = RingLayout::from_json(layout_json(false), "test", true);
  const auto g = M.plan(8 * 64)[5][0].groups;
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].entry, (std::vector<ina::NodeId>{9, 9, 9, 9, 11, 11, 11, 11}));
  EXPECT_EQ(M.rina_groups()[0].levels[0].children, (std::vector<ina::NodeId>{9}));
  // The layout file keeps the entry (a layout without it keeps its old text).
  EXPECT_EQ(RingLayout::from_json(L.to_json(), "again", true).to_json(), L.to_json());
}

std::string layout_error(const nlohmann::json& j, bool need_switches = true) {
  try {
    (void)RingLayout::from_json(j, "file.json", need_switches);
  } catch (const ina::rt::RuntimeError& e) {
    return e.what();
  }
  return "";
}

TEST(RuntimeRinaLevels, BadAggregationNamesFileFieldAndValue) {
  auto j = layout_json();
  j["aggregation"][0]["racks"] = {0u, 2u};
  EXPECT_EQ(layout_error(j), "layout file.json: field 'aggregation[0].racks' = [0,2]: no such rack: 2 (the layout has racks 0..1)");
  j = layout_json();
  j["aggregation"].push_back({{"switch", "127.0.0.1:3004"}, {"racks", {1u}}});
  EXPECT_EQ(layout_error(j), "layout file.json: field 'aggregation[1].racks' = [1]: rack 1 is already under aggregation[0]");
  j = layout_json();
  j["scheme"] = "rar";
  EXPECT_NE(layout_error(j).find("field 'aggregation' = [{\"racks\":[0,1],\"switch\":\"127.0.0.1:3003\"}]: only rina has INA "
                                 "switches above the ToR"), std::string::npos) << layout_error(j);
  j = layout_json();
  j["aggregation"][0]["switch"] = nullptr;
  EXPECT_EQ(layout_error(j), "layout file.json: field 'aggregation[0].switch' = null: give this INA switch's \"ip:port\"");
  EXPECT_EQ(layout_error(j, false), "");  // a switch's copy may leave it out
  j = layout_json();
  j["aggregation"][0]["switch"] = "127.0.0.1:3001";
  EXPECT_NE(layout_error(j).find("the same address as racks[0].switch"), std::string::npos) << layout_error(j);
  j = layout_json();
  j["aggregation"][0]["tor"] = 1u;
  EXPECT_NE(layout_error(j).find("field 'aggregation[0].tor' = 1: unknown field"), std::string::npos) << layout_error(j);
  j = layout_json();
  j["racks"] = {{{"ranks", {0u}}, {"ina", true}}, {{"ranks", {1u, 2u, 3u, 4u, 5u, 6u, 7u}}, {"ina", false}}};
  j["aggregation"][0]["racks"] = {0u};
  EXPECT_NE(layout_error(j).find("field 'aggregation[0].racks' = [0]: a group above the ToR needs 2..64 ranks below it, "
                                 "these racks hold 1"), std::string::npos) << layout_error(j);
}

struct RunOut {
  int status = -1;
  std::string text;
  nlohmann::json j;
};

RunOut ina_run(const std::string& args, const std::string& tag, int payload = 256) {
  const fs::path json = tmp(tag + ".json");
  const auto r = ina_test::run_ina("run --scheme rina --size 65536 --iterations 2 --payload " + std::to_string(payload) +
                                   " --timeout 50 --json " +
                                   json.string() + " " + args);
  RunOut out{r.status, r.output, nlohmann::json()};
  std::ifstream in(json);
  out.j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(json);
  return out;
}

// The switch statistics of the run's switches by name, in start order.
const nlohmann::json& sw(const RunOut& r, size_t k) { return r.j["switches"][k]["switch"]; }

// 65536 B of 256-value packets: 64 packets per allreduce, 2 allreduces. With
// G = 1 the one group's shard is the whole gradient: each switch completes
// 128 sums; a ToR aggregates its 4 ranks' packets (512), the switch above one
// partial per packet from each child ToR (2 x 128) and, for a rack without
// INA, each of its ranks' packets (4 x 128).
TEST(RuntimeRinaLevels, TwoRacksUnderOneSwitchAboveExactWithTheLevelAggregated) {
  struct Case {
    std::string args;
    size_t switches;
    uint64_t top_aggregated;
  };
  for (const Case& c : {Case{"--workers 8 --racks 2 --rina-above 0,1", 3, 2 * 128},
                        Case{"--workers 8 --racks 2 --ina-racks 0 --rina-above 0,1", 2, 128 + 4 * 128},
                        Case{"--workers 8 --racks 2 --ina-racks none --rina-above 0,1", 1, 8 * 128}}) {
    const RunOut r = ina_run(c.args, "two");
    ASSERT_EQ(r.status, 0) << c.args << "\n" << r.text;
    ASSERT_TRUE(r.j.is_object()) << r.text;
    EXPECT_TRUE(r.j["ok"].get<bool>()) << r.j["problems"];
    const auto& job = r.j["jobs"][0];
    EXPECT_EQ(job["mismatches"], 0);
    EXPECT_EQ(job["verified"], 65536 / 4 * 2 * 8);
    EXPECT_EQ(job["steps_per_allreduce"], 2) << c.args;  // G = 1: one ScatterReduce and one AllGather step
    ASSERT_EQ(r.j["switches"].size(), c.switches) << c.args;
    for (size_t k = 0; k + 1 < c.switches; ++k) {  // the INA ToRs: their racks first
      EXPECT_EQ(sw(r, k)["aggregated"], 4 * 128) << c.args;
      EXPECT_EQ(sw(r, k)["completed"], 128) << c.args;
    }
    const auto& top = sw(r, c.switches - 1);
    EXPECT_EQ(top["aggregated"], c.top_aggregated) << c.args;
    EXPECT_EQ(top["completed"], 128) << c.args;
    for (const auto& s : r.j["switches"]) {
      EXPECT_EQ(s["occupied"], 0);
      EXPECT_EQ(s["switch"].value("foreign_data", 0), 0);
    }
    EXPECT_NE(r.text.find("switch above racks 0,1: "), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("2 steps per allreduce"), std::string::npos) << r.text;
  }
}

// 4 racks of 2, the switch above racks 0 and 1: groups {0..3}, {4, 5}, {6, 7}
// (G = 3: 2G - 1 = 5 steps). Shards of 16384 / 3 values: 3 packets each, 9
// per allreduce, 18 in all at each switch; the switch above aggregates one
// partial per packet from each of its 2 children.
TEST(RuntimeRinaLevels, FourRacksTwoUnderTheSwitchAboveThreeGroups) {
  const RunOut r = ina_run("--workers 8 --racks 4 --rina-above 0,1", "four", 2048);
  ASSERT_EQ(r.status, 0) << r.text;
  ASSERT_TRUE(r.j.is_object()) << r.text;
  EXPECT_TRUE(r.j["ok"].get<bool>()) << r.j["problems"];
  EXPECT_EQ(r.j["jobs"][0]["mismatches"], 0);
  EXPECT_EQ(r.j["jobs"][0]["verified"], 65536 / 4 * 2 * 8);
  EXPECT_EQ(r.j["jobs"][0]["steps_per_allreduce"], 5);
  ASSERT_EQ(r.j["switches"].size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(sw(r, k)["completed"], 18) << k;
    EXPECT_EQ(sw(r, k)["aggregated"], 2 * 18) << k;  // 2 ranks per ToR; 2 children above
  }
}

// Under 1 % loss, duplication and reordering in every process (the switches
// too): every value exact, every aggregator of the three switches free after
// the job, and the faults happened (retransmissions recovered them).
TEST(RuntimeRinaLevels, ExactUnderFaultsWithNothingHeld) {
  const RunOut r = ina_run("--workers 8 --racks 2 --rina-above 0,1 --loss 0.01 --duplicate 0.01 --reorder 0.01", "faults", 64);
  ASSERT_EQ(r.status, 0) << r.text;
  ASSERT_TRUE(r.j.is_object()) << r.text;
  EXPECT_TRUE(r.j["ok"].get<bool>()) << r.j["problems"];
  EXPECT_EQ(r.j["jobs"][0]["mismatches"], 0);
  EXPECT_EQ(r.j["jobs"][0]["verified"], 65536 / 4 * 2 * 8);
  ASSERT_EQ(r.j["switches"].size(), 3u);
  uint64_t lost = 0, retransmits = 0;
  for (const auto& s : r.j["switches"]) {
    EXPECT_EQ(s["occupied"], 0);
    lost += s["engine"]["fault_lost"].get<uint64_t>();
  }
  for (const auto& w : r.j["jobs"][0]["workers"]) {
    lost += w["stats"]["engine"]["fault_lost"].get<uint64_t>();
    retransmits += w["stats"]["ring"]["retransmits"].get<uint64_t>();
    EXPECT_EQ(w["pending_timers"], 0);
    EXPECT_EQ(w["packets_in_use"], 0);
  }
  EXPECT_GT(lost, 0u);
  EXPECT_GT(retransmits, 0u);
}

TEST(RuntimeRinaLevels, BadOptionsAndAFailureAreRefusedByName) {
  auto refused = [](const std::string& args, const std::string& what) {
    const auto r = ina_test::run_ina("run " + args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
  };
  refused("--scheme rina --workers 8 --racks 2 --rina-above 0,2",
          "--rina-above names rack 2, which does not exist (--racks 2: racks 0..1)");
  refused("--scheme rina --workers 8 --racks 2 --rina-above 0,0", "--rina-above '0,0' names rack 0 twice");
  refused("--scheme rar --workers 8 --racks 2 --rina-above 0,1", "--rina-above 0,1: only --scheme rina");
  refused("--scheme rina --workers 8 --racks 8 --rina-above 0",
          "--rina-above 0: a group above the ToR needs 2..64 ranks below its switch, these racks hold 1");
  refused("--scheme rina --workers 8 --racks 2 --rina-above 0,1 --fail-rank 1 --fail-at-op 0 --iterations 2",
          "a group above the ToR cannot lose a worker");
}

// The switch above refuses a new epoch: a failure in a layout with a group
// above the ToR is not handled (the simulator refuses it too).
TEST(RuntimeRinaLevels, SwitchAboveRefusesReconfigure) {
  const fs::path layout = tmp("reconf_layout.json");
  std::ofstream(layout) << layout_json().dump();
  ina::rt::SwitchDaemonConfig c = ina::test::switch_config("rina");
  c.layout = layout.string();
  c.rack = 2;  // aggregation[0]
  ina::rt::SwitchDaemon d(c);
  std::thread t([&] { d.run(); });
  const ina::Time timeout = 2 * ina::kSec;
  const auto st = ina::rt::query_switch_stats(d.endpoint(), timeout, &c.key, 0);
  EXPECT_EQ(st["layout"]["id"], 11);
  EXPECT_EQ(st["layout"]["rack_ranks"], nlohmann::json::array({0, 1, 2, 3, 4, 5, 6, 7}));  // the group, agent first
  ina::rt::ReconfigureRequest r;
  r.job = 1;
  r.epoch = 1;
  r.workers = {1, 2, 3, 4, 5, 6, 7};
  r.rack = {0, 1, 2, 3, 4, 5, 6};
  std::string e;
  try {
    ina::rt::reconfigure_switch(d.endpoint(), timeout, ina::rt::job_key(c.key, 1), r);
  } catch (const ina::rt::RuntimeError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("has INA switches above the ToR (field 'aggregation'): a failure is not handled there"), std::string::npos)
      << e;
  d.request_stop();
  t.join();
  fs::remove(layout);
}

}  // namespace
