#include "runtime/ring_worker.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/counted.hpp"
#include "core/json_depth.hpp"
#include "core/rng.hpp"
#include "host/ring.hpp"
#include "host/ring_failover.hpp"
#include "host/profile.hpp"
#include "runtime/communicator.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
#include "runtime/control.hpp"
#include "runtime/datagram_tag.hpp"
#include "runtime/ring_layout.hpp"
#include "schemes/ring_plan.hpp"

namespace ina::rt {

namespace {

namespace fs = std::filesystem;

nlohmann::json ring_stats_json(const host::RingStats& s) {
  return {{"sent", s.sent}, {"retransmits", s.retransmits}, {"timeouts", s.timeouts}, {"fast_retransmits", s.fast_retransmits}, {"acks", s.acks},
          {"dup_acks", s.dup_acks}, {"received", s.received}, {"duplicates", s.duplicates}, {"early", s.early},
          {"resumes_sent", s.resumes_sent}, {"busy", s.busy}, {"probes", s.probes}, {"resent_refused", s.resent_refused},
          {"late", s.late}, {"pulls_sent", s.pulls_sent}, {"pulls", s.pulls}, {"pull_answers_sent", s.answers_sent}, {"rack_words", s.rack_words}, {"held_rtos", s.held_rtos}, {"delayed", s.delayed}, {"steps", s.steps},
          {"bytes_sent", s.bytes_sent}, {"malformed", s.malformed}, {"foreign", s.foreign}};
}

// The ranks whose barrier file `what`.R is missing.
std::vector<size_t> missing(const fs::path& dir, const char* what, size_t n) {
  std::vector<size_t> m;
  for (size_t r = 0; r < n; ++r)
    if (!fs::exists(dir / fmt::format("{}.{}", what, r))) m.push_back(r);
  return m;
}

void touch(const fs::path& p) {
  std::ofstream f(p);
  if (!f) throw RuntimeError(fmt::format("cannot create the barrier file {}", p.string()));
}

}  // namespace

namespace {

// The job's credential: --key-file, else INA_JOB_KEY, else derived from INA_SWITCH_KEY.
Key job_credential(const RingWorkerConfig& cfg, uint16_t job) {
  return cfg.key_file.empty() ? job_key_from_env(job) : read_key_file(cfg.key_file);
}

// The job's datagram key when the layout has its datagrams tagged
// ("datagram_salt"; datagram_tag.hpp), else nothing.
std::optional<DatagramKey> layout_datagram_key(const RingWorkerConfig& cfg, const RingLayout& L) {
  if (!L.datagram_salt) {
    if (cfg.datagram_auth)
      throw InputError(fmt::format("--datagram-auth: the layout {} has no field 'datagram_salt', so the job's datagrams "
                                   "are not tagged (ina run --datagram-auth writes one)", cfg.layout));
    return std::nullopt;
  }
  try {
    return datagram_key(job_credential(cfg, L.job), *L.datagram_salt);
  } catch (const InputError& e) {
    throw InputError(fmt::format("layout {}: field 'datagram_salt' is set, so every datagram of job {} is tagged with a key "
                                 "derived from the job's key, which this process lacks: give --key-file FILE or "
                                 "INA_JOB_KEY ({})", cfg.layout, L.job, e.what()));
  }
}

// An engine that tags and checks the job's datagrams with `key` (when given).
void use_datagram_key(EngineConfig& ec, const std::optional<DatagramKey>& key) { ec.datagram_tags = key.has_value(); }
void use_datagram_key(UdpEngine& eng, uint16_t job, const std::optional<DatagramKey>& key) {
  if (key) eng.set_datagram_key(job, *key);
}

// A rank's done file in an epoch (the first epoch's is done.R).
std::string done_name(uint16_t rank, uint8_t epoch) {
  return epoch == 0 ? fmt::format("done.{}", rank) : fmt::format("done.{}.epoch{}", rank, epoch);
}

// What the common flow below needs of a rank's node (a ring endpoint, a tree worker or the tree's PS).
struct Rank {
  std::string who;
  std::vector<std::string> wait_also;           // further ready files to wait for before starting (the PS's)
  std::function<bool()> done;                   // its part is done (the PS: never: it serves until every rank is)
  std::function<std::string()> describe;        // where it stands (a timeout)
  std::function<void()> started = [] {};        // right after the engine started
  // Failures (ring ranks with --fail-detect-ms): every loop turn; whether
  // the rank has stopped for good (--crash-at-op); its own done file and
  // the ones the end waits for (empty functions: done.R and done.0..n-1).
  std::function<void()> tick = [] {};
  std::function<bool()> stopped = [] { return false; };
  std::function<std::string()> done_file = {};
  std::function<std::vector<std::string>()> done_files = {};
};

// The barriers, the run and the drain (ring_worker.hpp). Returns the
// leaks found after every rank is done (timers, packets held); nothing
// if the rank stopped for good (a crash injected).
std::vector<std::string> drive(const RingWorkerConfig& cfg, const RingLayout& L, UdpEngine& eng, const Rank& rk,
                               const std::string& self_name) {
  const fs::path bar(cfg.barrier);
  const size_t n = L.n();
  const Time deadline = monotonic_now() + static_cast<Time>(cfg.timeout_s * kSec);
  const bool ps = self_name == "ps";
  touch(bar / fmt::format("ready.{}", self_name));
  for (;;) {
    auto m = missing(bar, "ready", n);
    std::vector<std::string> names;
    for (size_t r : m) names.push_back(std::to_string(r));
    for (const auto& a : rk.wait_also)
      if (!fs::exists(bar / fmt::format("ready.{}", a))) names.push_back(a);
    if (names.empty()) break;
    if (monotonic_now() >= deadline)
      throw RuntimeError(fmt::format("{}: timed out after {} s waiting for ready of {}", rk.who, cfg.timeout_s,
                                     fmt::join(names, ", ")));
    eng.poll(2 * kMs);
  }
  eng.start();
  rk.started();
  std::string touched;
  for (;;) {
    rk.tick();
    if (rk.stopped()) return {};
    const bool mine = rk.done();
    if (mine && !ps) {
      const std::string f = rk.done_file ? rk.done_file() : fmt::format("done.{}", self_name);  // a rank's done_name(R, 0)
      if (f != touched) touch(bar / f);
      touched = f;
    }
    std::vector<std::string> waiting;  // done files still missing
    if (mine || ps) {
      std::vector<std::string> all;
      if (rk.done_files) all = rk.done_files();
      else
        for (size_t r = 0; r < n; ++r) all.push_back(done_name(static_cast<uint16_t>(r), 0));
      for (const auto& f : all)
        if (!fs::exists(bar / f)) waiting.push_back(f);
      if (waiting.empty()) break;  // every rank is done (the PS is no longer needed)
    }
    if (monotonic_now() >= deadline) {
      if (mine || ps)
        throw RuntimeError(fmt::format("{}: timed out after {} s waiting for {}", rk.who, cfg.timeout_s, fmt::join(waiting, ", ")));
      throw RuntimeError(fmt::format("{}: timed out after {} s; {}", rk.who, cfg.timeout_s, rk.describe()));
    }
    eng.poll(mine || ps ? 2 * kMs : 10 * kMs);
  }
  // Every rank is done: stale timers fire and are ignored; nothing may re-arm or stay in flight.
  const Time drain_until = std::min(deadline, monotonic_now() + 2 * kSec);
  while ((eng.pending_timers() || eng.packets_in_use()) && monotonic_now() < drain_until) eng.poll(5 * kMs);
  std::vector<std::string> leaks;
  if (eng.pending_timers()) leaks.push_back(fmt::format("{} timers still pending", eng.pending_timers()));
  if (eng.packets_in_use()) leaks.push_back(fmt::format("{} packets still held", eng.packets_in_use()));
  return leaks;
}

void write_report(const RingWorkerConfig& cfg, const std::string& who, const nlohmann::json& rep) {
  if (cfg.report.empty()) return;
  std::ofstream f(cfg.report);
  f << rep.dump(1) << "\n";
  if (!f) throw RuntimeError(fmt::format("{}: cannot write the report {}", who, cfg.report));
}

nlohmann::json worker_stats_json(const host::WorkerStats& s) {
  return {{"sent", s.sent}, {"retransmits", s.retransmits}, {"reminders", s.reminders}, {"timeouts", s.timeouts},
          {"fast_retransmits", s.fast_retransmits}, {"acks", s.acks}, {"dup_acks", s.dup_acks},
          {"grads_to_ps", s.grads_to_ps}, {"results_to_ps", s.results_to_ps}, {"malformed", s.malformed},
          {"foreign", s.foreign}, {"rate_syncs", s.rate_syncs}};
}

// ATP over racks: one worker (host::WorkerNode, the simulator's) whose
// datagrams all go to its first hop on the tree: its rack's ToR, or the PS
// in a rack without INA.
int run_tree_worker(const RingWorkerConfig& cfg, const RingLayout& L, const std::optional<DatagramKey>& tag_key) {
  const size_t n = L.n();
  const std::string who = fmt::format("ina ring-worker {} job {} rank {}", L.scheme, L.job, cfg.rank);
  const uint64_t elems = cfg.bytes / 4;
  const size_t rack = L.rack_of(cfg.rank);
  EngineConfig ec;
  ec.mode = EngineMode::Host;
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  const schemes::AtpTree tree = L.atp_tree();
  ec.bind = L.workers[cfg.rank];
  ec.gateway = L.racks[rack].ina ? *L.racks[rack].sw : *L.ps;
  use_datagram_key(ec, tag_key);
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  use_datagram_key(eng, L.job, tag_key);
  host::WorkerConfig w;
  host::profile("runtime").apply(w);
  w.job = L.job;
  w.rank = static_cast<uint8_t>(cfg.rank);
  w.nworkers = static_cast<uint8_t>(n);
  w.self = RingLayout::worker_id(cfg.rank);
  w.aggregator = tree.first.at(cfg.rank);
  w.ps = L.ps_id();
  w.switches = tree.switches;  // as the simulator's trees: a result passing an INA switch leaves it as that switch's
  w.payload_values = L.payload;
  w.min_rto = std::max(w.min_rto, cfg.min_rto);
  w.init_window = window_packets(cfg.window_kb > 0 ? cfg.window_kb : kDefaultWindowKb, kHeaderBytes + 4u * L.payload);
  if (!L.rates_gbps.empty()) {  // a planned rate (GRID), of frames on the link
    w.rate_gbps = L.rates_gbps[cfg.rank];
    w.wire_bytes = static_cast<uint32_t>(kHeaderBytes + 4u * L.payload + kLinkOverheadBytes);
  }
  host::WorkerNode node(w);
  node.set_id(w.self);
  auto tensor = std::make_shared<host::SyntheticTensor>(mix(cfg.seed, 0x7a11 + L.job), cfg.rank, static_cast<unsigned>(n));
  std::vector<Time> start, end;
  start.push_back(0);
  node.submit(tensor, elems);
  node.set_on_complete([&](Time now, Effects& fx) {
    while (end.size() < node.completed()) end.push_back(now);
    if (node.completed() < cfg.iterations && !node.transport().busy()) {
      start.push_back(now);
      node.submit(tensor, elems);
      node.transport().pump(now, fx);
    }
  });
  eng.add_node(node);
  Rank rk{who, {"ps"}, [&] { return node.completed() >= cfg.iterations; },
          [&] { return fmt::format("allreduces done: {} of {}", node.completed(), cfg.iterations); },
          [&] { start.front() = eng.now(); }};
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, std::to_string(cfg.rank));
  const uint64_t expected = elems * cfg.iterations;
  if (tensor->checked() != expected) leaks.push_back(fmt::format("{} of {} result values written", tensor->checked(), expected));
  nlohmann::json iters = nlohmann::json::array();
  for (size_t k = 0; k < end.size(); ++k) iters.push_back(to_ms(end[k] - start[k]) / 1000);
  const double seconds = end.empty() ? 0 : to_ms(end.back() - start.front()) / 1000;
  const auto& st = node.transport().stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"rank", cfg.rank}, {"workers", n},
                        {"bytes", cfg.bytes}, {"iterations", cfg.iterations}, {"verified", tensor->checked()},
                        {"expected", expected}, {"mismatches", tensor->mismatches()}, {"allreduce_seconds", seconds},
                        {"iteration_seconds", iters}, {"done", node.completed() >= cfg.iterations},
                        {"initial_window_packets", node.transport().config().init_window},
                        {"first_hop", w.aggregator}, {"paced_gbps", w.rate_gbps},
                        {"pending_timers", eng.pending_timers()}, {"packets_in_use", eng.packets_in_use()},
                        {"leaks", leaks},
                        {"stats", {{"ring", {{"retransmits", st.retransmits}}}, {"worker", worker_stats_json(st)},
                                   {"engine", eng.stats().to_json()},
                                   {"transport", {{"malformed", st.malformed}, {"foreign", st.foreign}}}}}};
  write_report(cfg, who, rep);
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} of {} values in {:.3f} s, {} exact of {}, {} differ; {}",
                             counted(node.completed(), "allreduce"), elems, seconds,
                             tensor->checked() - tensor->mismatches(), expected,
                             tensor->mismatches(), counted(st.retransmits, "retransmit")).c_str());
  if (tensor->mismatches()) return 3;
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  return leaks.empty() ? 0 : 1;
}

