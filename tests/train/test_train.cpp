// ina-train as real processes: the launcher starts the switch (+ PS) and the
// workers; each test reads the launcher's JSON summary. Bounded by `timeout`
// around the launcher and the launcher's own --timeout.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace {

namespace fs = std::filesystem;

struct TrainRun {
  int status = -1;
  std::string log;
  nlohmann::json summary;
};

// Runs `ina-train ARGS --json FILE`, bounded by `timeout_s`.
TrainRun train(const std::string& args, const std::string& tag, int timeout_s = 150) {
  const fs::path dir = fs::temp_directory_path() / ("ina-test-train-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path json = dir / (tag + ".json"), log = dir / (tag + ".log");
  fs::remove(json);
  const std::string cmd = "timeout -k 5 " + std::to_string(timeout_s) + " " + INA_TRAIN_BINARY + " --ina-binary " +
                          INA_BINARY + " " + args + " --timeout " + std::to_string(timeout_s - 10) + " --json " +
                          json.string() + " > " + log.string() + " 2>&1";
  TrainRun r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream lf(log);
  std::stringstream ss;
  ss << lf.rdbuf();
  r.log = ss.str();
  std::ifstream jf(json);
  r.summary = nlohmann::json::parse(jf, nullptr, false);
  std::error_code ec;
  fs::remove(json, ec);
  fs::remove(log, ec);
  return r;
}

void expect_identical(const TrainRun& r, unsigned workers) {
  ASSERT_TRUE(r.summary.is_object()) << r.log;
  EXPECT_TRUE(r.summary.at("identical_parameters").get<bool>()) << r.log;
  const auto& sums = r.summary.at("checksums");
  ASSERT_EQ(sums.size(), workers);
  for (const auto& s : sums) EXPECT_EQ(s, sums[0]) << r.log;
}

// 2 workers, 200 steps through a DSA switch: the loss goes down and both
// workers end with bit-identical parameters.
TEST(Train, SmokeInaDsaTwoWorkers) {
  ASSERT_TRUE(fs::exists(INA_TRAIN_BINARY)) << INA_TRAIN_BINARY;
  const TrainRun r = train("--backend ina --scheme dsa --workers 2 --epochs 1 --batch 32 --limit-train 12800 "
                      "--limit-test 2000 --seed 3", "smoke");
  ASSERT_EQ(r.status, 0) << r.log;
  expect_identical(r, 2);
  const auto& w0 = r.summary.at("workers").at(0);
  EXPECT_EQ(w0.at("steps").get<unsigned>(), 200u);
  EXPECT_LT(r.summary.at("last_loss").get<double>(), 0.75 * r.summary.at("first_loss").get<double>()) << r.log;
  EXPECT_GT(r.summary.at("final_test_accuracy").get<double>(), 0.6) << r.log;
  for (const auto& w : r.summary.at("workers"))
    EXPECT_LT(w.at("last_loss").get<double>(), w.at("first_loss").get<double>()) << r.log;
  // DSA's Eq. 1 (the default --priority eq1): every step after the first
  // (nothing measured before it) priced per layer; layer 1's field is
  // L / l = 2 times layer 2's, both taken at the same moment, each rounded.
  EXPECT_EQ(r.summary.at("config").at("priority"), "eq1");
  for (const auto& w : r.summary.at("workers")) {
    const auto& eq1 = w.at("eq1");
    EXPECT_EQ(eq1.at("priced_steps").get<unsigned>(), 199u) << w.dump();
    const double p1 = eq1.at("mean_priority").at(0).get<double>(), p2 = eq1.at("mean_priority").at(1).get<double>();
    EXPECT_LE(std::abs(p1 - 2 * p2), 1.5) << w.dump();
    // T_j is the rest of the epoch (one of 200 steps here): the first priced
    // step has 198 steps after it, the last none, so its field is far higher.
    EXPECT_GT(eq1.at("last_priority").get<double>(), 20 * eq1.at("first_priority").get<double>()) << w.dump();
  }
}

// --model cnn: three layers (two convolutions, a linear layer), each its own
// allreduce priced by Eq. 1, the front layer at L / l = 3 times the last
// and the second at 1.5 times; the workers end bit-identical.
TEST(Train, CnnPricesEachOfItsThreeLayers) {
  const TrainRun r = train("--backend ina --scheme dsa --model cnn --workers 2 --epochs 1 --batch 32 --limit-train 1280 "
                           "--limit-test 200", "cnn");
  ASSERT_EQ(r.status, 0) << r.log;
  expect_identical(r, 2);
  for (const auto& w : r.summary.at("workers")) {
    EXPECT_EQ(w.at("parameters").get<unsigned>(), 18378u);  // 16*25+16 + 32*16*25+32 + 512*10+10
    const auto& m = w.at("eq1").at("mean_priority");
    ASSERT_EQ(m.size(), 3u) << w.dump();
    const double p1 = m.at(0).get<double>(), p2 = m.at(1).get<double>(), p3 = m.at(2).get<double>();
    EXPECT_LE(std::abs(p1 - 3 * p3), 2.0) << w.dump();
    EXPECT_LE(std::abs(p2 - 1.5 * p3), 1.25) << w.dump();
    EXPECT_EQ(w.at("eq1").at("priced_steps").get<unsigned>(), 19u);  // 640 samples / 32, the first unpriced
  }
}

// --priority fixed: one allreduce of the model at the communicator's
// priority, nothing priced; a priority policy that does not exist is refused.
TEST(Train, FixedPriorityPricesNothingAndABadPolicyIsNamed) {
  const TrainRun r = train("--backend ina --scheme dsa --workers 2 --epochs 1 --batch 64 --limit-train 1280 "
                           "--limit-test 200 --priority fixed", "fixed");
  ASSERT_EQ(r.status, 0) << r.log;
  expect_identical(r, 2);
  EXPECT_EQ(r.summary.at("config").at("priority"), "fixed");
  for (const auto& w : r.summary.at("workers")) EXPECT_FALSE(w.contains("eq1")) << w.dump();
  const auto bad = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " --priority eq2");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--priority: eq2 not in {eq1,fixed}"), std::string::npos) << bad.output;
}

