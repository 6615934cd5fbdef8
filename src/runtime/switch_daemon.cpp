// `ina switch` (switch_daemon.hpp): the daemon's construction (shards,
// sockets, engines, the admission object) and its loop. Its other concepts
// each have a file (switch_impl.hpp lists them).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "runtime/switch_impl.hpp"
#include "wire/kv.hpp"

namespace ina::rt {

std::string why_not_threaded(const schemes::Scheme& scheme, bool layout) {
  if (layout || is_ring_scheme(scheme))
    return fmt::format("scheme {} serves the one job of a static layout (--layout), which cannot be split over switch "
                       "threads by job", scheme.name);
  if (scheme.has_switch_cpu())
    return fmt::format("scheme {} has a switch CPU beside the pipeline (it keeps and retransmits the results of every "
                       "job through one internal port), which is not split over switch threads", scheme.name);
  return {};
}

namespace {

// With --layout a scheme of the static layouts, else one whose jobs join through the control plane.
const schemes::Scheme& find_scheme(const std::string& name, bool layout) {
  if (const schemes::Scheme* s = schemes::lookup(name);
      s && !layout && s->supports(schemes::Engine::Layout) && !s->supports(schemes::Engine::Runtime))
    throw InputError(fmt::format("switch: scheme {} serves one job of a static layout only: give --layout FILE --rack R",
                                 s->name));
  if (const schemes::Scheme* s = schemes::lookup(name);
      s && layout && !s->supports(schemes::Engine::Layout) && s->supports(schemes::Engine::Runtime))
    throw InputError(fmt::format("switch: --layout is for the schemes of static layouts ({}); {} jobs join through the "
                                 "control plane", schemes::names_text(schemes::Engine::Layout), s->name));
  try {
    return schemes::find(name, layout ? schemes::Engine::Layout : schemes::Engine::Runtime);
  } catch (const schemes::UnknownScheme& e) {
    throw InputError(e.what());
  }
}

constexpr unsigned kMaxThreads = kMaxSwitchThreads;

}  // namespace

using switchd::kCpuId;
using switchd::kJobOffset;
using switchd::kMinShardAggregators;
using switchd::kSwitchId;

SwitchDaemon::Impl::Impl(const SwitchDaemonConfig& c)
    : handed{UniqueFd(c.udp_fd), UniqueFd(c.tcp_fd)},
      cfg(c),
      scheme(find_scheme(c.scheme, !c.layout.empty())),
      limits(c.control.resolved(c.threads)) {
  if (!cfg.has_key)
    throw InputError("switch: no switch key: give one (ina switch --key-file FILE, or INA_SWITCH_KEY); "
                     "'ina key new FILE' creates one");
  if (!scheme.factory)
    throw InputError(fmt::format("switch: scheme {} has no switch program (its workers talk to each other directly: "
                                 "run 'ina ring-worker' without a switch)", scheme.name));
  if (is_ring_scheme(scheme) && cfg.layout.empty())
    throw InputError(fmt::format("switch: scheme {} serves a ring job of a static layout: give --layout FILE --rack R",
                                 scheme.name));
  const unsigned T = cfg.threads;
  if (T == 0 || T > kMaxThreads)
    throw InputError(fmt::format("switch: --threads {}: give 1..{}", T, kMaxThreads));
  if (T > 1)
    if (const std::string why = why_not_threaded(scheme, !cfg.layout.empty()); !why.empty())
      throw InputError(fmt::format("switch: --threads {}: {}: run it with --threads 1", T, why));
  if (scheme.isolated && cfg.isolated_regions == 0) throw InputError("switch: isolated_regions must be >= 1");
  if (cfg.share.reclaim_after < 0) throw InputError("switch: reclaim_after must be >= 0");
  for (const auto& [id, r] : cfg.share.job_priority)
    if (r.lo > r.hi) throw InputError(fmt::format("switch: job {}'s priority range {}..{} is empty", id, r.lo, r.hi));
  if (cfg.share.priority.lo > cfg.share.priority.hi)
    throw InputError(fmt::format("switch: the priority range {}..{} is empty", cfg.share.priority.lo, cfg.share.priority.hi));
  for (unsigned k = 0; k < T; ++k) {
    auto sh = std::make_unique<Shard>();
    sh->index = k;
    dp::SwitchConfig pc = cfg.program;
    pc.memory_bytes = cfg.program.memory_bytes / T;
    pc.seed = cfg.program.seed + k;
    if (shared_pool()) {  // the admission bounds of every job (ShareLimits)
      pc.share.fair_quota = cfg.share.job_quota == ShareLimits::kFairQuota;
      pc.share.job_quota = pc.share.fair_quota ? 0 : cfg.share.job_quota;
      pc.share.reclaim_after = cfg.share.reclaim_after;
    }
    sh->program = scheme.make_switch(pc);
    sh->program->set_id(kSwitchId);
    if (T > 1 && sh->program->aggregators() < kMinShardAggregators)
      throw InputError(fmt::format("switch: --threads {} with --memory {}: each switch thread gets {} bytes, {} "
                                   "aggregators of {} values; a thread needs at least {}: give more memory or fewer "
                                   "threads", T, cfg.program.memory_bytes, pc.memory_bytes,
                                   sh->program->aggregators(), cfg.program.payload_values, kMinShardAggregators));
    // The admission object (schemes/admission.hpp): under the isolated
    // policy each shard's memory in isolated_regions regions (so up to
    // isolated_regions live jobs per shard); node ids over the whole switch.
    if (!admission) {
      schemes::Admission::Config ac =
          schemes::Admission::config_of(scheme, sh->program->aggregators(), cfg.isolated_regions, T);
      ac.payload = cfg.program.payload_values;
      ac.reserved = {kSwitchId};
      if (scheme.has_switch_cpu()) ac.reserved.push_back(kCpuId);
      admission.emplace(std::move(ac));
      if (const std::string e = admission->memory_error(); !e.empty()) throw InputError("switch: " + e);
    }
    shards.push_back(std::move(sh));
  }
  program = shards[0]->program.get();
  // 118 pairs: 36 B header + 8 B KV header + 118 x 12 B + the 8 B tag + 28 B
  // of IP/UDP = 1496 B, a 1500-byte IP packet (the emulated cluster's MTU).
  constexpr unsigned kMaxPsPairs = 118;
  if (scheme.kv() && (cfg.kv_ps_pairs > kMaxPsPairs || cfg.kv_ack_every == 0 || cfg.kv_ack_every > 64))
    throw InputError(fmt::format("switch: kv_ps_pairs {} (0..{}: a 1500-byte IP packet) or kv_ack_every {} (1..64) "
                                 "out of range",
                                 cfg.kv_ps_pairs, kMaxPsPairs, cfg.kv_ack_every));
  if (scheme.has_switch_cpu() && cfg.kv_registers == 0) throw InputError("switch: kv_registers must be >= 1");
  // A static layout's job is tagged when its layout has a salt (ring_layout.hpp).
  std::optional<RingLayout> static_layout;
  if (!cfg.layout.empty()) {
    static_layout = RingLayout::read(cfg.layout, false);
    if (cfg.datagram_auth && !static_layout->datagram_salt)
      throw InputError(fmt::format("switch: --datagram-auth with --layout {}: the layout has no field 'datagram_salt', "
                                   "so its job's datagrams are not tagged (ina run --datagram-auth writes one)",
                                   cfg.layout));
    check_static_layout(*static_layout);
  }
  // UDP data and TCP control on one port number: bound here, or handed over
  // already bound (`ina run` binds them first so the layout can name them).
  // With T > 1 threads the other shards' sockets join the UDP socket's
  // reuseport group on the same address, in shard order, and a steering
  // program sends each datagram to shard (job mod T).
  DataAndControl socks;
  if (cfg.udp_fd >= 0 || cfg.tcp_fd >= 0) {
    if (cfg.udp_fd < 0 || cfg.tcp_fd < 0) throw InputError("switch: give both --udp-fd and --tcp-fd, or neither");
    socks = std::move(handed);
    if (local_endpoint(socks.udp.get()).port() != local_endpoint(socks.tcp.get()).port())
      throw InputError(fmt::format("switch: --udp-fd {} and --tcp-fd {} are bound to different ports", cfg.udp_fd, cfg.tcp_fd));
    if (T > 1 && !has_reuseport(socks.udp.get()))
      throw InputError(fmt::format("switch: --threads {} with --udp-fd {}: that socket was bound without "
                                   "SO_REUSEPORT, so the other switch threads cannot share its port: bind it with "
                                   "SO_REUSEPORT (before any other socket on its port) or run --threads 1",
                                   T, cfg.udp_fd));
  } else {
    socks = bind_data_and_control(cfg.listen, 8 << 20, T > 1);
  }
  endpoint = local_endpoint(socks.udp.get());
  listener = std::move(socks.tcp);
  std::vector<UniqueFd> udp;
  udp.push_back(std::move(socks.udp));
  for (unsigned k = 1; k < T; ++k) udp.push_back(bind_udp(endpoint, 8 << 20, true));
  if (T > 1) attach_reuseport_steering(udp[0].get(), kJobOffset, T);
  EngineConfig ec;
  ec.mode = EngineMode::Router;
  ec.payload_values = cfg.program.payload_values;
  if (scheme.kv())
    ec.payload_values = std::max<uint16_t>(
        ec.payload_values, static_cast<uint16_t>(kv::words(std::max<unsigned>(cfg.program.zebra.kv_pairs, cfg.kv_ps_pairs))));
  ec.faults = cfg.faults;
  ec.ecn_backlog_bytes = cfg.ecn_backlog_bytes;
  ec.offload = cfg.offload;
  ec.socket_buffer_bytes = 8 << 20;
  ec.datagram_tags = cfg.datagram_auth || (static_layout && static_layout->datagram_salt);
  for (unsigned k = 0; k < T; ++k) {
    ec.faults.seed = cfg.faults.seed + k;
    shards[k]->engine = std::make_unique<UdpEngine>(ec, std::move(udp[k]));
  }
  engine = shards[0]->engine.get();
  if (static_layout) static_job(std::move(*static_layout));
  for (auto& sh : shards) sh->engine->add_node(*sh->program);
  if (scheme.has_switch_cpu()) {
    cpu = std::make_unique<dp::SwitchCpu>(kSwitchId, cfg.cpu_rto, /*adaptive=*/true);
    cpu->set_id(kCpuId);
    engine->attach(*cpu);
  }
  stop_fd = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  engine->watch(stop_fd.get(), EPOLLIN, [this](uint32_t) {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(stop_fd.get(), &v, sizeof v);
    stopping = true;
  });
  engine->watch(listener.get(), EPOLLIN, [this](uint32_t) { accept_all(); });
  // The connections' deadlines are checked a few times per visitor_timeout.
  sweep_fd = UniqueFd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!sweep_fd) throw RuntimeError(fmt::format("switch: timerfd_create: {}", errno_text(errno)));
  const Time tick = std::clamp<Time>(limits.visitor_timeout / 4, 10 * kMs, 250 * kMs);
  itimerspec its{};
  its.it_interval = {static_cast<time_t>(tick / kSec), static_cast<long>(tick % kSec / kNs)};
  its.it_value = its.it_interval;
  timerfd_settime(sweep_fd.get(), 0, &its, nullptr);
  engine->watch(sweep_fd.get(), EPOLLIN, [this](uint32_t) { sweep(); });
  for (unsigned k = 1; k < T; ++k) {
    Shard& sh = *shards[k];
    sh.wake = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    sh.engine->watch(sh.wake.get(), EPOLLIN, [&sh](uint32_t) { sh.run_commands(); });
  }
  for (auto& sh : shards) sh->engine->start();
}


