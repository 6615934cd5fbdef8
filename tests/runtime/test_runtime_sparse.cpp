// Sparse allreduce over the UDP runtime on loopback: Zebra (hot
// keys in the switch, cold keys at the PS), PS-lite-style push and SwitchML
// streaming the whole model, through ina::Communicator::allreduce_sparse.
// The reference sums are computed here per key from the inputs (std::map),
// never by the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/rng.hpp"
#include "runtime/control.hpp"
#include "runtime_fixture.hpp"

using namespace ina;
using namespace ina::rt;
using ina::test::comm_config;
using ina::test::LocalPs;
using ina::test::LocalSwitch;
using ina::test::run_workers;
using ina::test::switch_config;

namespace {

// One worker's pairs of one op: keys from a heavy-tailed distribution over
// [0, space) (low keys are hot), strictly ascending, values small integers.
struct Push {
  std::vector<uint64_t> keys;
  std::vector<int32_t> ints;
  std::vector<float> floats;  // ints / 8: dyadic, so every float sum is exact
};

Push draw(uint64_t seed, uint64_t space, size_t n) {
  Rng rng(seed);
  std::set<uint64_t> ks;
  while (ks.size() < n) {
    const double u = rng.uniform();
    ks.insert(static_cast<uint64_t>(static_cast<double>(space) * u * u * u));  // density ~ k^(-2/3)
  }
  Push p;
  p.keys.assign(ks.begin(), ks.end());
  for (size_t i = 0; i < p.keys.size(); ++i) {
    const auto v = static_cast<int32_t>(rng.below(2001)) - 1000;
    p.ints.push_back(v);
    p.floats.push_back(static_cast<float>(v) / 8);
  }
  return p;
}

std::map<uint64_t, int64_t> reference(const std::vector<Push>& ws) {
  std::map<uint64_t, int64_t> sum;
  for (const auto& w : ws)
    for (size_t i = 0; i < w.keys.size(); ++i) sum[w.keys[i]] += w.ints[i];
  return sum;
}

// The keys' scheme-independent expectations: the union, ascending, and the exact sums.
template <typename T>
void expect_exact(const SparseResult<T>& got, const std::map<uint64_t, int64_t>& ref, double unit,
                  const std::string& what) {
  ASSERT_EQ(got.keys.size(), ref.size()) << what;
  size_t i = 0, wrong = 0;
  for (const auto& [k, v] : ref) {
    if (got.keys[i] != k) {
      ADD_FAILURE() << what << ": keys[" << i << "] = " << got.keys[i] << ", expected " << k;
      return;
    }
    wrong += static_cast<double>(got.values[i]) != static_cast<double>(v) * unit;
    ++i;
  }
  EXPECT_EQ(wrong, 0u) << what;
}

SwitchDaemonConfig sparse_switch(const std::string& scheme, FaultConfig f = {}) {
  SwitchDaemonConfig c = switch_config(scheme);
  c.faults = f;
  c.faults.seed = 5;
  c.kv_registers = 4;  // few registers: Zebra's packets recirculate, as on a real layout
  return c;
}

}  // namespace

class SparseSchemes : public ::testing::TestWithParam<std::tuple<std::string, double>> {};