// The PS's results down the tree (ATP over racks). In the simulator the PS's
// result (addressed to the job's multicast group) follows the engine's
// multicast tree to every worker, freeing aggregators at the INA switches it
// passes; the runtime has no such tree, so each result goes down the
// aggregation tree as a parent's: a copy addressed to each of the PS's
// children (the root ToR, which frees its aggregator and passes it on:
// dataplane/switch.cpp) and one to each rank whose first hop is the PS.
class DownTheTree final : public Effects {
 public:
  DownTheTree(const schemes::AtpTree& t, const std::vector<NodeId>& workers) {
    const schemes::AtpTree::Entry& e = *t.find(t.ps);
    to_ = e.children;
    for (size_t r = 0; r < workers.size(); ++r)
      if (e.direct.test(static_cast<unsigned>(r))) to_.push_back(workers[r]);
  }
  Effects* in = nullptr;
  Packet* alloc() override { return in->alloc(); }
  void free(Packet* p) override { in->free(p); }
  void set_timer(Time at, uint64_t token) override { in->set_timer(at, token); }
  void send(Packet* p) override {
    if (p->h.dst != kMulticast) return in->send(p);
    for (size_t k = 0; k + 1 < to_.size(); ++k) {
      Packet* c = in->alloc();
      c->h = p->h;
      std::memcpy(c->payload(), p->payload(), 4u * p->h.count);
      c->h.dst = to_[k];
      in->send(c);
    }
    p->h.dst = to_.back();  // the tree has a root: never empty
    in->send(p);
  }

