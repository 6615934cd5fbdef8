#include "runtime/ps_daemon.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include <fmt/format.h>

#include "host/ps.hpp"
#include "dataplane/zebra_layout.hpp"
#include "host/sparse.hpp"
#include "runtime/control.hpp"
#include "schemes/registry.hpp"
#include "wire/kv.hpp"

namespace ina::rt {

struct PsDaemon::Impl {
  PsDaemonConfig cfg;
  Joined joined;
  std::unique_ptr<host::ParameterServer> ps;       // dense schemes
  std::unique_ptr<host::SparsePs> sparse;         // <key, value> schemes (schemes::Scheme::kv())
  std::unique_ptr<UdpEngine> engine;
  UniqueFd stop_fd;
  std::atomic<bool> stopping{false};
  bool finished = false;
  std::string abort_reason;
  // A hot set the switch is sending in chunks (kv::HotRoute::ViaPs): its keys so far.
  HotSetNews hot_in;

  explicit Impl(const PsDaemonConfig& c) : cfg(c) {
    JoinOptions jo;
    jo.sw = cfg.sw;
    jo.role = Role::Ps;
    jo.job = cfg.job;
    jo.nworkers = cfg.nworkers;
    jo.bind_ip = cfg.bind_ip;
    jo.connect_timeout = cfg.connect_timeout;
    jo.rendezvous_timeout = cfg.rendezvous_timeout;
    jo.key = cfg.has_key ? cfg.key : job_key_from_env(cfg.job);
    if (cfg.log) jo.announce = fmt::format("ina: PS of job {}", cfg.job);  // long waits are said on stderr
    jo.assemble_notice_after = cfg.assemble_notice_after;
    joined = join_job(jo);
    const JobAssignment& a = joined.job;
    const schemes::Scheme& scheme = scheme_of(a, cfg.sw);
    Node* node = nullptr;
    if (scheme.kv()) {
      host::SparseConfig sc = sparse_config(a, scheme);  // a.ps is this PS
      sc.min_rto = cfg.min_timeout;
      sparse = std::make_unique<host::SparsePs>(sc);
      node = sparse.get();
    } else {
      host::PsConfig pc;
      pc.job = a.job;
      pc.workers = a.workers;
      pc.sw = a.sw;
      pc.payload_values = a.payload_values;
      pc.min_timeout = cfg.min_timeout;
      pc.targeted_known_results = cfg.targeted_known_results;
      ps = std::make_unique<host::ParameterServer>(pc);
      node = ps.get();
    }
    node->set_id(a.self);
    EngineConfig ec;
    ec.mode = EngineMode::Host;
    ec.payload_values = sparse ? payload_words(a) : a.payload_values;
    ec.gateway = cfg.sw;
    ec.faults = cfg.faults;
    ec.datagram_tags = member_tags(cfg.datagram_auth, a.datagram_auth, fmt::format("the PS of job {}", a.job), cfg.sw.str());
    engine = std::make_unique<UdpEngine>(ec, std::move(joined.udp));
    if (ec.datagram_tags) engine->set_datagram_key(a.job, datagram_key(jo.key, a.datagram_salt));
    engine->add_node(*node);
    stop_fd = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    engine->watch(stop_fd.get(), EPOLLIN, [this](uint32_t) {
      uint64_t v;
      [[maybe_unused]] auto r = ::read(stop_fd.get(), &v, sizeof v);
      stopping = true;
    });
    engine->watch(joined.control.fd(), EPOLLIN, [this](uint32_t) { on_control(); });
    engine->start();
    on_control();  // messages read together with the join's answer (read_control)
  }

  void on_control() {
    const ControlNews n = read_control(joined.control);
    if (!n.error.empty()) {
      abort_reason = n.error;
      return;
    }
    finished |= n.finished;
    for (const HotSetNews& h : n.hot_sets) take_hot_set(h);
    if (!n.aborted.empty()) abort_reason = fmt::format("job {} aborted by the switch: {}", cfg.job, n.aborted);
    if (!n.open && !finished && abort_reason.empty())
      abort_reason = fmt::format("lost the control connection to the switch at {}", cfg.sw.str());
    if (!n.open || finished || !abort_reason.empty()) engine->unwatch(joined.control.fd());
  }

