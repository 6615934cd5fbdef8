// Ring collectives over loopback UDP (RAR, H-AR and Rina in the
// runtime): `ina run --scheme rar|h-ar|rina` starts `ina ring-worker`s (the
// simulator's host::RingEndpoint in a UdpEngine) and one `ina switch` per
// Rina rack (dataplane/rina.cpp). Every result value is checked against the
// exact sum by the workers; after the job no switch holds an aggregator and
// no worker's engine holds a timer or a packet.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "runtime/control.hpp"
#include "runtime/ring_worker.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime_fixture.hpp"
#include "test_keys.hpp"

namespace {

namespace fs = std::filesystem;

struct Out {
  int status = -1;
  std::string text;
};

// `ina ARGS` with stdout + stderr (ina run bounds itself with --timeout; the rest fail fast).
Out ina(const std::vector<std::string>& args, int = 60) {
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  const auto r = ina_test::run_ina(line);
  return {r.status, r.output};
}

fs::path ring_tmp(const std::string& name) {
  return fs::temp_directory_path() / ("ina_ring_" + std::to_string(::getpid()) + "_" + name);
}

struct RingCase {
  std::string scheme;
  int workers, racks;
  std::string ina_racks;  // "" = every rack
  bool faults;            // 1 % loss, 1 % duplication, 1 % reordering in every process
};

nlohmann::json run_ring(const RingCase& c, const std::string& tag, Out* out = nullptr) {
  const fs::path json = ring_tmp(tag + ".json");
  std::vector<std::string> a{"run", "--scheme", c.scheme, "--workers", std::to_string(c.workers), "--racks",
                             std::to_string(c.racks), "--size", "131072", "--iterations", "2", "--payload", "64",
                             "--json", json.string(), "--timeout", "50"};
  if (!c.ina_racks.empty()) a.insert(a.end(), {"--ina-racks", c.ina_racks});
  if (c.faults) a.insert(a.end(), {"--loss", "0.01", "--duplicate", "0.01", "--reorder", "0.01"});
  const Out o = ina(a, 60);
  if (out) *out = o;
  EXPECT_EQ(o.status, 0) << o.text;
  std::ifstream in(json);
  auto j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(json);
  EXPECT_FALSE(j.is_discarded()) << o.text;
  return j;
}

class RingOverUdp : public ::testing::TestWithParam<RingCase> {};


TEST_P(RingOverUdp, ExactAndNothingLeftAfterTheJob) {
  const RingCase c = GetParam();
  Out o;
  const auto j = run_ring(c, c.scheme, &o);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["ok"].get<bool>()) << j["problems"] << o.text;
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["mismatches"], 0);
  EXPECT_EQ(job["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2 * c.workers);
  ASSERT_EQ(job["workers"].size(), static_cast<size_t>(c.workers));
  uint64_t lost = 0, duplicated = 0, reordered = 0, retransmits = 0;
  for (const auto& w : job["workers"]) {
    EXPECT_TRUE(w["done"].get<bool>());
    EXPECT_EQ(w["pending_timers"], 0) << "rank " << w["rank"];
    EXPECT_EQ(w["packets_in_use"], 0) << "rank " << w["rank"];
    EXPECT_EQ(w["stats"]["transport"]["foreign"], 0);
    EXPECT_EQ(w["stats"]["transport"]["malformed"], 0);
    EXPECT_EQ(w["initial_window_packets"], 210) << "60 KB of 292-byte datagrams, rank " << w["rank"];
    lost += w["stats"]["engine"]["fault_lost"].get<uint64_t>();
    duplicated += w["stats"]["engine"]["fault_duplicated"].get<uint64_t>();
    reordered += w["stats"]["engine"]["fault_reordered"].get<uint64_t>();
    retransmits += w["stats"]["ring"]["retransmits"].get<uint64_t>();
  }
  // One ToR switch per INA rack (with at least two ranks); none for RAR and H-AR.
  size_t ina_racks = 0;
  for (const auto& r : j["layout"]["racks"])
    if (c.scheme == "rina" && r["ina"].get<bool>() && r["ranks"].size() >= 2) ++ina_racks;
  ASSERT_EQ(j["switches"].size(), ina_racks);
  for (const auto& s : j["switches"]) {
    EXPECT_EQ(s["occupied"], 0);                      // every slot freed by its acknowledgement
    EXPECT_GT(s["switch"]["completed"].get<uint64_t>(), 0u);  // the ToR did aggregate
    EXPECT_EQ(s["switch"]["foreign_data"], 0);
    EXPECT_EQ(s["switch"]["collisions"], 0);
  }
  if (c.faults) {  // the faults happened and were recovered from
    EXPECT_GT(lost, 0u);
    EXPECT_GT(duplicated, 0u);
    EXPECT_GT(reordered, 0u);
    EXPECT_GT(retransmits, 0u);
  } else {
    EXPECT_EQ(lost + duplicated + reordered, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, RingOverUdp,
    ::testing::Values(RingCase{"rar", 4, 1, "", false}, RingCase{"rar", 5, 1, "", true},
                      RingCase{"h-ar", 6, 2, "", false}, RingCase{"h-ar", 6, 2, "", true},
                      RingCase{"rina", 8, 2, "", false}, RingCase{"rina", 8, 2, "", true},
                      RingCase{"rina", 6, 3, "0,2", true}),
    [](const auto& info) {
      std::string n = info.param.scheme + "_" + std::to_string(info.param.workers) + "w" +
                      std::to_string(info.param.racks) + "r" + (info.param.ina_racks.empty() ? "" : "_ina02") +
                      (info.param.faults ? "_faults" : "");
      for (auto& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// RAR's dependency chain is 2(N-1) steps per allreduce (Rina §III-A); Rina
// with no INA rack is RAR: the same steps and the same bytes per worker; with
// two INA racks of four the ring has two groups, a shorter chain, and a rack
// member sends its gradient once.
TEST(RingOverUdpShape, RinaWithoutInaIsRarAndInaShortensTheChain) {
  const auto rar = run_ring({"rar", 8, 2, "", false}, "shape_rar");
  const auto none = run_ring({"rina", 8, 2, "none", false}, "shape_none");
  ASSERT_TRUE(rar.is_object() && none.is_object());
  EXPECT_EQ(rar["jobs"][0]["steps_per_allreduce"], 2 * (8 - 1));
  EXPECT_EQ(none["jobs"][0]["steps_per_allreduce"], rar["jobs"][0]["steps_per_allreduce"]);
  EXPECT_EQ(none["switches"].size(), 0u);
  // Packets sent for the first time (a retransmission after a late acknowledgement is timing, not the algorithm).
  auto first_sends = [](const nlohmann::json& run, int r) {
    const auto& st = run["jobs"][0]["workers"][r]["stats"]["ring"];
    return st["sent"].get<uint64_t>() - st["retransmits"].get<uint64_t>();
  };
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(first_sends(none, r), first_sends(rar, r)) << "rank " << r;
    EXPECT_EQ(none["jobs"][0]["workers"][r]["stats"]["ring"]["steps"], rar["jobs"][0]["workers"][r]["stats"]["ring"]["steps"]);
    // Packets of 64 values, 32768 values per allreduce, 2 allreduces: RAR sends 2(N-1)/N of the
    // gradient per rank; a Rina rack member sends its gradient once (its shard of every group
    // to the ToR); the agent also pulls and broadcasts the rack's AllGather.
    EXPECT_EQ(first_sends(rar, r), 2u * 32768 / 64 * 2 * 7 / 8) << "rank " << r;
  }
  const auto both = run_ring({"rina", 8, 2, "", false}, "shape_both");
  ASSERT_TRUE(both.is_object());
  for (int r = 1; r < 8; ++r) {
    if (r % 4 != 0) {
      EXPECT_EQ(first_sends(both, r), 2u * 32768 / 64) << "rank " << r;
    }
  }
  EXPECT_LT(both["jobs"][0]["steps_per_allreduce"].get<int>(), rar["jobs"][0]["steps_per_allreduce"].get<int>());
}

// ATP over racks (PS-based INA): `ina run --scheme atp
// --racks 2` runs one `ina switch` per rack as one aggregation tree, rack 0's
// the root with the PS behind it. DSA too (the registry's PsIna collective:
// the same tree, DSA's program at each ToR: a completed subtree goes up and
// frees its aggregator at once). Exact under 0 and 1 % loss, duplication and
// reordering; no timer or packet left at any rank; no aggregator or PS entry
// left without faults (a late copy may leave one with duplication or
// reordering, as in the simulator). Every task's
// result comes down the tree from the PS through rack 0's ToR and on
// through rack 1's (their tree_results; tasks = 131072 B / 256 B per packet x
// 2 allreduces), and every task is completed at the PS (ATP sends each
// aggregate there); no rank sends to the PS directly.
TEST(PsInaOverRacks, AtpAndDsaExactThroughBothTorsAndNothingLeft) {
  const std::pair<std::string, bool> cases[] = {{"atp", false}, {"atp", true}, {"dsa", false}, {"dsa", true}};
  for (const auto& [scheme, faults] : cases) {
    SCOPED_TRACE(scheme + (faults ? " 1 % faults" : " no faults"));
    Out o;
    const auto j = run_ring({scheme, 4, 2, "", faults}, scheme + (faults ? "_f" : ""), &o);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j["ok"].get<bool>()) << j["problems"] << o.text;
    const auto& job = j["jobs"][0];
    EXPECT_EQ(job["mismatches"], 0);
    EXPECT_EQ(job["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2 * 4);
    ASSERT_EQ(job["workers"].size(), 5u);  // four ranks, then the PS
    uint64_t retransmits = 0;
    for (size_t r = 0; r < 4; ++r) {
      const auto& w = job["workers"][r];
      EXPECT_TRUE(w["done"].get<bool>());
      EXPECT_EQ(w["pending_timers"], 0) << "rank " << r;
      EXPECT_EQ(w["packets_in_use"], 0) << "rank " << r;
      EXPECT_EQ(w["stats"]["transport"]["foreign"], 0);
      EXPECT_EQ(w["stats"]["transport"]["malformed"], 0);
      // The 60 KB window in bytes: 210 datagrams of 36 + 4 x 64 bytes (not
      // the simulator's 196 packets, whatever their size: 1.6 MB of 8 KiB
      // datagrams, which overflowed the emulated cluster's queues).
      EXPECT_EQ(w["initial_window_packets"], 210) << "rank " << r;
      EXPECT_EQ(w["first_hop"], 5 + r / 2) << "rank " << r;  // its rack's ToR: node id N + 1 + rack
      retransmits += w["stats"]["worker"]["retransmits"].get<uint64_t>();
    }
    const auto& ps = job["workers"][4];
    EXPECT_EQ(ps["role"], "ps");
    EXPECT_EQ(ps["leaks"].size(), 0u) << ps["leaks"];
    EXPECT_EQ(ps["data_from_direct_ranks"], 0);
    // A late copy (duplicated or held back) may leave a PS entry or a ToR
    // aggregator after every result is in, as in the simulator; without such
    // faults nothing may stay.
    // Nor without a retransmission (a worker's timeout on a busy machine),
    // whose copy may likewise reach the PS after its result, or a reminder
    // (the PS's timeout there: the gradients it asks for may too).
    if (!faults && ps["resends_in"] == 0 && ps["stats"]["ps"]["timeout_reminders"] == 0 &&
        ps["stats"]["ps"]["worker_reminders"] == 0) {
      EXPECT_EQ(ps["entries"], 0);
      EXPECT_EQ(ps["left_by_late_copies"].size(), 0u);
    }
    EXPECT_EQ(ps["stats"]["ps"]["malformed"], 0);
    EXPECT_EQ(ps["stats"]["ps"]["foreign"], 0);
    const uint64_t tasks = 131072 / 256 * 2;
    ASSERT_EQ(j["switches"].size(), 2u);
    for (const auto& s : j["switches"]) {
      if (!faults) {
        EXPECT_EQ(s["occupied"], 0);
      }
      EXPECT_EQ(s["switch"]["foreign_data"], 0);
      EXPECT_EQ(s["switch"]["foreign_forward"], 0);
      EXPECT_EQ(s["switch"]["malformed"], 0);
    }
    // Every task's result came down from the PS to the root (rack 0's ToR)
    // and on through rack 1's ToR (none bypassed it: its aggregators would
    // stay held), and every task completed at the PS; more than once only for
    // tasks retransmitted on a timeout (a loaded host's loopback: no fault
    // needed), exactly once in a run without any.
    const uint64_t root = j["switches"][0]["switch"]["tree_results"].get<uint64_t>();
    const uint64_t down = j["switches"][1]["switch"]["tree_results"].get<uint64_t>();
    const uint64_t at_ps = ps["stats"]["ps"]["completions"].get<uint64_t>();
    EXPECT_GE(root, tasks);
    EXPECT_GE(down, tasks);
    EXPECT_GE(at_ps, tasks);
    if (retransmits == 0 && ps["stats"]["ps"]["timeout_reminders"] == 0) {
      EXPECT_EQ(root, tasks);
      EXPECT_EQ(down, tasks);
      EXPECT_EQ(at_ps, tasks);
    }
  }
}

// ATP over racks where only some ToRs are INA (Rina's testbed, Fig. 12:
// one INA ToR): `ina run --scheme atp|dsa --racks 2 --ina-racks Q` starts an
// `ina switch` in rack Q only, the root of the tree; the other rack's ranks
// send straight to the PS (their first hop, node id N + 1 + R = 7), whose
// results go to them directly and to the root, addressed to it. Exact with
// the INA rack first or second and under 1 % loss, duplication and
// reordering. Without faults or retransmissions the counts are exact: each
// rank sends one gradient per task (tasks = 131072 B / 256 B per packet x 2
// allreduces), so the PS gets 2 x tasks from the two PS-direct ranks and the
// root ToR 2 x tasks from its own two; every result passes the root once
// (tree_results) and goes to its two ranks (acks_multicast).
TEST(PsInaOverRacks, OneInaRackTheOtherSendsStraightToThePs) {
  struct Case {
    std::string scheme, ina;
    bool faults;
  };
  const Case cases[] = {{"atp", "0", false}, {"atp", "1", false}, {"dsa", "0", false}, {"atp", "0", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.scheme + " --ina-racks " + c.ina + (c.faults ? " 1 % faults" : " no faults"));
    Out o;
    const auto j = run_ring({c.scheme, 4, 2, c.ina, c.faults}, c.scheme + "_one" + c.ina + (c.faults ? "_f" : ""), &o);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j["ok"].get<bool>()) << j["problems"] << o.text;
    const auto& job = j["jobs"][0];
    EXPECT_EQ(job["mismatches"], 0);
    EXPECT_EQ(job["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2 * 4);
    ASSERT_EQ(job["workers"].size(), 5u);
    const unsigned ina_rack = c.ina == "0" ? 0 : 1;
    const uint64_t tasks = 131072 / 256 * 2;
    uint64_t retransmits = 0;
    for (unsigned r = 0; r < 4; ++r) {
      const auto& w = job["workers"][r];
      EXPECT_TRUE(w["done"].get<bool>());
      EXPECT_EQ(w["pending_timers"], 0) << "rank " << r;
      EXPECT_EQ(w["packets_in_use"], 0) << "rank " << r;
      EXPECT_EQ(w["stats"]["transport"]["foreign"], 0) << "rank " << r;
      EXPECT_EQ(w["first_hop"], r / 2 == ina_rack ? 5 + ina_rack : 7) << "rank " << r;  // its INA ToR, else the PS
      retransmits += w["stats"]["worker"]["retransmits"].get<uint64_t>();
    }
    const auto& ps = job["workers"][4];
    EXPECT_EQ(ps["leaks"].size(), 0u) << ps["leaks"];
    EXPECT_EQ(ps["stats"]["ps"]["foreign"], 0);
    ASSERT_EQ(j["switches"].size(), 1u);  // the INA rack's only
    const auto& sw = j["switches"][0]["switch"];
    EXPECT_EQ(sw["foreign_data"], 0);
    EXPECT_EQ(sw["foreign_ack"], 0);
    const uint64_t direct = ps["data_from_direct_ranks"].get<uint64_t>();
    EXPECT_GE(direct, 2 * tasks);
    EXPECT_GE(sw["tree_results"].get<uint64_t>(), tasks);
    if (!c.faults && retransmits == 0 && ps["stats"]["ps"]["timeout_reminders"] == 0) {
      EXPECT_EQ(direct, 2 * tasks);
      EXPECT_EQ(sw["data_in"], 2 * tasks);
      EXPECT_EQ(sw["tree_results"], tasks);
      EXPECT_EQ(sw["acks_multicast"], 2 * tasks);
      EXPECT_EQ(ps["stats"]["ps"]["completions"], tasks);
      EXPECT_EQ(j["switches"][0]["occupied"], 0);
    }
  }
}

// Failures (Rina §IV-C) over UDP: `ina run --fail-rank R --fail-at-op K`
// makes rank R's ring-worker stop for good inside op K (of 3); the others
// detect it by its heartbeat (--fail-detect-ms), the control node (the
// lowest surviving rank) re-plans with host::ring_failover, registers the
// job under epoch 1 at both ToRs and hands the membership to the survivors,
// who restart op 1 and finish every op exactly over the 7 survivors'
// contributions. 2 racks x 4 workers, both ToRs INA.
struct FailRun {
  nlohmann::json j;
  Out out;
};
FailRun run_failure(int fail_rank, const std::string& tag) {
  FailRun f;
  const fs::path json = ring_tmp(tag + ".json");
  f.out = ina({"run", "--scheme", "rina", "--workers", "8", "--racks", "2", "--size", "131072", "--iterations", "3",
               "--payload", "64", "--fail-rank", std::to_string(fail_rank), "--fail-at-op", "1", "--fail-detect-ms", "400",
               "--json", json.string(), "--timeout", "40"});
  std::ifstream in(json);
  f.j = nlohmann::json::parse(in, nullptr, false);
  fs::remove(json);
  return f;
}

// Checks common to both failures; returns the survivors' reports by old rank.
void expect_exact_over_survivors(const FailRun& f, int failed) {
  ASSERT_EQ(f.out.status, 0) << f.out.text;
  ASSERT_TRUE(f.j.is_object()) << f.out.text;
  EXPECT_TRUE(f.j["ok"].get<bool>()) << f.j["problems"] << f.out.text;
  const auto& job = f.j["jobs"][0];
  const auto& fo = job["failover"];
  EXPECT_EQ(fo["failed"], nlohmann::json::array({failed}));
  EXPECT_EQ(fo["epoch"], 1);
  EXPECT_EQ(fo["control_node"], 0);  // the lowest surviving rank
  EXPECT_EQ(fo["restart_op"], 1);    // the failure was inside op 1: nobody could finish it
  EXPECT_EQ(fo["survivors"].size(), 7u);
  // Every survivor wrote and checked ops 1 and 2 against the 7 survivors' sum (and op 0 against all 8's before).
  EXPECT_EQ(job["mismatches"], 0);
  EXPECT_EQ(job["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2 * 7);
  for (int r = 0; r < 8; ++r) {
    const auto& w = job["workers"][r];
    SCOPED_TRACE("rank " + std::to_string(r));
    if (r == failed) {
      EXPECT_TRUE(w["crashed"].get<bool>());
      EXPECT_EQ(w["crashed_in_op"], 1);
      continue;
    }
    EXPECT_TRUE(w["done"].get<bool>());
    EXPECT_EQ(w["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2);
    EXPECT_GE(w["failover"]["verified_before_restart"].get<uint64_t>(), uint64_t{131072 / 4});
    EXPECT_EQ(w["pending_timers"], 0);
    EXPECT_EQ(w["packets_in_use"], 0);
    EXPECT_EQ(w["stats"]["transport"]["foreign"], 0);
    EXPECT_EQ(w["stats"]["transport"]["malformed"], 0);
  }
  ASSERT_EQ(f.j["switches"].size(), 2u);
  for (const auto& s : f.j["switches"]) {
    EXPECT_EQ(s["occupied"], 0);  // nothing left of either epoch
    EXPECT_EQ(s["layout"]["epoch"], 1);
    EXPECT_EQ(s["switch"]["foreign_data"], 0);
    EXPECT_EQ(s["switch"]["collisions"], 0);
  }
}

// Steps per allreduce at a survivor (by old rank), before and after the failure.
std::pair<int, int> steps_of(const FailRun& f, int r) {
  const auto& w = f.j["jobs"][0]["workers"][r];
  return {w["failover"]["steps_per_allreduce_epoch0"].get<int>(), w["steps_per_allreduce"].get<int>()};
}

// The agent of rack 1 fails: rack 1's members fall back to RAR (autonomous
// workers), its ToR keeps the job with no rack and aggregates nothing more;
// rack 0 still aggregates at its ToR. The ring had G = 2 groups (Rina:
// 2G - 1 = 3 steps per op at an INA rack); now G = 4 (rack 0 and three
// autonomous workers): 2G - 1 = 7 at rack 0's ranks, RAR's 2(G - 1) = 6 at
// an autonomous worker.
TEST(RingFailoverOverUdp, AgentOfRack1FailsItsRackFallsBackToRar) {
  const FailRun f = run_failure(4, "fail_agent");
  expect_exact_over_survivors(f, 4);
  if (HasFatalFailure()) return;
  for (int r : {0, 1, 2, 3}) EXPECT_EQ(steps_of(f, r), std::make_pair(3, 7)) << "rank " << r;
  for (int r : {5, 6, 7}) EXPECT_EQ(steps_of(f, r), std::make_pair(3, 6)) << "rank " << r;
  const auto& s0 = f.j["switches"][0];
  const auto& s1 = f.j["switches"][1];
  EXPECT_EQ(s0["layout"]["rack_ranks"], nlohmann::json::array({0, 1, 2, 3}));
  EXPECT_EQ(s1["layout"]["rack_ranks"], nlohmann::json::array());
  // Rack 1's ToR completed no sum after epoch 1; rack 0's did (ops 1 and 2 again).
  EXPECT_EQ(s1["switch"]["completed"], s1["layout"]["completed_at_epoch"]);
  EXPECT_GT(s0["switch"]["completed"].get<uint64_t>(), s0["layout"]["completed_at_epoch"].get<uint64_t>());
}

// A member of rack 0 fails: its agent's rack drops it (ranks 0, 1, 3 are
// the new 0, 1, 2) and still aggregates at its ToR; rack 1 is unchanged
// (new ranks 3..6). Still G = 2 groups: 3 steps per op everywhere.
TEST(RingFailoverOverUdp, MemberOfRack0FailsItsAgentExcludesIt) {
  const FailRun f = run_failure(2, "fail_member");
  expect_exact_over_survivors(f, 2);
  if (HasFatalFailure()) return;
  for (int r : {0, 1, 3, 4, 5, 6, 7}) EXPECT_EQ(steps_of(f, r), std::make_pair(3, 3)) << "rank " << r;
  const auto& s0 = f.j["switches"][0];
  const auto& s1 = f.j["switches"][1];
  EXPECT_EQ(s0["layout"]["rack_ranks"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(s1["layout"]["rack_ranks"], nlohmann::json::array({3, 4, 5, 6}));
  for (const auto* s : {&s0, &s1})
    EXPECT_GT((*s)["switch"]["completed"].get<uint64_t>(), (*s)["layout"]["completed_at_epoch"].get<uint64_t>());
}

// `ina` refused its input (exit 2) and said `what`.
void expect_refused(const Out& o, const std::string& what) {
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(what), std::string::npos) << o.text;
}

TEST(RingFailoverOverUdp, BadFailureOptionsNameTheOptionAndValue) {
  const Out a = ina({"run", "--scheme", "rina", "--workers", "8", "--racks", "2", "--iterations", "3", "--fail-rank", "8",
                     "--fail-at-op", "1"});
  expect_refused(a, "--fail-rank 8: the job has ranks 0..7");
  const Out b = ina({"run", "--scheme", "h-ar", "--workers", "8", "--racks", "2", "--iterations", "3", "--fail-rank", "1",
                     "--fail-at-op", "1"});
  expect_refused(b, "--fail-rank 1: --scheme h-ar does not survive a failure");
  const Out c = ina({"run", "--scheme", "rar", "--workers", "4", "--iterations", "3", "--fail-rank", "1", "--fail-at-op", "3"});
  expect_refused(c, "--fail-at-op 3: the job runs ops 0..2");
  const Out d = ina({"run", "--scheme", "dsa", "--workers", "4", "--fail-rank", "1", "--fail-at-op", "0"});
  expect_refused(d, "--fail-rank 1: --scheme dsa");
}

// Standalone `ina ring-worker`: a detection time too short to ever detect
// (heartbeats are looked at every 10 ms) and a failure option on a ring
// that cannot lose a rank are refused naming the option and value; a
// barrier directory holding any file of another run's end or failover is
// refused naming the file (a new run would apply an old membership).
TEST(RingFailoverOverUdp, StandaloneWorkerRefusesShortDetectionAndStaleBarrierFiles) {
  const fs::path layout = ring_tmp("stale_layout.json"), bar = ring_tmp("stale_bar");
  fs::remove_all(bar);
  fs::create_directories(bar);
  std::ofstream(layout) << R"({"job": 1, "scheme": "rar", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], "racks": [{"ranks": [0, 1, 2]}]})";
  const std::vector<std::string> base{"ring-worker", "--layout", layout.string(), "--rank", "1", "--size", "64",
                                      "--iterations", "2", "--barrier", bar.string(), "--timeout", "2"};
  auto with = [&](std::vector<std::string> more) {
    auto a = base;
    a.insert(a.end(), more.begin(), more.end());
    return ina(a, 20);
  };
  const Out a = with({"--fail-detect-ms", "20"});
  expect_refused(a, "--fail-detect-ms 20: must be 0 (off) or in [50, 1e6] ms");
  const Out b = ina({"run", "--scheme", "rar", "--workers", "4", "--iterations", "3", "--fail-rank", "1", "--fail-at-op", "1",
                     "--fail-detect-ms", "20"});
  expect_refused(b, "--fail-detect-ms 20: must be in [50, 1e6] ms");
  std::ofstream(layout) << R"({"job": 1, "scheme": "rar", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0, 1]}]})";
  const Out c = with({"--fail-detect-ms", "400"});
  expect_refused(c, "--fail-detect-ms 400: a ring of 2 ranks cannot lose one");
  // An INA ToR: the control node would reconfigure it with the job's key
  // after a failure, so a rank without one is refused at start.
  std::ofstream(layout) << R"({"job": 1, "scheme": "rina", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], "racks": [{"ranks": [0, 1, 2], "ina": true, "switch": "127.0.0.1:4"}]})";
  std::string line = "env -u INA_SWITCH_KEY -u INA_JOB_KEY " + std::string(INA_BINARY);  // (the tests set a switch key)
  for (const auto& arg : base) line += " '" + arg + "'";
  const auto e = ina_test::run_command(line + " --fail-detect-ms 400");
  expect_refused({e.status, e.output}, "job 1: no credential: set INA_JOB_KEY");
  for (const std::string f : {"done.0.epoch1", "done.2", "alive.0", "state.1.2", "membership.1.json", "alive.0.tmp.0"}) {
    std::ofstream(bar / f) << "1";
    const Out d = with({});
    expect_refused(d, fmt::format("--barrier {}: already holds {} from another run", bar.string(), f));
    fs::remove(bar / f);
  }
  fs::remove(layout);
  fs::remove_all(bar);
}

// Two control nodes publishing membership.E.json: the first wins, the
// second learns it lost and the file keeps the winner's text; neither
// leaves a temporary file.
TEST(RingFailoverOverUdp, MembershipIsPublishedOnceFirstWriterWins) {
  const fs::path dir = ring_tmp("publish");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "membership.1.json").string();
  EXPECT_TRUE(ina::rt::publish_once(file, 0, "rank 0's"));
  EXPECT_FALSE(ina::rt::publish_once(file, 1, "rank 1's"));
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "rank 0's");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"membership.1.json"});
  EXPECT_THROW(ina::rt::publish_once((dir / "no" / "such.json").string(), 2, "x"), ina::rt::RuntimeError);
  fs::remove_all(dir);
}

// The ToR's side of a failover: `reconfigure` on the switch's control port
// takes a static ring job's new membership only with the job's credential
// (a proof over the connection's nonce and every field), only for its own
// job, for a later epoch (the same epoch again only with the same job: a
// retry succeeds, a different definition is refused by field) and for
// workers of its layout; the proof is checked first (a caller without the
// key learns nothing), and a job the program refuses leaves the live one as
// it was. Then the program holds the job under the new epoch with the given
// rack (`layout.rack_ranks`; `layout.rack` stays the --rack option).
TEST(RingFailoverOverUdp, SwitchTakesANewEpochOnlyWithTheJobsCredential) {
  const fs::path layout = ring_tmp("reconf_layout.json");
  std::ofstream(layout) << R"({"job": 3, "scheme": "rina", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5", "127.0.0.1:6"],
    "racks": [{"ranks": [0, 1, 2], "ina": true, "switch": "127.0.0.1:7"}, {"ranks": [3, 4, 5], "ina": true, "switch": "127.0.0.1:8"}]})";
  ina::rt::SwitchDaemonConfig c = ina::test::switch_config("rina");
  c.layout = layout.string();
  c.rack = 0;
  ina::rt::SwitchDaemon d(c);
  std::thread t([&] { d.run(); });
  const ina::Time timeout = 2 * ina::kSec;
  const ina::rt::Key right = ina::rt::job_key(c.key, 3), other = ina::rt::job_key(c.key, 4);
  ina::rt::ReconfigureRequest r;
  r.job = 3;
  r.epoch = 1;
  r.workers = {1, 2, 4, 5, 6};  // rank 2 (node 3) failed
  r.rack = {0, 1};
  r.upstream = {2, 3, 4};
  auto refused = [&](const ina::rt::Key& k, const ina::rt::ReconfigureRequest& q) -> std::string {
    try {
      ina::rt::reconfigure_switch(d.endpoint(), timeout, k, q);
    } catch (const ina::rt::RuntimeError& e) {
      return e.what();
    }
    return "";
  };
  // Without the job's key a caller learns nothing: not even which job the switch serves.
  for (const auto& [key, job] : {std::pair{other, uint16_t{3}}, std::pair{right, uint16_t{4}}}) {
    auto q = r;
    q.job = job;
    const std::string e = refused(key, q);
    // The switch's whole answer (after the client's "refused job J's epoch 1: ").
    const std::string tail = fmt::format("refused job {}'s epoch 1: reconfigure: authentication failed", job);
    EXPECT_TRUE(e.size() >= tail.size() && e.compare(e.size() - tail.size(), tail.size(), tail) == 0) << e;
  }
  auto wrong_job = r;
  wrong_job.job = 4;  // with job 4's own key
  EXPECT_NE(refused(other, wrong_job).find("field 'job' = 4: this switch serves job 3"), std::string::npos);
  auto stranger = r;
  stranger.workers = {1, 2, 99};
  EXPECT_NE(refused(right, stranger).find("node 99 is not a distinct worker"), std::string::npos);
  auto beyond = r;
  beyond.rack = {0, 5};
  EXPECT_NE(refused(right, beyond).find("field 'rack': rank 5 is beyond the 5 workers"), std::string::npos);
  // A job definition the program refuses (rack not ascending) leaves the live job as it was.
  auto descending = r;
  descending.rack = {1, 0};
  EXPECT_NE(refused(right, descending).find("field 'rack' = [1, 0], 'upstream' = [2, 3, 4]: switch: job 3 rack ranks must ascend"),
            std::string::npos) << refused(right, descending);
  const auto before = ina::rt::query_switch_stats(d.endpoint(), timeout, &c.key, 0);
  EXPECT_EQ(before["layout"]["epoch"], 0);
  EXPECT_EQ(before["layout"]["rack"], 0);  // the --rack option, as given
  EXPECT_EQ(before["layout"]["rack_ranks"], nlohmann::json::array({0, 1, 2}));
  const auto ok = ina::rt::reconfigure_switch(d.endpoint(), timeout, right, r);
  EXPECT_EQ(ok["aggregates"], true);
  // Asked again for the same epoch (a retry, or the next control node's):
  // the same definition succeeds; a different one is refused by field.
  const auto again = ina::rt::reconfigure_switch(d.endpoint(), timeout, right, r);
  EXPECT_EQ(again["epoch"], 1);
  EXPECT_EQ(again["aggregates"], true);
  for (const std::string field : {"workers", "rack"}) {
    auto other_def = r;
    if (field == "workers") other_def.workers = {1, 2, 4, 5, 3};
    else other_def.rack = {0, 1, 2};
    EXPECT_NE(refused(right, other_def).find(fmt::format("field '{}' differs from epoch 1's registration of job 3", field)),
              std::string::npos) << refused(right, other_def);
  }
  auto upstream_def = r;
  upstream_def.upstream = {2, 3};
  EXPECT_NE(refused(right, upstream_def).find("field 'upstream' differs from epoch 1's registration"), std::string::npos);
  const auto st = ina::rt::query_switch_stats(d.endpoint(), timeout, &c.key, 0);
  EXPECT_EQ(st["layout"]["epoch"], 1);
  EXPECT_EQ(st["layout"]["rack"], 0);
  EXPECT_EQ(st["layout"]["rack_ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(st["control"]["auth_failures"], 2);
  d.request_stop();
  t.join();
  fs::remove(layout);
}

TEST(RingOverUdpInput, BadLayoutOptionsNameTheOptionAndValue) {
  const Out a = ina({"run", "--scheme", "rina", "--workers", "8", "--racks", "3"}, 20);
  EXPECT_EQ(a.status, 2) << a.text;
  EXPECT_NE(a.text.find("--racks 3"), std::string::npos) << a.text;
  const Out b = ina({"run", "--scheme", "rina", "--workers", "8", "--racks", "2", "--ina-racks", "0,2"}, 20);
  EXPECT_EQ(b.status, 2) << b.text;
  EXPECT_NE(b.text.find("--ina-racks names rack 2"), std::string::npos) << b.text;
  const Out c = ina({"run", "--scheme", "rina", "--workers", "4", "--racks", "2", "--ina-racks", "x"}, 20);
  EXPECT_EQ(c.status, 2) << c.text;
  EXPECT_NE(c.text.find("'x'"), std::string::npos) << c.text;
  const Out d = ina({"run", "--scheme", "rar", "--workers", "4", "--ina-racks", "0"}, 20);
  EXPECT_EQ(d.status, 2) << d.text;
  EXPECT_NE(d.text.find("--ina-racks 0"), std::string::npos) << d.text;
  const Out e = ina({"run", "--scheme", "switchml", "--workers", "4", "--racks", "2"}, 20);  // no PS tree, no ring
  EXPECT_EQ(e.status, 2) << e.text;
  EXPECT_NE(e.text.find("--racks"), std::string::npos) << e.text;
  // ATP over racks takes --ina-racks (PsInaOverRacks.OneInaRack...), but needs a root.
  const Out e2 = ina({"run", "--scheme", "atp", "--workers", "4", "--racks", "2", "--ina-racks", "none"}, 20);
  EXPECT_EQ(e2.status, 2) << e2.text;
  EXPECT_NE(e2.text.find("--ina-racks none"), std::string::npos) << e2.text;
  EXPECT_NE(e2.text.find("at least one INA rack"), std::string::npos) << e2.text;
  const Out g = ina({"ring-worker", "--layout", "l.json", "--rank", "0", "--size", "64", "--barrier", "b", "--nic-gbps", "-1"}, 20);
  EXPECT_NE(g.status, 0) << g.text;
  EXPECT_NE(g.text.find("--nic-gbps"), std::string::npos) << g.text;
  EXPECT_NE(g.text.find("-1"), std::string::npos) << g.text;
  const Out f = ina({"switch", "--scheme", "rar", "--new-key-file", ring_tmp("k").string(), "--listen", "127.0.0.1:0"}, 20);
  fs::remove(ring_tmp("k"));
  EXPECT_EQ(f.status, 2) << f.text;
  EXPECT_NE(f.text.find("no switch program"), std::string::npos) << f.text;
  // GRID runs only from a plan's layout (scripts/grid-netns); its capacity is GRID's alone.
  const Out h = ina({"switch", "--scheme", "grid", "--new-key-file", ring_tmp("k").string(), "--listen", "127.0.0.1:0"}, 20);
  fs::remove(ring_tmp("k"));
  EXPECT_EQ(h.status, 2) << h.text;
  EXPECT_NE(h.text.find("scheme grid serves one job of a static layout only: give --layout FILE --rack R"),
            std::string::npos) << h.text;
  const Out i = ina({"switch", "--scheme", "atp", "--capacity-mbit", "10", "--new-key-file", ring_tmp("k").string(),
                     "--listen", "127.0.0.1:0"}, 20);
  fs::remove(ring_tmp("k"));
  EXPECT_EQ(i.status, 2) << i.text;
  EXPECT_NE(i.text.find("--capacity-mbit 10: scheme atp has no processing capacity"), std::string::npos) << i.text;
  const Out j = ina({"run", "--scheme", "grid", "--workers", "4"}, 20);
  EXPECT_NE(j.status, 0) << j.text;
  EXPECT_NE(j.text.find("scheme 'grid' is not supported by the runtime"), std::string::npos) << j.text;
}

TEST(RingOverUdpInput, BadLayoutFileNamesFileFieldAndValue) {
  const fs::path layout = ring_tmp("layout.json"), bar = ring_tmp("bar");
  fs::create_directories(bar);
  std::ofstream(layout) << R"({"job": 1, "scheme": "rina", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"],
    "racks": [{"ranks": [0, 1], "ina": true, "switch": "127.0.0.1:9"}, {"ranks": [1, 2], "ina": false}]})";
  const Out a = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(a.status, 2) << a.text;
  EXPECT_NE(a.text.find(layout.string()), std::string::npos) << a.text;
  EXPECT_NE(a.text.find("racks[1].ranks"), std::string::npos) << a.text;
  EXPECT_NE(a.text.find("rank 1 is already in racks[0]"), std::string::npos) << a.text;
  std::ofstream(layout) << R"({"job": 1, "scheme": "rina", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0, 1], "ina": true}]})";
  const Out b = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(b.status, 2) << b.text;
  EXPECT_NE(b.text.find("racks[0].switch"), std::string::npos) << b.text;
  // ATP over racks needs its PS's address; a ring layout has no PS to run.
  std::ofstream(layout) << R"({"job": 1, "scheme": "atp", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0], "switch": "127.0.0.1:9"},
    {"ranks": [1], "switch": "127.0.0.1:8"}]})";
  const Out c = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(c.status, 2) << c.text;
  EXPECT_NE(c.text.find(layout.string()), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("field 'ps'"), std::string::npos) << c.text;
  // ... at every ToR, and at an address of its own.
  std::ofstream(layout) << R"({"job": 1, "scheme": "atp", "payload": 64, "memory_bytes": 100000, "ps": "127.0.0.1:2",
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0], "switch": "127.0.0.1:9"},
    {"ranks": [1], "switch": "127.0.0.1:8"}]})";
  const Out c2 = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(c2.status, 2) << c2.text;
  EXPECT_NE(c2.text.find("the same address as workers[1]"), std::string::npos) << c2.text;
  // A tree needs a root: at least one INA rack (a rack without "ina" is one).
  std::ofstream(layout) << R"({"job": 1, "scheme": "atp", "payload": 64, "memory_bytes": 100000, "ps": "127.0.0.1:3",
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0], "ina": false},
    {"ranks": [1], "ina": false, "switch": "127.0.0.1:8"}]})";
  const Out c3 = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(c3.status, 2) << c3.text;
  EXPECT_NE(c3.text.find(layout.string()), std::string::npos) << c3.text;
  EXPECT_NE(c3.text.find("field 'racks' = [{\"ina\":false,\"ranks\":[0]}"), std::string::npos) << c3.text;
  EXPECT_NE(c3.text.find("at least one INA rack"), std::string::npos) << c3.text;
  // A rack that is INA needs its switch's address; one without INA does not.
  std::ofstream(layout) << R"({"job": 1, "scheme": "atp", "payload": 64, "memory_bytes": 100000, "ps": "127.0.0.1:3",
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0], "ina": false}, {"ranks": [1]}]})";
  const Out c4 = ina({"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(c4.status, 2) << c4.text;
  EXPECT_NE(c4.text.find("racks[1].switch"), std::string::npos) << c4.text;
  EXPECT_EQ(c4.text.find("racks[0].switch"), std::string::npos) << c4.text;
  std::ofstream(layout) << R"({"job": 1, "scheme": "rar", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0, 1]}]})";
  const Out d = ina({"ring-worker", "--layout", layout.string(), "--ps", "--size", "64", "--barrier", bar.string()}, 20);
  EXPECT_EQ(d.status, 2) << d.text;
  EXPECT_NE(d.text.find("--ps"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("no PS"), std::string::npos) << d.text;
  fs::remove(layout);
  fs::remove_all(bar);
}

}  // namespace