 private:
  std::vector<NodeId> to_;  // the PS's children, then its direct ranks
};

// ATP over racks: the PS (host::ParameterServer), above the root ToR, with
// its own link to every rank whose first hop it is (a rack without INA).
int run_tree_ps(const RingWorkerConfig& cfg, const RingLayout& L, const std::optional<DatagramKey>& tag_key) {
  const std::string who = fmt::format("ina ring-worker {} job {} PS", L.scheme, L.job);
  const schemes::AtpTree tree = L.atp_tree();
  EngineConfig ec;
  ec.mode = EngineMode::Router;  // the root ToR, and the ranks whose first hop it is
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  ec.bind = *L.ps;
  use_datagram_key(ec, tag_key);
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  use_datagram_key(eng, L.job, tag_key);
  for (size_t r = 0; r < L.n(); ++r) eng.set_route(RingLayout::worker_id(r), L.ps_route(RingLayout::worker_id(r)));
  for (NodeId sw : tree.switches) eng.set_route(sw, L.ps_route(sw));
  for (const Endpoint& e : L.ps_relays()) eng.add_relay(e);  // they forward packets with their senders' ids
  host::PsConfig pc;
  host::profile("runtime").apply(pc);
  pc.job = L.job;
  for (size_t r = 0; r < L.n(); ++r) pc.workers.push_back(RingLayout::worker_id(r));
  pc.sw = kNoNode;
  pc.more_switches = tree.switches;  // the reminder fetches from every INA ToR (as the simulator's trees)
  pc.payload_values = L.payload;
  if (cfg.ps_min_timeout > 0) pc.min_timeout = cfg.ps_min_timeout;
  // Every completion goes down the tree: a child ToR frees a task's
  // aggregator only when the result passes it as its parent's (a unicast from
  // the PS to one waiting worker is only forwarded there).
  pc.targeted_known_results = false;
  pc.remember_completed = true;  // an entry left open is a leak unless a late copy opened it
  host::ParameterServer ps(pc);
  // The PS behind a counter of the retransmitted gradients that reach it (a
  // retransmission, like a duplicate, can come after its task's result) and
  // of the gradients straight from the ranks whose first hop it is, its
  // results going down the tree.
  struct OnTree final : Node {
    OnTree(Node& n, const schemes::AtpTree& t, const std::vector<NodeId>& workers)
        : inner(n), down(t, workers), direct(t.find(t.ps)->direct) {}
    void on_packet(Packet* p, Time now, Effects& fx) override {
      const bool data = p->h.type == PktType::Data;
      resends += data && p->h.has(flag::kResend);
      from_direct += data && p->h.rank < kRankBits && p->h.src == RingLayout::worker_id(p->h.rank) && direct.test(p->h.rank);
      down.in = &fx;
      inner.on_packet(p, now, down);
    }
    void on_timer(uint64_t token, Time now, Effects& fx) override {
      down.in = &fx;
      inner.on_timer(token, now, down);
    }
    void on_start(Time now, Effects& fx) override {
      down.in = &fx;
      inner.on_start(now, down);
    }
    Node& inner;
    DownTheTree down;
    RankBits direct;
    uint64_t resends = 0, from_direct = 0;
  } counted(ps, tree, pc.workers);
  ps.set_id(L.ps_id());
  counted.set_id(L.ps_id());
  eng.add_node(counted);
  Rank rk{who, {}, [] { return false; }, [&] { return fmt::format("{} tasks open", ps.entries()); }};
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, "ps");
  // Every rank is done and checked every value. An entry still open for a
  // task the PS had completed was opened by a late copy (a duplicated,
  // held-back or retransmitted gradient, or one a reminder asked for, that
  // came after the result: injected faults, or a worker's or the PS's
  // timeout on a busy machine); its reminder would close it (the ranks
  // answer that they retired the result), and its timer is the PS's one
  // pending timer. Any other open entry is a leak.
  std::vector<std::string> late;
  const size_t late_n = ps.late_entries(), stuck = ps.entries() - late_n;
  if (stuck) leaks.push_back(fmt::format("{} PS entries still open", stuck));
  if (late_n) {
    late.push_back(fmt::format("{} PS entries opened by late copies", late_n));
    if (!stuck)  // the pending reminder timer is theirs
      std::erase_if(leaks, [&](const std::string& l) {
        if (l.find("timers still pending") == std::string::npos) return false;
        late.push_back(l);
        return true;
      });
  }
  const auto& st = ps.stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"role", "ps"}, {"leaks", leaks}, {"left_by_late_copies", late},
                        {"entries", ps.entries()}, {"resends_in", counted.resends},
                        {"data_from_direct_ranks", counted.from_direct},
                        {"stats", {{"ps", {{"data_in", st.data_in}, {"completions", st.completions},
                                           {"duplicates", st.duplicates}, {"timeout_reminders", st.timeout_reminders},
                                           {"worker_reminders", st.worker_reminders}, {"fetches", st.fetches},
                                           {"malformed", st.malformed}, {"foreign", st.foreign}}},
                                   {"engine", eng.stats().to_json()}}}};
  if (st.malformed || st.foreign) leaks.push_back(fmt::format("refused {} malformed and {} foreign packets", st.malformed, st.foreign));
  rep["leaks"] = leaks;
  write_report(cfg, who, rep);
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} tasks completed at the PS, {} data packets in", st.completions, st.data_in).c_str());
  return leaks.empty() ? 0 : 1;
}