  // A chunk of a hot set the switch installed: once whole, the PS's table
  // for mapping the switch's results back to keys.
  void take_hot_set(const HotSetNews& h) {
    if (!abort_reason.empty()) return;
    if (!sparse || !h.chunk || (h.keys.empty() && h.total != 0) || !h.error.empty()) {
      abort_reason = fmt::format("the switch at {} sent the PS of job {} a hot set it cannot take", cfg.sw.str(), cfg.job);
      return;
    }
    if (h.offset == 0) {
      hot_in = HotSetNews{.from = h.from, .version = h.version, .chunk = true, .total = h.total};
      hot_in.keys.reserve(h.total);
    }
    if (h.from != hot_in.from || h.version != hot_in.version || h.total != hot_in.total || h.offset != hot_in.keys.size()) {
      abort_reason = fmt::format("the switch at {} sent hot set version {} out of order (offset {}, {} of {} keys held)",
                                 cfg.sw.str(), h.version, h.offset, hot_in.keys.size(), hot_in.total);
      return;
    }
    hot_in.keys.insert(hot_in.keys.end(), h.keys.begin(), h.keys.end());
    if (hot_in.keys.size() < hot_in.total) return;
    try {
      sparse->set_table(dp::zebra::heat_table(std::move(hot_in.keys), hot_in.from, hot_in.version, joined.job.kv_registers));
    } catch (const std::exception& e) {
      abort_reason = fmt::format("installing hot set version {} at the PS: {}", hot_in.version, e.what());
    }
    hot_in = HotSetNews{};
  }

};

PsDaemon::PsDaemon(const PsDaemonConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
PsDaemon::~PsDaemon() = default;
UdpEngine& PsDaemon::engine() { return *impl_->engine; }

void PsDaemon::run() {
  Impl& m = *impl_;
  if (m.cfg.log)
    std::fprintf(stderr, "ina ps job %u: serving (node %u, %zu workers, switch %s)\n", m.cfg.job, m.joined.job.self,
                 m.joined.job.workers.size(), m.cfg.sw.str().c_str());
  while (!m.stopping && !m.finished && m.abort_reason.empty()) m.engine->poll(kSec);
  if (!m.abort_reason.empty()) throw RuntimeError(m.abort_reason);
}

void PsDaemon::request_stop() {
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(impl_->stop_fd.get(), &one, sizeof one);
}

nlohmann::json PsDaemon::stats() const {
  if (impl_->sparse) {
    const auto& s = impl_->sparse->stats();
    return {{"job", impl_->cfg.job},
            {"node", impl_->joined.job.self},
            {"iteration", impl_->sparse->iteration()},
            {"held_results", impl_->sparse->held()},
            {"ps",
             {{"kind", "sparse"}, {"data", s.data}, {"pairs", s.pairs}, {"forwarded_pairs", s.forwarded_pairs}, {"duplicates", s.duplicates},
              {"stale", s.stale}, {"malformed", s.malformed}, {"foreign", s.foreign}, {"results_sent", s.results_sent},
              {"retransmits", s.retransmits}, {"result_acks", s.result_acks}, {"overflow", s.overflow},
              {"acks_sent", s.acks_sent}, {"delayed_acks", s.delayed_acks}, {"hot_results", s.hot_results},
              {"hot_pairs", s.hot_pairs}, {"unknown_version", s.unknown_version}}},
            {"engine", impl_->engine->stats().to_json()}};
  }
  const auto& s = impl_->ps->stats();
  return {{"job", impl_->cfg.job},
          {"node", impl_->joined.job.self},
          {"open_entries", impl_->ps->entries()},
          {"ps",
           {{"data_in", s.data_in}, {"completions", s.completions}, {"duplicates", s.duplicates},
            {"superseded", s.superseded}, {"conflicts", s.conflicts}, {"timeout_reminders", s.timeout_reminders},
            {"worker_reminders", s.worker_reminders}, {"fetches", s.fetches}, {"fetch_hits", s.fetch_hits},
            {"grad_requests", s.grad_requests}, {"retired", s.retired}, {"known_results", s.known_results},
            {"unicast_results", s.unicast_results}, {"unneeded_results", s.unneeded_results}, {"malformed", s.malformed},
            {"foreign", s.foreign}, {"max_entries", s.max_entries}}},
          {"engine", impl_->engine->stats().to_json()}};
}

}  // namespace ina::rt
