// The scheme registry (schemes/registry.hpp) and the engine profiles
// (host/profile.hpp): lookups, errors, defaults, and where each profile applies.
#include <gtest/gtest.h>

#include <string>

#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "host/worker.hpp"
#include "runtime/communicator.hpp"
#include "runtime/ps_daemon.hpp"
#include "schemes/registry.hpp"

namespace ina {
namespace {

using schemes::Engine;

TEST(SchemeRegistry, NamesAliasesAndRoles) {
  EXPECT_EQ(&schemes::find("preemptive"), &schemes::find("dsa"));
  EXPECT_EQ(&schemes::find("shared-fcfs"), &schemes::find("atp"));
  EXPECT_EQ(&schemes::find("isolated"), &schemes::find("switchml"));
  EXPECT_FALSE(schemes::find("switchml").has_ps);
  EXPECT_TRUE(schemes::find("switchml").isolated);
  EXPECT_TRUE(schemes::find("dsa").eq1_priority);
  EXPECT_FALSE(schemes::find("dsa-always").eq1_priority);
  EXPECT_EQ(schemes::find("dsa-coin").preempt, dp::PreemptMode::Coin);
  EXPECT_EQ(schemes::names(Engine::Runtime),
            (std::vector<std::string>{"switchml", "atp", "dsa", "rar", "h-ar", "rina", "zebra", "ps-lite"}));
  EXPECT_TRUE(schemes::find("zebra").has_switch_cpu());
  EXPECT_FALSE(schemes::find("ps-lite").has_switch_cpu());
  EXPECT_TRUE(schemes::find("ps-lite").kv());
  EXPECT_FALSE(schemes::find("switchml").kv());
  EXPECT_EQ(schemes::names(Engine::SimTopology), (std::vector<std::string>{"grid"}));
  EXPECT_EQ(schemes::names(Engine::SimSparse), (std::vector<std::string>{"switchml", "zebra", "ps-lite"}));
  EXPECT_EQ(schemes::find("switchml").sparse, schemes::Sparse::Dense);
  EXPECT_EQ(schemes::find("pslite").sparse, schemes::Sparse::Push);
  EXPECT_EQ(schemes::find("zebra").sparse, schemes::Sparse::HotIna);
  EXPECT_EQ(&schemes::find("aoi"), &schemes::find("p4inc-aoi"));
  EXPECT_FALSE(schemes::find("p4inc-aoi").has_ps);  // full PS offload
  EXPECT_TRUE(schemes::find("p4inc-aoi").segments);
  EXPECT_FALSE(schemes::find("p4inc-aoi").isolated);  // no SwitchML window cap
  EXPECT_EQ(schemes::find("p4inc-aoi").engines, static_cast<unsigned>(Engine::SimStar));
  // Names are unique across names and aliases.
  for (const auto& a : schemes::all())
    for (const auto& b : schemes::all())
      if (&a != &b) {
        EXPECT_FALSE(b.answers_to(a.name)) << a.name;
        for (const auto& alias : a.aliases) EXPECT_FALSE(b.answers_to(alias)) << alias;
      }
}

TEST(SchemeRegistry, ErrorsListTheAcceptedNames) {
  try {
    schemes::find("sharp");
    FAIL() << "no throw";
  } catch (const schemes::UnknownScheme& e) {
    EXPECT_NE(std::string(e.what()).find("switchml, atp, dsa, dsa-join, dsa-always, dsa-coin, grid, ps, rar, h-ar, rina, zebra, ps-lite or p4inc-aoi"), std::string::npos)
        << e.what();
  }
  try {
    schemes::find("grid", Engine::Runtime);
    FAIL() << "no throw";
  } catch (const schemes::UnknownScheme& e) {
    EXPECT_NE(std::string(e.what()).find("not supported by the runtime"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("switchml, atp, dsa, rar, h-ar, rina, zebra or ps-lite"), std::string::npos) << e.what();
  }
}

TEST(SchemeRegistry, ProgramsReportTheirScheme) {
  dp::SwitchConfig c;
  c.memory_bytes = 16 * 256;
  for (const auto& s : schemes::all()) {
    if (!s.factory) {
      // Host-only collectives (ps, rar, h-ar) have no switch program.
      EXPECT_THROW(s.make_switch(c), std::logic_error) << s.name;
      continue;
    }
    auto sw = s.make_switch(c);
    EXPECT_EQ(sw->scheme(), s.name);
    EXPECT_EQ(sw->config().preempt, s.preempt);
  }
  auto sw = schemes::find("dsa").make_switch(c);
  dp::SwitchJob j;
  j.job = 3;
  j.workers = {1, 2};
  try {
    sw->add_job(j);
    FAIL() << "a shared pool without a PS";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("under the dsa scheme"), std::string::npos) << e.what();
  }
}

TEST(SchemeRegistry, ScenarioStoresCanonicalNamesAndRefusesOtherEngines) {
  const auto sc = exp::parse_scenario("[run]\nschemes = [\"preemptive\", \"atp\"]\n", "<t>");
  EXPECT_EQ(sc.schemes, (std::vector<std::string>{"dsa", "atp"}));
  try {
    exp::parse_scenario("[run]\nschemes = [\"grid\"]\n", "<t>");
    FAIL() << "grid is not a star-simulator scheme";
  } catch (const exp::ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported by the star simulator"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- profiles

TEST(EngineProfiles, DefaultsFollowTheProfiles) {
  const host::WorkerConfig w;
  EXPECT_EQ(w.min_rto, host::kPaperProfile.min_rto);
  EXPECT_EQ(w.fast_retransmit, host::kPaperProfile.fast_retransmit);
  EXPECT_EQ(w.delay_target, host::kPaperProfile.delay_target);
  EXPECT_EQ(w.retain_ops, host::kPaperProfile.retain_ops);
  const host::PsConfig p;
  EXPECT_EQ(p.min_timeout, host::kPaperProfile.ps_min_timeout);
  EXPECT_EQ(p.targeted_known_results, host::kPaperProfile.targeted_known_results);
  const CommConfig c;
  EXPECT_EQ(c.profile, "runtime");
  EXPECT_EQ(c.min_rto, host::kRuntimeProfile.min_rto);
  EXPECT_EQ(c.fast_retransmit, host::kRuntimeProfile.fast_retransmit);
  EXPECT_EQ(c.delay_target, host::kRuntimeProfile.delay_target);
  EXPECT_EQ(c.retain_ops, host::kRuntimeProfile.retain_ops);
  const rt::PsDaemonConfig d;
  EXPECT_EQ(d.min_timeout, host::kRuntimeProfile.ps_min_timeout);
  EXPECT_EQ(d.targeted_known_results, host::kRuntimeProfile.targeted_known_results);
  // The numbers the docs give.
  EXPECT_EQ(host::kPaperProfile.min_rto, 1 * kMs);
  EXPECT_EQ(host::kRuntimeProfile.min_rto, 20 * kMs);
}

TEST(EngineProfiles, CommunicatorSelectsPaperBeforeItsOtherKeys) {
  // "min_rto_ms" sorts before "profile": the profile still applies first.
  const CommConfig c =
      CommConfig::from_toml_string("[communicator]\nmin_rto_ms = 7\nprofile = \"paper\"\n", "<t>", CommConfig{});
  EXPECT_EQ(c.profile, "paper");
  EXPECT_EQ(c.min_rto, 7 * kMs);
  EXPECT_FALSE(c.fast_retransmit);
  EXPECT_EQ(c.delay_target, 0);
  EXPECT_EQ(c.retain_ops, host::kPaperProfile.retain_ops);
  EXPECT_EQ(c.to_json().at("profile"), "paper");
  EXPECT_THROW(CommConfig::from_toml_string("[communicator]\nprofile = \"fast\"\n", "<t>", CommConfig{}),
               RuntimeError);
}

TEST(EngineProfiles, ScenarioMaySelectTheRuntimeProfile) {
  exp::Settings s;
  exp::apply_setting(s, "run.profile", "runtime", "<t>");
  EXPECT_EQ(s.profile, "runtime");
  EXPECT_THROW(exp::apply_setting(s, "run.profile", "fast", "<t>"), exp::ScenarioError);
  s.jobs = 2;
  s.workers_per_job = 3;
  s.hosts = 6;
  s.partition_mb = 0.02;
  s.max_sim_ms = 5000;
  for (const char* scheme : {"atp", "dsa"}) {
    const auto out = exp::run_point(s, scheme, 3);
    EXPECT_TRUE(out.ok) << scheme << ": " << out.problems;
  }
}

}  // namespace
}  // namespace ina