// Catches: a pair lost or counted twice under loss, duplication and
// reordering (in either direction, at the switch, the PS or a worker); a
// key missing from the union; a cold key aggregated in the switch or a hot
// one at the PS twice; a hot-set change mid-run that drops or double-counts
// the pairs of the iteration it takes effect in; results that differ
// between workers; anything left held at the end; the switch's results not
// all taken once by the PS (the paper's route), or reaching it under the
// multicast variant ("zebra-multicast": ina switch --hot-results multicast).
TEST_P(SparseSchemes, ExactPerKeyUnderFaultsAndAHotSetChange) {
  const auto [param, loss] = GetParam();
  const bool multicast = param == "zebra-multicast";
  const std::string scheme = multicast ? "zebra" : param;
  const FaultConfig faults = ina::test::lossy(loss);
  SwitchDaemonConfig swc = sparse_switch(scheme, faults);
  if (multicast) swc.program.zebra.hot_results = kv::HotRoute::Multicast;
  LocalSwitch sw(swc);
  const unsigned n = 4;
  const uint64_t space = 50000;
  const bool dense = scheme == "switchml";
  std::unique_ptr<LocalPs> ps;
  if (!dense) ps = std::make_unique<LocalPs>(sw.d.endpoint(), 3, n, faults);
  // Ops 0..5: int, float, int, float, int, float; the hot set changes before op 3.
  const unsigned ops = 6;
  std::vector<std::vector<Push>> in(ops);
  for (unsigned o = 0; o < ops; ++o)
    for (unsigned r = 0; r < n; ++r) in[o].push_back(draw(100 * o + r, space, 300 + 150 * r));
  std::vector<uint64_t> hot1, hot2;
  for (uint64_t k = 0; k < 2000; ++k) hot1.push_back(k);         // the hottest keys, by rank
  // another set: old hot keys go cold; 3000 keys, more than one hot_set
  // message (kHotSetChunk) from each worker, and from the switch to the PS
  for (uint64_t k = 0; k < 3000; ++k) hot2.push_back(3000 + k);
  std::vector<std::vector<SparseResult<int32_t>>> ints(n);
  std::vector<std::vector<SparseResult<float>>> floats(n);
  std::vector<uint32_t> versions(n * 2);
  std::vector<nlohmann::json> stats(n);
  auto errors = run_workers(n, [&](unsigned r) {
    CommConfig c = comm_config(sw.addr(), 3, r, n);
    c.faults = faults;
    c.faults.seed = 31 + r;
    c.min_rto = 2 * kMs;
    Communicator comm(c);
    EXPECT_EQ(comm.sparse_native(), !dense);
    SparseOptions so;
    so.key_space = space;
    versions[2 * r] = comm.set_hot_keys(hot1);
    for (unsigned o = 0; o < ops; ++o) {
      if (o == 3) versions[2 * r + 1] = comm.set_hot_keys(hot2);
      const Push& p = in[o][r];
      if (o % 2 == 0) ints[r].push_back(comm.allreduce_sparse(p.keys, std::span<const int32_t>(p.ints), so));
      else floats[r].push_back(comm.allreduce_sparse(p.keys, std::span<const float>(p.floats), so));
    }
    stats[r] = comm.stats();
    comm.close();
  });
  for (unsigned r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (unsigned r = 0; r < n; ++r) {
    for (unsigned o = 0; o < ops; ++o) {
      const auto ref = reference(in[o]);
      const std::string what = scheme + " rank " + std::to_string(r) + " op " + std::to_string(o);
      if (o % 2 == 0) expect_exact(ints[r][o / 2], ref, 1.0, what);
      else expect_exact(floats[r][o / 2], ref, 1.0 / 8, what);
    }
    EXPECT_EQ(versions[2 * r], scheme == "zebra" ? 1u : 0u);
    EXPECT_EQ(versions[2 * r + 1], scheme == "zebra" ? 2u : 0u);
  }
  uint64_t hot_total = 0;
  if (!dense) {
    // Hot pairs as the tables say: op o's keys in hot1 (ops 0-2) or hot2 (ops 3-5); float ops
    // add a scale round whose keys (exponent lanes 0..278) are in hot1 but not hot2.
    for (unsigned r = 0; r < n; ++r) {
      uint64_t hot = 0;
      for (unsigned o = 0; o < ops; ++o)
        for (uint64_t k : in[o][r].keys) hot += o < 3 ? k < 2000 : (k >= 3000 && k < 6000);
      hot += 1;  // op 1's scale round: one lane (the exponent of the largest |x|), hot in hot1
      const auto& s = stats[r]["transport"];
      EXPECT_EQ(s["hot_pairs"].get<uint64_t>(), scheme == "zebra" ? hot : 0) << "rank " << r;
      hot_total += hot;
      EXPECT_EQ(s["malformed"], 0) << "rank " << r;
      EXPECT_EQ(s["foreign"], 0) << "rank " << r;
    }
  }
  if (ps) {
    ps->wait();
    EXPECT_EQ(ps->error, "");
    EXPECT_EQ(ps->stats["ps"]["malformed"], 0);
    EXPECT_EQ(ps->stats["ps"]["foreign"], 0);
    // (Result copies may still be held: the job ends once every worker has its
    // results, even if an ack of one was lost; the PS frees them as it exits.)
  }
  const auto st = query_switch_stats(sw.d.endpoint(), 2 * kSec, &ina::test::test_switch_key(), 0);
  EXPECT_EQ(st["packets_in_use"], 0);
  EXPECT_EQ(st["occupied"], 0);
  EXPECT_EQ(st["switch"]["malformed"], 0);
  EXPECT_EQ(st["jobs"]["finished"], 1);
  if (scheme == "zebra") {
    // The switch summed exactly the hot pairs (each once, whatever was
    // duplicated or resent) and passed none on: its table and the workers' agree.
    EXPECT_EQ(st["switch"]["kv_aggregated"].get<uint64_t>(), hot_total);
    EXPECT_EQ(st["switch"]["kv_to_ps"], 0);
    EXPECT_EQ(st["cpu"]["held"], 0);
    EXPECT_EQ(st["cpu"]["malformed"], 0);
    EXPECT_EQ(ps->stats["ps"]["hot_results"].get<uint64_t>(), multicast ? 0u : st["switch"]["kv_results"].get<uint64_t>());
  }
}

INSTANTIATE_TEST_SUITE_P(Runtime, SparseSchemes,
                         ::testing::Combine(::testing::Values("zebra", "zebra-multicast", "ps-lite", "switchml"),
                                            ::testing::Values(0.0, 0.01)),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param);
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s + (std::get<1>(info.param) > 0 ? "_lossy" : "_clean");
                         });