// --comm's settings reach every worker's communicator, and each worker
// reports its transport's counters: with 5 % of the datagrams lost and fast
// retransmit off, every resend follows a retransmission timeout, none a
// presumed loss, and the workers still end bit-identical. A setting that is
// not NAME=VALUE, not a setting, one of the job's own (ina-train sets
// them) or given to gloo is named.
TEST(Train, WorkersReportTheTransportUnderTheCommSettings) {
  const TrainRun r = train("--backend ina --scheme dsa --model cnn --workers 2 --epochs 1 --batch 32 --limit-train 1280 "
                           "--limit-test 200 --comm fast_retransmit=false --comm faults.loss=0.05",
                           "transport");
  ASSERT_EQ(r.status, 0) << r.log;
  expect_identical(r, 2);
  for (const auto& w : r.summary.at("workers")) {
    ASSERT_TRUE(w.contains("transport")) << w.dump();
    const auto& t = w.at("transport");
    EXPECT_EQ(t.at("fast_retransmits").get<uint64_t>(), 0u) << t.dump();
    EXPECT_GT(t.at("retransmits").get<uint64_t>(), 0u) << t.dump();
    EXPECT_EQ(t.at("retransmits"), t.at("timeouts")) << t.dump();
    EXPECT_EQ(t.at("acks"), r.summary.at("workers").at(0).at("transport").at("acks")) << t.dump();
  }
  for (const char* bad : {"--comm fast_retransmit", "--comm fast_retransmits=false", "--comm fast_retransmit=maybe",
                          "--comm rank=3", "--comm communicator.timeout_ms=5", "--backend gloo --comm fast_retransmit=false"}) {
    const auto b = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " " + bad);
    EXPECT_EQ(b.status, 2) << bad << ": " << b.output;
    EXPECT_NE(b.output.find("--comm"), std::string::npos) << bad << ": " << b.output;
  }
  // A key given there is refused without being echoed.
  const auto key = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " --comm job_key=5ec2e7f00d");
  EXPECT_EQ(key.status, 2) << key.output;
  EXPECT_EQ(key.output.find("5ec2e7f00d"), std::string::npos) << key.output;
}

