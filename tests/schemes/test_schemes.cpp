// The scheme registry (schemes/registry.hpp) and the engine profiles
// (host/profile.hpp): lookups, errors, defaults, and where each profile applies.
#include <gtest/gtest.h>

#include <string>

#include "experiment/collective.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "host/worker.hpp"
#include "runtime/communicator.hpp"
#include "runtime/ps_daemon.hpp"
#include "runtime/switch_daemon.hpp"
#include "schemes/registry.hpp"
#include "topo/graph.hpp"

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
    EXPECT_EQ(sw->config().dsa.preempt, s.preempt);
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

// The pool policies of a Rina ToR's shared pool are the registry's schemes
// with a ring_pool, by canonical name: the scenario accepts exactly those
// names, run_collective maps them to the ToR's memory and refuses others.
TEST(SchemeRegistry, RingPoolPoliciesAreSchemesOfTheRegistry) {
  EXPECT_EQ(schemes::ring_pool_names(), (std::vector<std::string_view>{"atp", "dsa"}));
  EXPECT_EQ(schemes::ring_pool_names_text(), "atp or dsa");
  ASSERT_NE(schemes::ring_pool_scheme("atp"), nullptr);
  ASSERT_NE(schemes::ring_pool_scheme("dsa"), nullptr);
  EXPECT_EQ(schemes::ring_pool_scheme("atp"), &schemes::find("atp"));
  EXPECT_EQ(schemes::ring_pool_scheme("atp")->ring_pool, dp::RingMemory::PoolAtp);
  EXPECT_EQ(schemes::ring_pool_scheme("dsa")->ring_pool, dp::RingMemory::PoolDsa);
  for (const char* other : {"preemptive", "shared-fcfs", "switchml", "dsa-join", "rina", ""})
    EXPECT_EQ(schemes::ring_pool_scheme(other), nullptr) << other;

  EXPECT_EQ(exp::parse_scenario("[switch]\npool_policy = \"dsa\"\n", "<t>").base.pool_policy, "dsa");
  try {
    exp::parse_scenario("[switch]\npool_policy = \"preemptive\"\n", "<t>");
    FAIL() << "an alias is not a pool policy";
  } catch (const exp::ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "<t>: field 'switch.pool_policy': must be one of: atp, dsa (value: preemptive)");
  }

  topo::Graph g;  // one INA ToR, two hosts
  const auto tor = g.add_switch("tor", true, 100);
  for (int i = 0; i < 2; ++i) g.add_link(g.add_host("h" + std::to_string(i)), tor, 100);
  exp::CollectiveSettings cs;
  cs.workers_per_job = {2};
  cs.ring_memory = "pool";
  cs.pool_policy = "preemptive";
  try {
    exp::run_collective(g, "rina", cs);
    FAIL() << "an alias is not a pool policy";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "pool_policy = 'preemptive' (atp or dsa)");
  }
}

// The runtime's default scheme is one the runtime and training run, and the
// switch daemon starts with it.
TEST(SchemeRegistry, DefaultRuntimeSchemeRunsInTheRuntimeAndTraining) {
  const schemes::Scheme& s = schemes::find(schemes::kDefaultRuntimeScheme);
  EXPECT_EQ(s.name, "dsa");
  EXPECT_TRUE(s.supports(Engine::Runtime));
  EXPECT_TRUE(s.supports(Engine::Training));
  EXPECT_EQ(rt::SwitchDaemonConfig{}.scheme, "dsa");
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
  // The same point under the paper profile: the runtime profile's transport
  // (20 ms RTO floor, fast retransmit, delay target) runs it differently,
  // and both deliver every value exactly.
  exp::Settings paper = s;
  exp::apply_setting(paper, "run.profile", "paper", "<t>");
  for (const char* scheme : {"atp", "dsa"}) {
    const auto out = exp::run_point(s, scheme, 3);
    const auto ref = exp::run_point(paper, scheme, 3);
    ASSERT_TRUE(out.ok) << scheme << ": " << out.problems;
    ASSERT_TRUE(ref.ok) << scheme << ": " << ref.problems;
    EXPECT_EQ(out.metrics.at("verify_errors"), 0) << scheme;
    EXPECT_EQ(out.metrics.at("verified_values"), ref.metrics.at("verified_values")) << scheme;
    EXPECT_GT(out.metrics.at("verified_values"), 0) << scheme;
    EXPECT_NE(out.digest, ref.digest) << scheme << ": the profile did not reach the transport";
  }
}

}  // namespace
}  // namespace ina