// Fault injection (--crash-at-op K): in front of the rank's endpoint, it
// crashes the endpoint for good after `after` packets received in op K, or
// when op K ends if fewer came.
class Crasher final : public Node {
 public:
  Crasher(host::RingEndpoint& ep, size_t op, uint64_t after) : ep_(ep), op_(op), after_(after) { set_id(ep.id()); }
  void on_start(Time now, Effects& fx) override {
    ep_.on_start(now, fx);
    check();
  }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    const bool in_op = ep_.op() == op_;
    ep_.on_packet(p, now, fx);
    if (in_op) ++seen_;
    check();
  }
  void on_timer(uint64_t token, Time now, Effects& fx) override {
    ep_.on_timer(token, now, fx);
    check();
  }

 private:
  void check() {
    if (!ep_.crashed() && (ep_.op() > op_ || (ep_.op() == op_ && seen_ >= after_))) ep_.crash();
  }
  host::RingEndpoint& ep_;
  size_t op_;
  uint64_t after_, seen_ = 0;
};

// Writes `text` to a temporary file of rank `rank` beside `p` (two ranks
// never share one). Returns its path.
fs::path write_temp(const fs::path& p, uint16_t rank, const std::string& text) {
  const fs::path tmp = fmt::format("{}.tmp.{}", p.string(), rank);
  std::ofstream f(tmp);
  f << text;
  if (!f) throw RuntimeError(fmt::format("cannot write {}", tmp.string()));
  return tmp;
}

// Replaces `p` by `text` at once (a reader sees the old or the new text).
void write_atomic(const fs::path& p, uint16_t rank, const std::string& text) { fs::rename(write_temp(p, rank, text), p); }



std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A ring rank's side of failure handling (ring_worker.hpp, "Failures"):
// heartbeats, detection, the control node's re-plan and its distribution,
// and the survivors' reconfiguration.
class Failover {
 public:
  // `credential`: the job's key, for the ToRs' reconfiguration (a layout with INA ToRs).
  Failover(const RingWorkerConfig& cfg, const RingLayout& L, UdpEngine& eng, Node& node, host::RingEndpoint& ep,
           host::SyntheticTensor& tensor, uint64_t elems, std::string who, std::optional<Key> credential)
      : cfg_(cfg), L_(L), eng_(eng), node_(node), ep_(ep), tensor_(tensor), elems_(elems), who_(std::move(who)),
        credential_(credential),
        bar_(cfg.barrier), me_(static_cast<uint16_t>(cfg.rank)),
        ag_(me_, std::max<Time>(1, static_cast<Time>(cfg.fail_detect_ms * kMs)), all_ranks(L.n())) {
    for (size_t r = 0; r < L.n(); ++r) m_.nodes.push_back(RingLayout::worker_id(r));
    for (size_t q = 0; q < L.racks.size(); ++q) {
      m_.racks.push_back(L.racks[q].ranks);
      m_.tors.push_back(L.serving_tor(q) ? L.tor_id(q) : kNoNode);
    }
    detect_ = static_cast<Time>(cfg.fail_detect_ms * kMs);
    period_ = std::max<Time>(5 * kMs, detect_ / 10);
    steps0_ = host::ring_steps(ep.config().stages, ep.config().rank);
  }

  void tick() {
    if (detect_ <= 0 || ep_.crashed()) return;
    const Time now = monotonic_now();
    if (start_ == 0) start_ = now;
    beat(now);
    if (now - check_at_ < period_) return;
    check_at_ = now;
    const uint8_t next = static_cast<uint8_t>(m_.epoch + 1);
    // The control node's membership (apply() refuses to go on in a rank it leaves out).
    if (auto text = read_text(bar_ / fmt::format("membership.{}.json", next))) return apply(*text, next);
    watch(now);
    // This rank's state for the next epoch: whom it finds silent, and its op; withdrawn when nobody is.
    const fs::path state = bar_ / fmt::format("state.{}.{}", next, me_);
    if (ag_.suspects().empty()) {
      if (!state_.empty()) fs::remove(state);
      state_.clear();
      return;
    }
    const std::string text = nlohmann::json{{"failed", ag_.suspects()}, {"op", ep_.op()}}.dump();
    if (text != state_) write_atomic(state, me_, text);
    state_ = text;
    if (ag_.is_control()) distribute(next);
  }