// Shards 1..T-1 on threads of their own, shard 0 and the control plane on
// the caller's, until request_stop(); then the others are stopped and joined.
void SwitchDaemon::Impl::run() {
  log("serving ({} policy, {} aggregators of {} values{})", scheme.policy, aggregators(), cfg.program.payload_values,
      shards.size() > 1 ? fmt::format(", {} switch threads", shards.size()) : std::string());
  for (size_t k = 1; k < shards.size(); ++k) {
    Shard& sh = *shards[k];
    sh.stopping = false;
    {
      std::lock_guard<std::mutex> l(sh.mu);
      sh.gone = false;
    }
    sh.thread = std::thread([this, &sh] { sh.serve(stop_fd.get()); });
  }
  Shard& s0 = *shards[0];
  s0.start_cpu_clock();
  std::exception_ptr failure;
  try {
    while (!stopping) engine->poll(kSec);
  } catch (...) {
    failure = std::current_exception();
  }
  s0.stop_cpu_clock();
  for (size_t k = 1; k < shards.size(); ++k) {
    Shard& sh = *shards[k];
    sh.stopping = true;
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(sh.wake.get(), &one, sizeof one);
    sh.thread.join();
  }
  if (failure) std::rethrow_exception(failure);
  for (const auto& sh : shards)
    if (!sh->error.empty()) throw RuntimeError(fmt::format("switch thread {}: {}", sh->index, sh->error));
}


SwitchDaemon::SwitchDaemon(const SwitchDaemonConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
SwitchDaemon::~SwitchDaemon() = default;
const Endpoint& SwitchDaemon::endpoint() const { return impl_->endpoint; }
UdpEngine& SwitchDaemon::engine() { return *impl_->engine; }

unsigned SwitchDaemon::threads() const { return static_cast<unsigned>(impl_->shards.size()); }

void SwitchDaemon::run() { impl_->run(); }

std::vector<double> SwitchDaemon::cpu_seconds() const {
  std::vector<double> v;
  for (const auto& sh : impl_->shards) v.push_back(sh->cpu_seconds());
  return v;
}

void SwitchDaemon::request_stop() {
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(impl_->stop_fd.get(), &one, sizeof one);
}

nlohmann::json SwitchDaemon::stats() const { return impl_->stats(); }

}  // namespace ina::rt