// The same training through ina (ATP and SwitchML switches) and gloo on a
// reduced training set: the test accuracy after the same number of epochs
// (the last one, on the full 10000-image test set) agrees within 0.5
// percentage points. The runs are not bit-identical to gloo's (ina averages
// in fixed point), so the trajectories drift apart slightly; early epochs on
// tiny data are noisier than this bound, the end of training is what counts.
TEST(Train, InaMatchesGlooAccuracy) {
  ASSERT_TRUE(fs::exists(INA_TRAIN_BINARY)) << INA_TRAIN_BINARY;
  const std::string common = "--workers 2 --epochs 3 --batch 64 --limit-train 12800 --seed 5";
  const TrainRun gloo = train("--backend gloo " + common, "gloo");
  ASSERT_EQ(gloo.status, 0) << gloo.log;
  expect_identical(gloo, 2);
  // gloo reads no priority: its workers price nothing, whatever --priority says.
  for (const auto& w : gloo.summary.at("workers")) EXPECT_FALSE(w.contains("eq1")) << w.dump();
  const double ref = gloo.summary.at("final_test_accuracy").get<double>();
  EXPECT_GT(ref, 0.75) << gloo.log;
  for (const std::string scheme : {"atp", "switchml"}) {
    const TrainRun r = train("--backend ina --scheme " + scheme + " " + common, scheme);
    ASSERT_EQ(r.status, 0) << r.log;
    expect_identical(r, 2);
    ASSERT_EQ(r.summary.at("epochs").size(), 3u);
    const double acc = r.summary.at("final_test_accuracy").get<double>();
    EXPECT_LE(std::abs(acc - ref), 0.005) << scheme << ": " << acc << " vs gloo " << ref << "\n" << r.log << gloo.log;
  }
}

// --model fortunes (src/train/fortunes_worker.cpp): the bag-of-words model's
// sparse embedding gradient through allreduce_sparse on zebra (hot rows in the
// switch, the rest at the PS) and ps-lite (all at the PS), against gloo's
// dense allreduce of the densified gradient. 2 workers, 30 steps, d = 8, a
// hot set of 4096 keys (512 rows) from the first 10 iterations.
//
// Loss tolerance (docs/results/train.md, "Fortunes"): per step, an averaged
// gradient entry differs between the backends by at most G * N * 2^-23 (G the
// largest |g|): gloo's float sum rounds N - 1 times (<= (N-1) 2^-24 G), ina's
// fixed point rounds each worker's value by half a step of 1/scale <= N G 2^-29
// (agreed power-of-two scale), and decoding rounds once more (2^-24 G). To first
// order a parameter then drifts by at most lr * t * G * N * 2^-23 after t
// steps, and the loss by at most that times the gradient's L1 norm, plus two
// ulps of the float32 loss itself.
double fortunes_tolerance(double loss, unsigned step, double lr, unsigned n, double g_max, double l1_max) {
  const double ulp = std::ldexp(1.0, std::ilogb(loss) - 23);
  return 2 * ulp + l1_max * lr * step * g_max * n * std::ldexp(1.0, -23);
}

double max_over_workers(const nlohmann::json& s, const char* key) {
  double m = 0;
  for (const auto& w : s.at("workers")) m = std::max(m, w.at(key).get<double>());
  return m;
}