  // This rank's heartbeat (every period).
  void beat(Time now) {
    if (now - beat_at_ < period_) return;
    write_atomic(bar_ / fmt::format("alive.{}", me_), me_, std::to_string(++beats_));
    beat_at_ = now;
  }

  std::string done_file() const { return done_name(me_, m_.epoch); }
  std::vector<std::string> done_files() const {
    std::vector<std::string> v;
    for (uint16_t r : ag_.members()) v.push_back(done_name(r, m_.epoch));
    return v;
  }
  std::string describe() const {
    if (ag_.suspects().empty()) return fmt::format("epoch {}", m_.epoch);
    return fmt::format("epoch {}, ranks {} silent, {}", m_.epoch, fmt::join(ag_.suspects(), ", "),
                       ag_.is_control() ? fmt::format("control node waiting for {}", waiting_) : "waiting for the new membership");
  }
  nlohmann::json report() const {
    return {{"epoch", m_.epoch}, {"failed", failed_all_}, {"restart_op", restart_}, {"survivors", ag_.members()},
            {"control_node", control_of_last_}, {"verified_before_restart", verified_before_},
            {"steps_per_allreduce_epoch0", steps0_}, {"heartbeats", beats_}, {"suspicions_withdrawn", ag_.withdrawn()},
            {"detected_after_s", detected_s_}, {"reconfigured_after_s", applied_s_}};  // since this rank's first op began
  }
  size_t restart_op() const { return restart_; }
  uint8_t epoch() const { return m_.epoch; }

 private:
  static std::vector<uint16_t> all_ranks(size_t n) {
    std::vector<uint16_t> v;
    for (size_t r = 0; r < n; ++r) v.push_back(static_cast<uint16_t>(r));
    return v;
  }

  // A look at the members' heartbeats (host::FailureAgreement decides whom they show silent).
  void watch(Time now) {
    std::vector<host::FailureAgreement::Beat> beats;
    for (uint16_t r : ag_.members()) {
      if (r == me_) continue;
      host::FailureAgreement::Beat b;
      b.rank = r;
      b.done = fs::exists(bar_ / done_name(r, m_.epoch));
      if (!b.done) b.count = std::strtoull(read_text(bar_ / fmt::format("alive.{}", r)).value_or("0").c_str(), nullptr, 10);
      beats.push_back(b);
    }
    const bool none_before = ag_.suspects().empty();
    if (!ag_.observe(now, beats)) return;
    if (none_before) detected_s_ = to_ms(now - start_) / 1000;
    if (cfg_.log)
      std::fprintf(stderr, "%s: epoch %u: silent for %.0f ms: ranks [%s]\n", who_.c_str(), static_cast<unsigned>(m_.epoch),
                   cfg_.fail_detect_ms, fmt::format("{}", fmt::join(ag_.suspects(), ", ")).c_str());
  }

  // The control node: the members' published states; once
  // host::FailureAgreement finds that every member it does not suspect names
  // the same silent ranks, the re-plan, the ToRs, then the membership file.
  void distribute(uint8_t next) {
    std::map<uint16_t, host::FailureAgreement::Published> published;
    for (uint16_t r : ag_.members()) {
      if (r == me_) continue;
      const auto text = read_text(bar_ / fmt::format("state.{}.{}", next, r));
      // Another rank's file: nested too deep, it is as malformed as any other (core/json_depth.hpp).
      const auto j = text && json_nesting_depth(*text) <= kMaxJsonDepth ? nlohmann::json::parse(*text, nullptr, false)
                                                                        : nlohmann::json();
      try {
        if (j.is_object()) published[r] = {j.at("failed").get<std::vector<uint16_t>>(), j.at("op").get<size_t>()};
      } catch (const nlohmann::json::exception&) {
        // half-written or foreign: as if not yet published
      }
    }
    const auto d = ag_.decide(published, ep_.op());
    waiting_ = fmt::format("ranks {} to find ranks {} silent too", fmt::join(d.waiting, ", "), fmt::join(ag_.suspects(), ", "));
    if (!d.act) return;
    const auto& scheme = L_.scheme_info();
    const host::RingFailover fo = host::ring_failover(
        m_, d.failed, d.ops,
        [&](size_t n, const std::vector<std::vector<uint16_t>>& rk, const std::vector<NodeId>& tr) {
          return schemes::ring_plan(scheme, n, rk, tr, elems_);
        });
    // The ToRs first: a survivor's first packet of the new epoch must find its
    // ToR ready. A switch answers a repeated identical request with success,
    // so an error (this call's, or a control node's that failed in between)
    // is retried at the next look; each call is short and the heartbeat goes
    // on between them, so the others do not take this rank for failed.
    const Time call_timeout = std::clamp<Time>(detect_ / 4, 10 * kMs, kSec);
    for (const auto& t : fo.tors) {
      size_t q = 0;
      while (q < L_.racks.size() && L_.tor_id(q) != t.tor) ++q;
      if (q == L_.racks.size() || !L_.racks[q].sw) throw RuntimeError(fmt::format("{}: ToR {} is not in the layout", who_, t.tor));
      if (!credential_) throw RuntimeError(fmt::format("{}: control node: no job credential for ToR {}", who_, t.tor));
      ReconfigureRequest rq;
      rq.job = L_.job;
      rq.epoch = fo.next.epoch;
      rq.workers.assign(fo.next.nodes.begin(), fo.next.nodes.end());
      rq.rack = t.rack;
      rq.upstream = t.upstream;
      beat(monotonic_now());
      try {
        reconfigure_switch(*L_.racks[q].sw, call_timeout, *credential_, rq);
      } catch (const RuntimeError& e) {
        waiting_ = fmt::format("ToR {} to take epoch {} (retrying: {})", L_.racks[q].sw->str(), fo.next.epoch, e.what());
        if (cfg_.log) std::fprintf(stderr, "%s: control node: %s\n", who_.c_str(), waiting_.c_str());
        return;
      }
    }
    std::vector<uint16_t> survivors;
    for (uint16_t k : fo.survivors) survivors.push_back(ag_.members()[k]);
    std::vector<int> tors;
    for (NodeId t : fo.next.tors) tors.push_back(t == kNoNode ? -1 : int{t});
    const std::string text = nlohmann::json{{"epoch", fo.next.epoch}, {"control_node", me_}, {"failed", ag_.suspects()},
                                            {"survivors", survivors}, {"nodes", fo.next.nodes}, {"racks", fo.next.racks},
                                            {"tors", tors}, {"serving", fo.next.serving},
                                            {"restart_op", fo.restart_op}}.dump();
    const fs::path file = bar_ / fmt::format("membership.{}.json", next);
    if (!publish_once(file.string(), me_, text)) {
      // Another control node published first: its membership is the one.
      const auto theirs = read_text(file);
      if (!theirs) throw RuntimeError(fmt::format("{}: cannot read {}", who_, file.string()));
      return apply(*theirs, next);
    }
    if (cfg_.log)
      std::fprintf(stderr, "%s: control node: epoch %u without ranks [%s], %zu survivors restart at op %zu; %zu ToRs reconfigured\n",
                   who_.c_str(), static_cast<unsigned>(fo.next.epoch), fmt::format("{}", fmt::join(ag_.suspects(), ", ")).c_str(),
                   survivors.size(), fo.restart_op, fo.tors.size());
    apply(text, next);
  }

