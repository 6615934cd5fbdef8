#include "runtime/control.hpp"

#include <fmt/format.h>

namespace ina::rt {

const char* to_string(Role r) { return r == Role::Worker ? "worker" : "ps"; }

namespace {

std::string who(const JoinOptions& o) {
  return o.role == Role::Worker ? fmt::format("worker rank {} of job {}", o.rank, o.job)
                                : fmt::format("PS of job {}", o.job);
}

JobAssignment parse_ready(const nlohmann::json& m) {
  JobAssignment a;
  try {
    a.job = m.at("job").get<uint16_t>();
    a.self = m.at("self").get<NodeId>();
    a.sw = m.at("switch").get<NodeId>();
    const int ps = m.at("ps").get<int>();
    a.ps = ps < 0 ? kNoNode : static_cast<NodeId>(ps);
    a.workers = m.at("workers").get<std::vector<NodeId>>();
    a.payload_values = m.at("payload").get<uint16_t>();
    a.window_cap = m.at("window_cap").get<uint32_t>();
    a.policy = m.at("policy").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(fmt::format("malformed 'ready' message from the switch: {}", e.what()));
  }
  return a;
}

}  // namespace

Joined join_job(const JoinOptions& o) {
  Joined j;
  j.control = LineChannel(connect_tcp(o.sw, o.connect_timeout, "the switch"));
  Endpoint udp_at = o.bind_ip.empty() ? local_endpoint(j.control.fd()).with_port(0)
                                      : Endpoint::parse(o.bind_ip + ":0");
  j.udp = bind_udp(udp_at, o.udp_buffer_bytes);
  const Endpoint udp = local_endpoint(j.udp.get());
  j.control.send({{"op", "join"}, {"role", to_string(o.role)}, {"job", o.job}, {"rank", o.rank},
                  {"nworkers", o.nworkers}, {"payload", o.payload_values}, {"retain_ops", o.retain_ops},
                  {"udp", udp.str()}});
  const Time deadline = monotonic_now() + o.rendezvous_timeout;
  const std::string peer = fmt::format("the switch at {}", o.sw.str());
  std::string progress = "no other member had joined";
  for (;;) {
    nlohmann::json m;
    if (!j.control.wait_message(m, deadline, peer))
      throw RuntimeError(fmt::format("{}: timed out after {:.1f} s waiting at {} for job {} to assemble ({})", who(o),
                                     to_ms(o.rendezvous_timeout) / 1000, peer, o.job, progress));
    const std::string op = m.value("op", "");
    if (op == "ready") {
      j.job = parse_ready(m);
      return j;
    }
    if (op == "error")
      throw RuntimeError(fmt::format("{}: {} rejected the join: {}", who(o), peer, m.value("message", "?")));
    if (op == "waiting") {
      progress = fmt::format("{} of {} workers joined", m.value("workers_joined", 0), m.value("nworkers", 0));
      if (m.value("ps_needed", false)) progress += m.value("ps_joined", false) ? ", PS joined" : ", no PS yet";
      continue;
    }
    throw RuntimeError(fmt::format("{}: unexpected control message from {}: {}", who(o), peer, m.dump()));
  }
}

ControlNews read_control(LineChannel& ch) {
  ControlNews n;
  std::vector<nlohmann::json> msgs;
  try {
    n.open = ch.receive(msgs);
  } catch (const RuntimeError& e) {
    n.error = e.what();
    return n;
  }
  for (const auto& m : msgs) {
    const std::string op = m.value("op", "");
    if (op == "finish") n.finished = true;
    else if (op == "abort") n.aborted = m.value("message", "?");
  }
  return n;
}

nlohmann::json query_switch_stats(const Endpoint& sw, Time timeout) {
  const Time deadline = monotonic_now() + timeout;
  LineChannel ch(connect_tcp(sw, timeout, "the switch"));
  ch.send({{"op", "stats"}});
  nlohmann::json m;
  const std::string peer = fmt::format("the switch at {}", sw.str());
  if (!ch.wait_message(m, deadline, peer)) throw RuntimeError(fmt::format("timed out waiting for stats from {}", peer));
  if (m.value("op", "") != "stats") throw RuntimeError(fmt::format("{} answered the stats query with {}", peer, m.dump()));
  return m;
}

}  // namespace ina::rt