TEST(Train, FortunesZebraAndPsLiteMatchGlooLossCurve) {
  ASSERT_TRUE(fs::exists(INA_TRAIN_BINARY)) << INA_TRAIN_BINARY;
  const std::string common = "--model fortunes --workers 2 --epochs 1 --batch 32 --dim 8 --limit-train 1920 "
                             "--limit-test 500 --seed 7 --hot-iterations 10 --hot-keys 4096";
  const TrainRun gloo = train("--backend gloo " + common, "fortunes-gloo", 60);
  ASSERT_EQ(gloo.status, 0) << gloo.log;
  expect_identical(gloo, 2);
  const TrainRun zebra = train("--backend ina --scheme zebra " + common, "fortunes-zebra", 60);
  ASSERT_EQ(zebra.status, 0) << zebra.log;
  expect_identical(zebra, 2);
  const TrainRun pslite = train("--backend ina --scheme ps-lite " + common, "fortunes-pslite", 60);
  ASSERT_EQ(pslite.status, 0) << pslite.log;
  expect_identical(pslite, 2);

  const auto& ref = gloo.summary.at("step_losses");
  ASSERT_EQ(ref.size(), 30u) << gloo.log;
  // Before the first allreduce the three runs are the same computation.
  EXPECT_EQ(ref[0].get<double>(), zebra.summary.at("step_losses").at(0).get<double>());
  double g = 0, l1 = 0;
  for (const auto* r : {&gloo, &zebra, &pslite}) {
    g = std::max(g, max_over_workers(r->summary, "grad_max_abs"));
    l1 = std::max(l1, max_over_workers(r->summary, "grad_l1_max"));
  }
  for (const auto* r : {&zebra, &pslite}) {
    const auto& c = r->summary.at("step_losses");
    ASSERT_EQ(c.size(), ref.size()) << r->log;
    for (size_t t = 0; t < ref.size(); ++t) {
      const double a = ref[t].get<double>(), b = c[t].get<double>();
      EXPECT_LE(std::abs(a - b), fortunes_tolerance(a, static_cast<unsigned>(t), 0.5, 2, g, l1))
          << "step " << t << ": gloo " << a << ", ina " << b << "\n" << r->log;
    }
  }
  // The switch sums the hot pairs exactly as the PS sums them: zebra and
  // ps-lite end with the same parameters; gloo's float sums differ.
  EXPECT_EQ(zebra.summary.at("checksums").at(0), pslite.summary.at("checksums").at(0));
  EXPECT_NE(zebra.summary.at("checksums").at(0), gloo.summary.at("checksums").at(0));

  // Zebra's switch aggregated exactly the hot pairs: each worker's transport
  // sent as many hot pairs as the worker counts from its keys and the hot
  // set, and the switch summed all of them (none on ps-lite).
  uint64_t hot = 0;
  for (const auto& w : zebra.summary.at("workers")) {
    const auto& sp = w.at("sparse");
    EXPECT_EQ(sp.at("hot_set_keys").get<uint64_t>(), 4096u);
    EXPECT_EQ(sp.at("transport").at("hot_pairs").get<uint64_t>(), sp.at("hot_pairs_expected").get<uint64_t>());
    hot += sp.at("hot_pairs_expected").get<uint64_t>();
    // Some of the worker's pairs were cold: the hot set did not hold every key.
    EXPECT_LT(sp.at("hot_pairs_expected").get<uint64_t>(), sp.at("embedding_pairs").get<uint64_t>());
  }
  EXPECT_EQ(zebra.summary.at("switch").at("switch").at("kv_aggregated").get<uint64_t>(), hot) << zebra.log;
  for (const auto& w : pslite.summary.at("workers")) {
    EXPECT_EQ(w.at("sparse").at("hot_set_keys").get<uint64_t>(), 0u);
    EXPECT_EQ(w.at("sparse").at("transport").at("hot_pairs").get<uint64_t>(), 0u);
  }
  EXPECT_EQ(pslite.summary.at("switch").at("switch").at("kv_aggregated").get<uint64_t>(), 0u);
}

// Bad --model / --scheme / --momentum / --hot-keys are refused before anything starts, naming option and value.
TEST(Train, FortunesBadOptionsAreNamed) {
  // A directory holding only a strfile index and a subdirectory: no fortune file.
  const std::filesystem::path no_fortunes =
      std::filesystem::temp_directory_path() / ("ina-no-fortunes-" + std::to_string(::getpid()));
  std::filesystem::remove_all(no_fortunes);
  std::filesystem::create_directories(no_fortunes / "sub");
  std::ofstream(no_fortunes / "art.dat") << "index";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model rnn", "--model must be mlp, cnn or fortunes, got 'rnn'"},
      {"--model fortunes --scheme dsa", "--scheme dsa: --model fortunes"},
      {"--model fortunes --scheme zebra --momentum 0.9", "--momentum 0.9"},
      {"--model fortunes --scheme zebra --hot-keys 40000", "--hot-keys 40000"},
      {"--model fortunes --scheme zebra --dim 0", "--dim must be in 1..1024, got 0"},
      {"--model fortunes --scheme zebra --data " + no_fortunes.string(),
       "--data " + no_fortunes.string() + ": no fortune files"}};
  for (const auto& [args, want] : cases) {
    const auto r = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " --ina-binary " +
                                         INA_BINARY + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(want), std::string::npos) << args << ": " << r.output;
  }
  std::filesystem::remove_all(no_fortunes);
}

// The switch memory is given in MiB as in every other command (or in bytes);
// a value beyond the switch's 1 GiB names the flag and both units.
TEST(Train, MemoryInMiBLikeEveryCommand) {
  const auto help = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " --help");
  EXPECT_NE(help.output.find("--memory-mb"), std::string::npos) << help.output;
  const auto r = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY + " --memory-mb 2048");
  EXPECT_EQ(r.status, 2) << r.output;  // a usage error, as in every command
  EXPECT_NE(r.output.find("--memory-mb: 2048 MiB is 2147483648 bytes"), std::string::npos) << r.output;
}

// A launcher without a reachable ina binary fails fast with a clear message.
TEST(Train, MissingInaBinaryIsAnError) {
  const auto r = ina_test::run_command(std::string("timeout -k 5 30 ") + INA_TRAIN_BINARY +
                                       " --backend ina --workers 2 --epochs 1 --ina-binary /nonexistent/ina");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/ina"), std::string::npos) << r.output;
}

}  // namespace