  // A survivor: the control node's membership of epoch `next`.
  void apply(const std::string& text, uint8_t next) {
    const fs::path file = bar_ / fmt::format("membership.{}.json", next);
    if (const size_t d = json_nesting_depth(text); d > kMaxJsonDepth)
      throw RuntimeError(fmt::format("{}: {} is malformed: JSON nested {} levels deep; the limit is {}", who_,
                                     file.string(), d, kMaxJsonDepth));
    const auto j = nlohmann::json::parse(text, nullptr, false);
    host::RingMembership m;
    std::vector<uint16_t> survivors;
    size_t restart = 0;
    uint16_t ctl = 0;
    std::vector<uint16_t> failed;
    try {
      failed = j.at("failed").get<std::vector<uint16_t>>();
      if (j.at("epoch").get<unsigned>() != next)
        throw RuntimeError(fmt::format("field 'epoch' = {}: the file is epoch {}'s", j.at("epoch").dump(), next));
      survivors = j.at("survivors").get<std::vector<uint16_t>>();
      m.nodes = j.at("nodes").get<std::vector<NodeId>>();
      m.racks = j.at("racks").get<std::vector<std::vector<uint16_t>>>();
      for (int t : j.at("tors").get<std::vector<int>>()) m.tors.push_back(t < 0 ? kNoNode : static_cast<NodeId>(t));
      m.serving = j.at("serving").get<std::vector<NodeId>>();
      restart = j.at("restart_op").get<size_t>();
      ctl = j.at("control_node").get<uint16_t>();
    } catch (const std::exception& e) {
      throw RuntimeError(fmt::format("{}: {} is malformed: {}", who_, file.string(), e.what()));
    }
    m.epoch = next;
    const std::string problem = host::membership_problem(m_, ag_.members(), m, survivors, restart, cfg_.iterations);
    if (!problem.empty()) throw RuntimeError(fmt::format("{}: {}: {}", who_, file.string(), problem));
    const auto it = std::find(survivors.begin(), survivors.end(), me_);
    if (it == survivors.end())
      throw RuntimeError(fmt::format("{}: the control node's epoch {} excludes this rank (its heartbeat stalled for "
                                     "--fail-detect-ms {}): it stops", who_, next, cfg_.fail_detect_ms));
    const auto rank = static_cast<uint16_t>(it - survivors.begin());
    auto plan = schemes::ring_plan(L_.scheme_info(), survivors.size(), m.racks, m.tors, elems_);
    verified_before_ += tensor_.checked();
    tensor_.set_contributors(std::vector<unsigned>(survivors.begin(), survivors.end()));
    eng_.invoke(node_, [&](Time now, Effects& fx) {
      // Runtime only: dropping the backoff inside RingEndpoint::reconfigure
      // for both engines changes the simulator's results (ina sim
      // scenarios/rina/failure.toml: events 4295993 -> 4295992 and more), and
      // the simulator reconfigures every survivor at once, where no first
      // packet of the new epoch is dropped as stale.
      ep_.forget_backoff();
      ep_.reconfigure(m.nodes, rank, std::move(plan[rank]), next, restart, now, fx);
    });
    failed_all_.insert(failed_all_.end(), failed.begin(), failed.end());
    applied_s_ = to_ms(monotonic_now() - start_) / 1000;
    ag_.adopt(std::move(survivors));
    m_ = std::move(m);
    restart_ = restart;
    control_of_last_ = ctl;
    state_.clear();
    if (cfg_.log)
      std::fprintf(stderr, "%s: epoch %u: rank %u of %zu, restarting at op %zu\n", who_.c_str(), static_cast<unsigned>(next),
                   static_cast<unsigned>(rank), ag_.members().size(), restart);
  }

  const RingWorkerConfig& cfg_;
  const RingLayout& L_;
  UdpEngine& eng_;
  Node& node_;
  host::RingEndpoint& ep_;
  host::SyntheticTensor& tensor_;
  uint64_t elems_;
  std::string who_;
  std::optional<Key> credential_;
  fs::path bar_;
  uint16_t me_;
  host::FailureAgreement ag_;  // its members: original ranks by current rank
  host::RingMembership m_;
  Time detect_ = 0, period_ = 0, beat_at_ = -kSec * 1000, check_at_ = -kSec * 1000;
  uint64_t beats_ = 0;
  std::string state_;  // this rank's state file as written ("" : none)
  std::string waiting_;
  std::vector<uint16_t> failed_all_;
  size_t restart_ = 0;
  int control_of_last_ = -1;
  uint64_t verified_before_ = 0, steps0_ = 0;
  Time start_ = 0;
  double detected_s_ = 0, applied_s_ = 0;
};

}  // namespace

