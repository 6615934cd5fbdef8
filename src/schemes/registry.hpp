#pragma once
// The one registry of INA schemes. A scheme is named once, here: its name and
// aliases, a one-line description, its switch program (the factory of its
// file in dataplane/), the roles its jobs have (a PS or not, an isolated
// region of the aggregator memory or a shared pool), its DSA preemption mode
// and whether workers compute Eq. 1 priorities, its defaults, and which
// engines run it. The simulator, the runtime daemons and launchers, `ina
// train`, the scenario parser and the CLI's help ask this registry; none of
// them parses a scheme name itself.
//
// Layer: above dataplane/, host/ and control/ (it names their objects), below
// sim/, runtime/, experiment/, train/ and cli/ (which ask it).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/switch.hpp"
#include "schemes/collective.hpp"

namespace ina::schemes {

// Where a scheme can run (a bit set).
enum class Engine : uint8_t {
  SimStar = 1,      // packet simulator, one switch (ina sim: exp::run_point)
  SimTopology = 2,  // packet simulator, multi-switch topology (exp::simulate_plan)
  Runtime = 4,      // UDP runtime: ina switch / ps / worker / run, ina::Communicator
  Training = 8,     // ina train (libtorch over the runtime)
  SimNetwork = 16,  // packet simulator, collectives on a multi-switch topology (exp::run_collective)
  SimSparse = 32,   // packet simulator, sparse <key, value> aggregation on a star (exp::run_sparse)
  // UDP runtime, one job over several switches from a static layout (ina
  // switch --layout, ina ring-worker; runtime/ring_layout.hpp): the ring
  // collectives, PS-based INA over racks, GRID's planned routes.
  Layout = 64,
};
constexpr unsigned operator|(Engine a, Engine b) { return static_cast<unsigned>(a) | static_cast<unsigned>(b); }
constexpr unsigned operator|(unsigned a, Engine b) { return a | static_cast<unsigned>(b); }
const char* to_string(Engine e);  // "the star simulator", "the topology simulator", "the runtime", "training"

// Builds the scheme's switch program; `scheme` is the name it reports (SwitchProgram::scheme()).
using SwitchFactory = std::unique_ptr<dp::SwitchProgram> (*)(const dp::SwitchConfig& cfg, std::string_view scheme);

// How a scheme's jobs aggregate sparse <key, value> gradients (Engine::SimSparse).
enum class Sparse : uint8_t {
  None = 0,  // dense tensors
  Push,      // PS-lite style: every non-zero pair pushed to the PS
  HotIna,    // Zebra: hot keys aggregated in the switch (a hot-set table), the rest at the PS
  Dense,     // SwitchML on a sparse model: the whole model streamed, zeros included (Zebra's baseline)
};
const char* to_string(Sparse s);

struct Scheme {
  std::string name;                  // canonical name: scenario files, results, --scheme
  std::vector<std::string> aliases;  // also accepted on input (e.g. "preemptive" for dsa)
  std::string description;           // one line, for --help
  std::string policy;                // the switch's aggregation policy as reported by `ina switch`
  SwitchFactory factory = nullptr;
  bool has_ps = true;                // every job has a PS / fallback server
  bool isolated = false;             // jobs get isolated regions of the aggregator memory (=> window cap)
  // Jobs get a segment <MemID, Size> of the aggregator array (a region, given
  // by the scheduler or split equally) and their workers choose the aggregator
  // of each packet in it (P4INC-AOI, host::WorkerConfig::segment_size); no window cap.
  bool segments = false;
  bool routed = false;               // packets are addressed per node by a plan (GRID): multi-switch only
  dp::PreemptMode preempt = dp::PreemptMode::Priority;  // DSA's compare rule (Fig. 11 strawmen)
  bool join_splits = false;          // DSA: the switch joins split tasks at the PS at once (ours; dp::SwitchConfig)
  bool eq1_priority = false;         // workers compute DSA's Eq. 1 priorities (simulator training workers)
  // Defaults.
  bool track_tasks = false;          // count per-task preemption outcomes (DSA task types, metrics tasks_type*)
  unsigned engines = 0;              // bit set of Engine
  Collective collective = Collective::None;  // what its jobs run on a multi-switch topology
  Sparse sparse = Sparse::None;              // what its jobs do with sparse gradients
  // Its shared pool can also hold a sparse job's hot values (ours:
  // dp::ZebraConfig::kv_pool; a sparse job beside dense ones, exp::run_sparse's pool).
  bool hosts_sparse = false;
  // A Rina ToR whose memory is a shared pool (switch.ring_memory = "pool")
  // can run this scheme's pool policy, named by the scheme's canonical name
  // (switch.pool_policy): the ToR's RingMemory under it. Region: it cannot.
  dp::RingMemory ring_pool = dp::RingMemory::Region;
  // The packet its own evaluation uses: values and modelled header bytes (0 =
  // the scenario's). A scenario opts in with switch.packets = "per-scheme".
  // DSA §VII-A: ATP and DSA 306 B (256 + 50), SwitchML 180 B (32 values =
  // 128 B + 52 B of headers), its slots one packet each, two pools.
  int paper_payload_bytes = 0;
  int paper_header_bytes = 0;

  bool supports(Engine e) const { return (engines & static_cast<unsigned>(e)) != 0; }
  // Its switch has a CPU beside the pipeline that keeps and retransmits results (Zebra_s).
  bool has_switch_cpu() const { return sparse == Sparse::HotIna; }
  // Its jobs exchange <key, value> packets (a sparse worker and PS).
  bool kv() const { return sparse == Sparse::Push || sparse == Sparse::HotIna; }
  bool answers_to(std::string_view n) const;
  // The scheme's switch program: cfg with this scheme's preemption mode and join_splits.
  std::unique_ptr<dp::SwitchProgram> make_switch(dp::SwitchConfig cfg) const;
};

// Thrown for an unknown scheme name or one an engine does not run; the
// message lists the names that would have been accepted.
struct UnknownScheme : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The scheme the runtime's daemons, `ina switch` and `ina train` run unless told otherwise.
inline constexpr std::string_view kDefaultRuntimeScheme = "dsa";

// Every registered scheme, in registration order.
const std::vector<Scheme>& all();
// By name or alias; nullptr if none.
const Scheme* lookup(std::string_view name);
// By name or alias; throws UnknownScheme listing the known names.
const Scheme& find(std::string_view name);
// The same, and the scheme must run on engine e (else UnknownScheme listing those that do).
const Scheme& find(std::string_view name, Engine e);
// Canonical names of the schemes engine e runs, in registration order.
std::vector<std::string> names(Engine e);
// "switchml, atp or dsa" for messages.
std::string names_text(Engine e);
// The scheme whose pool policy a Rina ToR's shared pool runs, by canonical
// name (aliases are not pool policies); nullptr if none.
const Scheme* ring_pool_scheme(std::string_view name);
// Canonical names of the schemes a Rina ToR's shared pool can run, in
// registration order (views of the registry's names, valid for the program).
std::vector<std::string_view> ring_pool_names();
// "atp or dsa" for messages.
std::string ring_pool_names_text();
// Help text for a --scheme option: one line per scheme engine e runs ("dsa (preemptive): ...").
std::string help(Engine e);

}  // namespace ina::schemes