// The streams to and from the PS as the switch announces them: 118-pair
// segments with an acknowledgement per two (the default), or the hot
// stream's 9-pair packets with one each; both exact. Catches: a member that
// ignores the announced settings (the PS then acknowledges each of a
// ps-lite worker's packets), and a switch that accepts more pairs than a
// 1500-byte IP packet holds.
TEST(RuntimeSparse, PsStreamSettingsAreAnnouncedAndChecked) {
  for (const auto& [pairs, every] : {std::pair<uint16_t, uint16_t>{118, 2}, {0, 1}}) {
    SCOPED_TRACE(testing::Message() << "kv_ps_pairs " << pairs << ", kv_ack_every " << every);
    auto cfg = sparse_switch("ps-lite");
    cfg.kv_ps_pairs = pairs;
    cfg.kv_ack_every = every;
    LocalSwitch sw(cfg);
    const unsigned n = 2;
    LocalPs ps(sw.d.endpoint(), 5, n);
    std::vector<Push> in;
    for (unsigned r = 0; r < n; ++r) in.push_back(draw(700 + r, 50000, 2000));
    std::vector<SparseResult<int32_t>> got(n);
    auto errors = run_workers(n, [&](unsigned r) {
      Communicator comm(comm_config(sw.addr(), 5, r, n));
      got[r] = comm.allreduce_sparse(in[r].keys, std::span<const int32_t>(in[r].ints), SparseOptions{});
      comm.close();
    });
    for (unsigned r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    for (unsigned r = 0; r < n; ++r) expect_exact(got[r], reference(in), 1.0, "rank " + std::to_string(r));
    ps.wait();
    ASSERT_EQ(ps.error, "");
    // 2000 pairs a worker: 17 segments of 118 (or 223 packets of 9) and the closing one.
    const uint64_t data = ps.stats["ps"]["data"].get<uint64_t>();
    EXPECT_EQ(data, pairs == 118 ? 2 * (17 + 1) : 2 * (223 + 1));
    const uint64_t acks = ps.stats["ps"]["acks_sent"].get<uint64_t>();
    if (every == 1) EXPECT_EQ(acks, data);
    else EXPECT_LT(acks, data);  // one per two in order (more after a loss or a held one's timer)
  }
  auto bad = sparse_switch("ps-lite");
  bad.kv_ps_pairs = 119;
  try {
    LocalSwitch sw(bad);
    ADD_FAILURE() << "a switch with kv_ps_pairs 119 started";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_ps_pairs 119"), std::string::npos) << e.what();
  }
}

// Catches: a switch that installs one worker's list when the lists differ
// (the workers' and the switch's tables would then disagree), a refusal
// that reaches only some workers (the others would hang), and a refusal
// that breaks the job (the next ops must still be exact, on the old table).
TEST(RuntimeSparse, DifferingHotSetsAreRefusedOnEveryWorkerAndTheJobGoesOn) {
  LocalSwitch sw(sparse_switch("zebra"));
  const unsigned n = 3;
  LocalPs ps(sw.d.endpoint(), 4, n);
  std::vector<Push> in;
  for (unsigned r = 0; r < n; ++r) in.push_back(draw(7 + r, 5000, 200));
  std::vector<std::string> refusals(n);
  std::vector<SparseResult<int32_t>> got(n);
  std::vector<nlohmann::json> stats(n);
  auto errors = run_workers(n, [&](unsigned r) {
    Communicator comm(comm_config(sw.addr(), 4, r, n));
    std::vector<uint64_t> first;
    for (uint64_t k = 0; k < 100; ++k) first.push_back(k);
    EXPECT_EQ(comm.set_hot_keys(first), 1u);
    std::vector<uint64_t> second;
    for (uint64_t k = 0; k < 100; ++k) second.push_back(k + (r == 1 ? 1 : 0));  // rank 1 differs
    try {
      comm.set_hot_keys(second);
    } catch (const RuntimeError& e) {
      refusals[r] = e.what();
    }
    got[r] = comm.allreduce_sparse(in[r].keys, std::span<const int32_t>(in[r].ints));
    stats[r] = comm.stats();
    comm.close();
  });
  for (unsigned r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_NE(refusals[r].find("the hot-set lists differ: worker rank 1 sent 100 keys"), std::string::npos)
        << "rank " << r << ": " << refusals[r];
    expect_exact(got[r], reference(in), 1.0, "rank " + std::to_string(r));
    uint64_t hot = 0;  // the first table (keys 0..99) still applies
    for (uint64_t k : in[r].keys) hot += k < 100;
    EXPECT_EQ(stats[r]["transport"]["hot_pairs"].get<uint64_t>(), hot) << "rank " << r;
  }
  ps.wait();
  EXPECT_EQ(ps.error, "");
  const auto st = query_switch_stats(sw.d.endpoint(), 2 * kSec, &ina::test::test_switch_key(), 0);
  EXPECT_EQ(st["switch"]["kv_to_ps"], 0);
}

// Catches: unsorted or duplicate keys, the reserved key, a size mismatch or
// a duplicate hot key reaching the wire (they must fail before, naming the
// index, and leave the communicator usable); a dense scheme without
// key_space; dense allreduce on a <key, value> scheme (keys 0..n-1) that is
// not exact or not written back.
TEST(RuntimeSparse, BadInputIsNamedAndDenseOpsRunOnKeyValueSchemes) {
  LocalSwitch sw(sparse_switch("zebra"));
  LocalSwitch ml(sparse_switch("switchml"));
  const unsigned n = 2;
  LocalPs ps(sw.d.endpoint(), 5, n);
  std::vector<std::vector<std::string>> errs(n);
  std::vector<std::vector<float>> dense(n);
  std::vector<std::vector<int32_t>> idense(n);
  auto errors = run_workers(n, [&](unsigned r) {
    Communicator comm(comm_config(sw.addr(), 5, r, n));
    Communicator cml(comm_config(ml.addr(), 6, r, n));
    auto expect_error = [&](auto&& f) {
      try {
        f();
        errs[r].push_back("no error");
      } catch (const RuntimeError& e) {
        errs[r].push_back(e.what());
      }
    };
    const std::vector<uint64_t> unsorted = {1, 5, 5, 9};
    const std::vector<int32_t> v4 = {1, 2, 3, 4};
    expect_error([&] { comm.allreduce_sparse(unsorted, std::span<const int32_t>(v4)); });
    const std::vector<uint64_t> reserved = {1, UINT64_MAX};
    expect_error([&] { comm.allreduce_sparse(reserved, std::span<const int32_t>(v4).first(2)); });
    expect_error([&] { comm.allreduce_sparse(reserved, std::span<const int32_t>(v4)); });
    const std::vector<uint64_t> twice = {3, 4, 3};
    expect_error([&] { comm.set_hot_keys(twice); });
    const std::vector<uint64_t> ok = {2, 40};
    expect_error([&] { cml.allreduce_sparse(ok, std::span<const int32_t>(v4).first(2)); });
    expect_error([&] { cml.allreduce_sparse(ok, std::span<const int32_t>(v4).first(2), SparseOptions{.key_space = 40}); });
    // Still usable: dense ops on the <key, value> scheme.
    dense[r].resize(1000);
    for (size_t i = 0; i < dense[r].size(); ++i) dense[r][i] = static_cast<float>(i % 17) * (r + 1) / 4;
    comm.allreduce(std::span<float>(dense[r]), AllreduceOptions{.op = ReduceOp::Average});
    idense[r].assign(300, static_cast<int32_t>(r + 1));
    comm.allreduce(std::span<int32_t>(idense[r]));
    comm.close();
    cml.close();
  });
  for (unsigned r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(errs[r].size(), 6u);
    EXPECT_EQ(errs[r][0], "sparse allreduce: keys must be strictly ascending, but keys[2] = 5 follows keys[1] = 5");
    EXPECT_EQ(errs[r][1], "sparse allreduce: keys[1] = 18446744073709551615 is reserved (keys must be below it)");
    EXPECT_EQ(errs[r][2], "sparse allreduce: 2 keys but 4 values");
    EXPECT_EQ(errs[r][3], "hot set: key 3 is ranked twice (at 0 and 2)");
    EXPECT_NE(errs[r][4].find("needs SparseOptions::key_space"), std::string::npos) << errs[r][4];
    EXPECT_EQ(errs[r][5], "sparse allreduce: key 40 is not below key_space 40");
    for (size_t i = 0; i < dense[r].size(); ++i)
      ASSERT_EQ(dense[r][i], static_cast<float>(i % 17) * 3 / 8) << "rank " << r << " index " << i;
    for (int32_t v : idense[r]) ASSERT_EQ(v, 3);
  }
}

// Catches: a hot-set rendezvous that waits forever when a peer never joins
// it (every wait is bounded), and a message that does not say what to check.
TEST(RuntimeSparse, AHotSetThatOnlySomeWorkersSendTimesOutNamingTheCause) {
  LocalSwitch sw(sparse_switch("zebra"));
  const unsigned n = 2;
  LocalPs ps(sw.d.endpoint(), 7, n);
  std::vector<std::string> seen(n);
  auto errors = run_workers(n, [&](unsigned r) {
    CommConfig c = comm_config(sw.addr(), 7, r, n);
    c.rendezvous_timeout = 1 * kSec;
    c.progress_timeout = 1 * kSec;
    Communicator comm(c);
    const std::vector<uint64_t> keys = {1, 2, 3};
    const std::vector<int32_t> vals = {1, 1, 1};
    try {
      if (r == 0) comm.set_hot_keys(keys);
      else comm.allreduce_sparse(keys, std::span<const int32_t>(vals));  // the other op: never matched
    } catch (const RuntimeError& e) {
      seen[r] = e.what();
    }
  });
  EXPECT_NE(seen[0].find("did not install the hot set within 1.0 s"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("call set_hot_keys at the same point"), std::string::npos) << seen[0];
  // Rank 1 fails too, bounded: its own progress timeout, or rank 0 leaving first.
  EXPECT_TRUE(seen[1].find("made no progress") != std::string::npos ||
              seen[1].find("worker rank 0 of job 7 disconnected") != std::string::npos)
      << seen[1];
}