bool publish_once(const std::string& path, uint16_t rank, const std::string& text) {
  const fs::path p(path);
  const fs::path tmp = write_temp(p, rank, text);
  const int rc = ::link(tmp.c_str(), p.c_str());
  const int err = errno;
  fs::remove(tmp);
  if (rc == 0) return true;
  if (err == EEXIST) return false;
  throw RuntimeError(fmt::format("cannot publish {}: {}", p.string(), std::strerror(err)));
}

int run_ring_worker(const RingWorkerConfig& cfg) {
  const RingLayout L = RingLayout::read(cfg.layout, true);
  const size_t n = L.n();
  if (cfg.ps && !L.tree())
    throw InputError(fmt::format("--ps: the layout {} runs {}, which has no PS", cfg.layout, L.scheme));
  if (!cfg.ps && cfg.rank >= n)
    throw InputError(fmt::format("--rank {}: the layout {} has ranks 0..{}", cfg.rank, cfg.layout, n - 1));
  if (cfg.bytes < 4 || cfg.bytes % 4) throw InputError(fmt::format("--size must be a positive multiple of 4 bytes, got {}", cfg.bytes));
  if (cfg.iterations < 1) throw InputError("--iterations must be >= 1");
  if (cfg.barrier.empty()) throw InputError("--barrier DIR is required (a directory every rank of the job shares)");
  cfg.faults.validate();
  const fs::path bar(cfg.barrier);
  if (!fs::is_directory(bar)) throw InputError(fmt::format("--barrier {}: not a directory", cfg.barrier));
  // A file of another run's end or failover (no rank of this run writes one
  // before every rank, this one included, is ready): a new run would take it
  // for its own (an old membership, a done rank).
  if (cfg.ps && fs::exists(bar / "ready.ps"))
    throw InputError(fmt::format("--barrier {}: already holds ready.ps from another run; give a fresh directory", cfg.barrier));
  for (const auto& e : fs::directory_iterator(bar)) {
    const std::string f = e.path().filename().string();
    for (const char* stale : {"done.", "alive.", "state.", "membership."})
      if (f.starts_with(stale))
        throw InputError(fmt::format("--barrier {}: already holds {} from another run; give a fresh directory", cfg.barrier, f));
  }
  const bool failover = cfg.fail_detect_ms > 0 || cfg.crash_at_op >= 0;
  if (!(cfg.fail_detect_ms == 0 || (cfg.fail_detect_ms >= kMinFailDetectMs && cfg.fail_detect_ms <= 1e6)))
    throw InputError(fmt::format("--fail-detect-ms {}: must be 0 (off) or in [{}, 1e6] ms (heartbeats are looked at "
                                 "every 10 ms; a shorter time would never detect anything)", cfg.fail_detect_ms,
                                 kMinFailDetectMs));
  if (cfg.crash_at_op >= 0 && static_cast<unsigned>(cfg.crash_at_op) >= cfg.iterations)
    throw InputError(fmt::format("--crash-at-op {}: the rank runs ops 0..{} (--iterations {})", cfg.crash_at_op,
                                 cfg.iterations - 1, cfg.iterations));
  std::vector<std::string> given;  // the failure options as given
  if (cfg.fail_detect_ms > 0) given.push_back(fmt::format("--fail-detect-ms {}", cfg.fail_detect_ms));
  if (cfg.crash_at_op >= 0) given.push_back(fmt::format("--crash-at-op {}", cfg.crash_at_op));
  if (failover && (L.tree() || cfg.ps || L.scheme_info().collective == schemes::Collective::Hierarchical))
    throw InputError(fmt::format("{}: {} does not survive a failure (ring schemes whose plan does: rar, rina){}",
                                 fmt::join(given, " "), L.scheme,
                                 L.tree() ? "" : "; h-ar needs racks of equal size, which a failure breaks"));
  if (failover && !L.aggregation.empty())
    throw InputError(fmt::format("{}: the layout {} has INA switches above the ToR (field 'aggregation'): a group above "
                                 "the ToR cannot lose a worker (not handled, as in the simulator)", fmt::join(given, " "),
                                 cfg.layout));
  if (failover && n < 3)
    throw InputError(fmt::format("{}: a ring of {} ranks cannot lose one", fmt::join(given, " "), n));
  // After a failure the control node (any rank) reconfigures the ToRs with
  // the job's credential: it is read now, not once a rank has failed.
  std::optional<Key> credential;
  if (cfg.fail_detect_ms > 0 && std::any_of(L.racks.begin(), L.racks.end(), [](const auto& r) { return bool(r.sw); }))
    credential = job_credential(cfg, L.job);
  const std::optional<DatagramKey> tag_key = layout_datagram_key(cfg, L);
  if (cfg.ps) return run_tree_ps(cfg, L, tag_key);
  if (L.tree()) return run_tree_worker(cfg, L, tag_key);
  const std::string who = fmt::format("ina ring-worker {} job {} rank {}", L.scheme, L.job, cfg.rank);
  const uint64_t elems = cfg.bytes / 4;
  const auto plan = L.plan(elems);

  EngineConfig ec;
  ec.mode = EngineMode::Router;  // one node; datagrams go to the address of their destination
  ec.payload_values = L.payload;
  ec.faults = cfg.faults;
  ec.bind = L.workers[cfg.rank];
  use_datagram_key(ec, tag_key);
  UdpEngine eng(ec, cfg.udp_fd >= 0 ? UniqueFd(cfg.udp_fd) : UniqueFd());
  use_datagram_key(eng, L.job, tag_key);
  for (size_t r = 0; r < n; ++r)
    if (r != cfg.rank) eng.set_route(RingLayout::worker_id(r), L.workers[r]);
  for (size_t q = 0; q < L.switch_count(); ++q)  // the ToRs, and any INA switch above them
    if (L.serving_switch(q)) {
      eng.set_route(L.switch_id(q), *L.switch_addr(q));
      eng.add_relay(*L.switch_addr(q));  // a switch forwards sums and broadcasts with their sender's id
    }

  const bool ina = L.scheme_info().collective == schemes::Collective::RingIna;
  host::RingConfig rc;
  rc.job = L.job;
  rc.rank = static_cast<uint16_t>(cfg.rank);
  for (size_t r = 0; r < n; ++r) rc.nodes.push_back(RingLayout::worker_id(r));
  rc.stages = plan[cfg.rank];
  rc.payload_values = L.payload;
  rc.region = L.region();
  rc.allgather_from_zero = ina;
  rc.min_rto = cfg.min_rto;
  rc.delay_target = cfg.delay_target;
  rc.init_window = window_packets(cfg.window_kb > 0 ? cfg.window_kb : kDefaultWindowKb, kHeaderBytes + 4u * L.payload);
  rc.nic_gbps = cfg.nic_gbps;
  // On the link a datagram also carries its UDP, IPv4 and Ethernet headers.
  rc.wire_bytes = static_cast<uint32_t>(kHeaderBytes + 4u * L.payload + kLinkOverheadBytes);
  rc.ack_wire_bytes = static_cast<uint32_t>(kHeaderBytes + kLinkOverheadBytes);
  rc.seed = mix(cfg.seed, cfg.rank);
  host::RingEndpoint ep(std::move(rc));
  ep.set_id(RingLayout::worker_id(cfg.rank));
  auto tensor = std::make_shared<host::SyntheticTensor>(mix(cfg.seed, 0x7a11 + L.job), cfg.rank, static_cast<unsigned>(n));
  for (unsigned k = 0; k < cfg.iterations; ++k) ep.submit(tensor, elems);
  std::unique_ptr<Crasher> crasher;
  if (cfg.crash_at_op >= 0) crasher = std::make_unique<Crasher>(ep, static_cast<size_t>(cfg.crash_at_op), cfg.crash_after);
  Node& node = crasher ? static_cast<Node&>(*crasher) : static_cast<Node&>(ep);
  eng.add_node(node);
  Failover fo(cfg, L, eng, node, ep, *tensor, elems, who, credential);

  double seconds = 0;
  Rank rk{who, {}, [&] { return ep.done(); },
          [&] {
            return fmt::format("allreduces done: {} of {}; {}{}", ep.completed(), cfg.iterations, ep.describe(),
                               failover ? "; " + fo.describe() : std::string());
          }};
  if (failover) {
    rk.tick = [&] { fo.tick(); };
    rk.stopped = [&] { return ep.crashed(); };
    rk.done_file = [&] { return fo.done_file(); };
    rk.done_files = [&] { return fo.done_files(); };
  }
  std::vector<std::string> leaks = drive(cfg, L, eng, rk, std::to_string(cfg.rank));
  if (ep.crashed()) {
    // Injected: this rank stopped for good; it reports so and leaves (its socket closes with the process).
    nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"rank", cfg.rank}, {"workers", n}, {"crashed", true},
                          {"crashed_in_op", ep.op()}, {"crashed_after_s", to_ms(eng.now() - ep.op_start().front()) / 1000},
                          {"done", false}, {"leaks", nlohmann::json::array()},
                          {"stats", {{"ring", ring_stats_json(ep.stats())}, {"engine", eng.stats().to_json()},
                                     {"transport", {{"malformed", 0}, {"foreign", 0}}}}}};
    write_report(cfg, who, rep);
    if (cfg.log) std::fprintf(stderr, "%s: crashed in op %zu (injected: --crash-at-op %d)\n", who.c_str(), ep.op(), cfg.crash_at_op);
    return 0;
  }
  if (!ep.op_end().empty()) seconds = to_ms(ep.op_end().back() - ep.op_start().front()) / 1000;
  const uint64_t expected = elems * (cfg.iterations - fo.restart_op());
  if (tensor->checked() != expected)
    leaks.push_back(fmt::format("{} of {} result values written", tensor->checked(), expected));
  nlohmann::json iters = nlohmann::json::array();
  for (size_t k = 0; k < ep.op_end().size(); ++k) iters.push_back(to_ms(ep.op_end()[k] - ep.op_start()[k]) / 1000);
  // The last allreduce's steps: each from when it became current to its end
  // (the per-step time of Rina Eq. 1, O + C, as this host saw it).
  nlohmann::json step_seconds = nlohmann::json::array();
  for (const host::RingStepRecord& r : ep.step_log())
    if (r.current != kNever && r.done != kNever) step_seconds.push_back(to_ms(r.done - r.current) / 1000);
  const auto& st = ep.stats();
  nlohmann::json rep = {{"scheme", L.scheme}, {"job", L.job}, {"rank", cfg.rank}, {"workers", n},
                        {"bytes", cfg.bytes}, {"iterations", cfg.iterations}, {"verified", tensor->checked()},
                        {"expected", expected}, {"mismatches", tensor->mismatches()}, {"allreduce_seconds", seconds},
                        {"iteration_seconds", iters}, {"done", ep.done()}, {"steps_per_allreduce", host::ring_steps(ep.config().stages, ep.config().rank)},
                        {"initial_window_packets", ep.config().init_window},
                        {"step_seconds", step_seconds},
                        {"pending_timers", eng.pending_timers()}, {"packets_in_use", eng.packets_in_use()},
                        {"leaks", leaks},
                        {"stats", {{"ring", ring_stats_json(st)}, {"engine", eng.stats().to_json()},
                                   {"transport", {{"malformed", st.malformed}, {"foreign", st.foreign}}}}}};
  rep["stats"]["ring"]["stale_epoch"] = st.stale_epoch;
  if (failover) rep["failover"] = fo.report();
  write_report(cfg, who, rep);
  if (cfg.log)
    std::fprintf(stderr, "%s: %s\n", who.c_str(),
                 fmt::format("{} of {} values in {:.3f} s, {} exact of {}, {} differ; {}",
                             counted(ep.completed(), "allreduce"), elems, seconds,
                             tensor->checked() - tensor->mismatches(), expected,
                             tensor->mismatches(), counted(st.retransmits, "retransmit")).c_str());
  if (tensor->mismatches()) return 3;
  for (const auto& l : leaks) std::fprintf(stderr, "%s: FAILED: %s\n", who.c_str(), l.c_str());
  return leaks.empty() ? 0 : 1;
}

}  // namespace ina::rt
