#include "runtime/control.hpp"

#include <algorithm>

#include "runtime/wait_notice.hpp"
#include "wire/kv.hpp"

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
    a.scheme = m.at("scheme").get<std::string>();
    a.datagram_auth = m.value("datagram_auth", false);
    if (a.datagram_auth) a.datagram_salt = parse_key(m.at("datagram_salt").get<std::string>(), "'ready' field 'datagram_salt'");
    if (auto kv = m.find("kv"); kv != m.end()) {
      a.kv_pairs = kv->at("pairs").get<uint16_t>();
      a.kv_ps_pairs = kv->value("ps_pairs", uint16_t{0});
      a.kv_ack_every = kv->value("ack_every", uint16_t{1});
      const auto route = kv->at("hot_results").get<std::string>();
      const auto parsed = kv::parse_hot_route(route);
      if (!parsed) throw RuntimeError(fmt::format("field 'kv.hot_results' is {}, not via-ps or multicast", quote_json(route, 40)));
      a.kv_hot_results = *parsed;
      a.kv_registers = kv->at("registers").get<uint32_t>();
      a.kv_table_entries = kv->at("table_entries").get<uint32_t>();
      a.value_registers = kv->at("value_registers").get<uint64_t>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(fmt::format("malformed 'ready' message from the switch: {}", e.what()));
  } catch (const RuntimeError& e) {  // (a bad salt is the peer's, not this command's input)
    throw RuntimeError(fmt::format("malformed 'ready' message from the switch: {}", e.what()));
  }
  return a;
}

// The switch's first message on a connection: its nonce.
std::string read_hello(LineChannel& ch, Time deadline, const std::string& peer) {
  nlohmann::json m;
  if (!ch.wait_message(m, deadline, peer)) throw RuntimeError(fmt::format("{} did not greet within the timeout", peer));
  const auto op = m.find("op");
  const auto nonce = m.find("nonce");
  if (op == m.end() || *op != "hello" || nonce == m.end() || !nonce->is_string() || nonce->get_ref<const std::string&>().size() != 64)
    throw RuntimeError(fmt::format("{} is not an ina switch of this version (it opened with {})", peer, quote_json(m, 120)));
  return nonce->get<std::string>();
}

// The switch's reason in an "error" or "abort" message, as printable text
// (what a member prints must not carry raw control bytes either).
constexpr size_t kMaxQuotedReason = 1024;
std::string switch_text(const nlohmann::json& m) {
  const auto it = m.find("message");
  return it != m.end() && it->is_string() ? printable(it->get_ref<const std::string&>(), kMaxQuotedReason, true) : "?";
}

std::string op_of(const nlohmann::json& m) {
  const auto it = m.find("op");
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Typed fields of a control message: a missing field or one of the wrong
// type or range is an error naming the operation, the field and the value.
uint64_t field(const nlohmann::json& m, const char* op, const char* name, uint64_t lo, uint64_t hi) {
  auto it = m.find(name);
  if (it == m.end() || !it->is_number_unsigned() || it->get<uint64_t>() < lo || it->get<uint64_t>() > hi)
    throw RuntimeError(fmt::format("{}: field '{}' must be an integer in {}..{}, got {}", op, name, lo, hi,
                                   it == m.end() ? std::string("nothing") : quote_json(*it)));
  return it->get<uint64_t>();
}

std::string text_field(const nlohmann::json& m, const char* op, const char* name, size_t max_len) {
  auto it = m.find(name);
  if (it == m.end() || !it->is_string() || it->get_ref<const std::string&>().size() > max_len)
    throw RuntimeError(fmt::format("{}: field '{}' must be a string of at most {} characters, got {}", op, name,
                                   max_len, it == m.end() ? std::string("nothing") : quote_json(*it)));
  return it->get<std::string>();
}

// Every field of a message must be one the operation knows.
void only_fields(const nlohmann::json& m, const char* op, std::initializer_list<const char*> known) {
  for (auto it = m.begin(); it != m.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok |= it.key() == k;
    if (!ok) throw RuntimeError(fmt::format("{}: unknown field '{}'", op, printable(it.key(), 40)));
  }
}

}  // namespace

ControlRequest parse_control_request(const nlohmann::json& m) {
  if (!m.is_object()) throw RuntimeError("control message: not a JSON object");
  const std::string op = text_field(m, "control message", "op", 16);
  if (op == "join") {
    only_fields(m, "join", {"op", "role", "job", "rank", "nworkers", "payload", "retain_ops", "udp", "proof"});
    JoinRequest r;
    const std::string role = text_field(m, "join", "role", 8);
    if (role != "worker" && role != "ps")
      throw RuntimeError(fmt::format("join: role must be worker or ps, got '{}'", printable(role)));
    r.role = role == "worker" ? Role::Worker : Role::Ps;
    r.job = static_cast<uint16_t>(field(m, "join", "job", 1, 65535));
    r.nworkers = static_cast<unsigned>(field(m, "join", "nworkers", 1, kMaxWireWorkers));
    r.payload = field(m, "join", "payload", 0, 65535);
    if (r.role == Role::Worker) {
      r.rank = static_cast<unsigned>(field(m, "join", "rank", 0, r.nworkers - 1));
      r.retain_ops = field(m, "join", "retain_ops", 1, 1u << 20);
    }
    r.udp = text_field(m, "join", "udp", 64);
    if (m.contains("proof")) r.proof = text_field(m, "join", "proof", 64);
    return r;
  }
  if (op == "stats") {
    only_fields(m, "stats", {"op", "job", "proof"});
    StatsRequest r;
    r.with_proof = m.contains("proof");
    if (r.with_proof) {
      r.job = static_cast<uint16_t>(field(m, "stats", "job", 0, 65535));
      r.proof = text_field(m, "stats", "proof", 64);
    }
    return r;
  }
  if (op == "done") {
    only_fields(m, "done", {"op"});
    return DoneRequest{};
  }
  if (op == "hot_set") {
    only_fields(m, "hot_set", {"op", "from", "total", "offset", "keys"});
    HotSetRequest r;
    r.from = static_cast<uint32_t>(field(m, "hot_set", "from", 0, UINT32_MAX));
    r.total = field(m, "hot_set", "total", 0, kMaxHotSet);
    r.offset = field(m, "hot_set", "offset", 0, r.total);
    const auto it = m.find("keys");
    if (it == m.end() || !it->is_array() || it->size() > kHotSetChunk || r.offset + it->size() > r.total)
      throw RuntimeError(fmt::format("hot_set: field 'keys' must be an array of at most {} keys ending at most at "
                                     "total {} from offset {}, got {}", kHotSetChunk, r.total, r.offset,
                                     it == m.end() ? std::string("nothing") : quote_json(*it)));
    r.keys.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      const auto& k = (*it)[i];
      if (!k.is_number_unsigned())
        throw RuntimeError(fmt::format("hot_set: keys[{}] must be an unsigned 64-bit integer, got {}", i, quote_json(k, 40)));
      r.keys.push_back(k.get<uint64_t>());
    }
    return r;
  }
  if (op == "reconfigure") {
    only_fields(m, "reconfigure", {"op", "job", "epoch", "workers", "rack", "upstream", "proof"});
    ReconfigureRequest r;
    r.job = static_cast<uint16_t>(field(m, "reconfigure", "job", 1, 65535));
    r.epoch = static_cast<unsigned>(field(m, "reconfigure", "epoch", 1, 255));
    auto ids = [&](const char* name, size_t max, uint64_t hi) {
      const auto it = m.find(name);
      if (it == m.end() || !it->is_array() || it->size() > max)
        throw RuntimeError(fmt::format("reconfigure: field '{}' must be an array of at most {} integers, got {}", name,
                                       max, it == m.end() ? std::string("nothing") : quote_json(*it)));
      std::vector<uint16_t> v;
      for (const auto& x : *it) {
        if (!x.is_number_unsigned() || x.get<uint64_t>() > hi)
          throw RuntimeError(fmt::format("reconfigure: field '{}': every entry must be an integer in 0..{}, got {}", name,
                                         hi, quote_json(x, 40)));
        v.push_back(x.get<uint16_t>());
      }
      return v;
    };
    r.workers = ids("workers", kMaxRingWorkers, kMulticast - 1);
    r.rack = ids("rack", kMaxRingWorkers, kMaxRingWorkers - 1);
    r.upstream = ids("upstream", kMaxRingWorkers, kMaxRingWorkers - 1);
    r.proof = text_field(m, "reconfigure", "proof", 64);
    return r;
  }
  throw RuntimeError(fmt::format("unknown control operation '{}'", printable(op, 16)));
}

const schemes::Scheme& scheme_of(const JobAssignment& a, const Endpoint& sw) {
  const schemes::Scheme* s = schemes::lookup(a.scheme);
  if (!s) throw RuntimeError(fmt::format("the switch at {} runs scheme '{}', which this ina does not know", sw.str(), a.scheme));
  return *s;
}

host::SparseConfig sparse_config(const JobAssignment& a, const schemes::Scheme& s) {
  host::SparseConfig sc;
  sc.job = a.job;
  sc.workers = a.workers;
  sc.ps = a.ps;
  sc.sw = s.sparse == schemes::Sparse::HotIna ? a.sw : kNoNode;
  sc.pairs = a.kv_pairs;
  sc.ps_pairs = a.kv_ps_pairs;
  sc.ack_every = a.kv_ack_every;
  sc.hot_results = a.kv_hot_results;
  sc.header_bytes = kHeaderBytes;
  return sc;
}

uint16_t payload_words(const JobAssignment& a) {
  if (a.kv_pairs == 0) return a.payload_values;
  return std::max<uint16_t>(a.payload_values, static_cast<uint16_t>(kv::words(std::max(a.kv_pairs, a.kv_ps_pairs))));
}

nlohmann::json hot_set_chunk(uint32_t from, std::span<const uint64_t> ranked, size_t offset) {
  const size_t n = std::min(kHotSetChunk, ranked.size() - offset);
  return {{"op", "hot_set"}, {"from", from}, {"total", ranked.size()}, {"offset", offset},
          {"keys", std::vector<uint64_t>(ranked.begin() + static_cast<ptrdiff_t>(offset),
                                         ranked.begin() + static_cast<ptrdiff_t>(offset + n))}};
}

nlohmann::json installed_hot_set_chunk(uint32_t from, uint32_t version, std::span<const uint64_t> ranked,
                                      size_t offset) {
  nlohmann::json m = hot_set_chunk(from, ranked, offset);
  m["version"] = version;
  return m;
}

Key job_key_from_env(uint16_t job) {
  Key k;
  if (key_from_env("INA_JOB_KEY", k)) return k;
  if (key_from_env("INA_SWITCH_KEY", k)) return job_key(k, job);
  throw InputError(fmt::format("job {}: no credential: set INA_JOB_KEY (the job's key, from its launcher) or "
                               "INA_SWITCH_KEY (the switch key)", job));
}

Joined join_job(const JoinOptions& o) {
  Joined j;
  WaitNotice notice(o.announce, o.connect_notice_after);
  j.control = LineChannel(connect_tcp(o.sw, o.connect_timeout, "the switch", &notice));
  Endpoint udp_at = o.bind_ip.empty() ? local_endpoint(j.control.fd()).with_port(0)
                                      : Endpoint::parse_ip(o.bind_ip);
  j.udp = bind_udp(udp_at, o.udp_buffer_bytes);
  const Endpoint udp = local_endpoint(j.udp.get());
  const Time deadline = monotonic_now() + o.rendezvous_timeout;
  const std::string peer = fmt::format("the switch at {}", o.sw.str());
  const std::string nonce = read_hello(j.control, monotonic_now() + o.connect_timeout, peer);
  const bool worker = o.role == Role::Worker;
  const std::string sig = proof(o.key, join_message(nonce, to_string(o.role), o.job, worker ? o.rank : 0, o.nworkers,
                                                    o.payload_values, worker ? o.retain_ops : 0, udp.str()));
  j.control.send({{"op", "join"}, {"role", to_string(o.role)}, {"job", o.job}, {"rank", o.rank},
                  {"nworkers", o.nworkers}, {"payload", o.payload_values}, {"retain_ops", o.retain_ops},
                  {"udp", udp.str()}, {"proof", sig}});
  std::string progress = "no other member had joined";
  notice.restart(o.assemble_notice_after, 10 * kSec);
  for (;;) {
    notice.tick(o.rendezvous_timeout,
                [&] { return fmt::format("waiting at {} for job {} to assemble: {}", peer, o.job, progress); });
    throw_if_stop_requested(fmt::format("waiting at {} for job {} to assemble ({})", peer, o.job, progress));
    nlohmann::json m;
    // (At most 200 ms a wait: a stop signal is seen that soon.)
    if (!j.control.wait_message(m, std::min({deadline, notice.next(), monotonic_now() + 200 * kMs}), peer)) {
      if (monotonic_now() < deadline) continue;
      throw RuntimeError(fmt::format("{}: timed out after {:.1f} s waiting at {} for job {} to assemble ({})", who(o),
                                     to_ms(o.rendezvous_timeout) / 1000, peer, o.job, progress));
    }
    const std::string op = op_of(m);
    try {
      if (op == "ready") {
        j.job = parse_ready(m);
        return j;
      }
      if (op == "error")
        throw RuntimeError(fmt::format("{}: {} rejected the join: {}", who(o), peer, switch_text(m)));
      if (op == "waiting") {
        progress = fmt::format("{} of {} workers joined", m.value("workers_joined", 0), m.value("nworkers", 0));
        if (m.value("ps_needed", false)) progress += m.value("ps_joined", false) ? ", PS joined" : ", no PS yet";
        continue;
      }
    } catch (const nlohmann::json::exception& e) {
      throw RuntimeError(fmt::format("{}: malformed '{}' message from {}: {}", who(o), op, peer, e.what()));
    }
    throw RuntimeError(fmt::format("{}: unexpected control message from {}: {}", who(o), peer, quote_json(m, 200)));
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
    const std::string op = op_of(m);
    if (op == "finish") {
      n.finished = true;
    } else if (op == "abort") {
      const auto it = m.find("message");
      n.aborted = it != m.end() && it->is_string() ? switch_text(m) : std::string("(no reason given)");
    } else if (op == "hot_set") {
      HotSetNews h;
      try {
        h.from = m.at("from").get<uint32_t>();
        if (m.contains("error")) h.error = printable(m.at("error").get<std::string>(), kMaxQuotedReason, true);
        else h.version = m.at("version").get<uint32_t>();
        if (m.contains("keys")) {  // a chunk of an installed hot set, to the PS
          h.chunk = true;
          h.total = m.at("total").get<uint64_t>();
          h.offset = m.at("offset").get<uint64_t>();
          h.keys = m.at("keys").get<std::vector<uint64_t>>();
          if (h.total > kMaxHotSet || h.offset > h.total || h.keys.size() > h.total - h.offset)
            throw RuntimeError(fmt::format("chunk of {} keys at offset {} of {}", h.keys.size(), h.offset, h.total));
        }
      } catch (const std::exception& e) {  // a JSON type or range error, or a chunk out of bounds
        n.error = fmt::format("malformed 'hot_set' message from the switch: {}", e.what());
        return n;
      }
      n.hot_sets.push_back(std::move(h));
    }
  }
  return n;
}

nlohmann::json reconfigure_switch(const Endpoint& sw, Time timeout, const Key& job_key, const ReconfigureRequest& r) {
  const Time deadline = monotonic_now() + timeout;
  LineChannel ch(connect_tcp(sw, timeout, "the switch"));
  const std::string peer = fmt::format("the switch at {}", sw.str());
  const std::string nonce = read_hello(ch, deadline, peer);
  ch.send({{"op", "reconfigure"}, {"job", r.job}, {"epoch", r.epoch}, {"workers", r.workers}, {"rack", r.rack},
           {"upstream", r.upstream},
           {"proof", proof(job_key, reconfigure_message(nonce, r.job, r.epoch, r.workers, r.rack, r.upstream))}});
  nlohmann::json m;
  if (!ch.wait_message(m, deadline, peer))
    throw RuntimeError(fmt::format("timed out waiting for {} to take job {}'s epoch {}", peer, r.job, r.epoch));
  if (op_of(m) == "error")
    throw RuntimeError(fmt::format("{} refused job {}'s epoch {}: {}", peer, r.job, r.epoch, switch_text(m)));
  if (op_of(m) != "reconfigured" || m.value("epoch", 0u) != r.epoch)
    throw RuntimeError(fmt::format("{} answered the reconfiguration with {}", peer, quote_json(m, 200)));
  return m;
}

nlohmann::json query_switch_stats(const Endpoint& sw, Time timeout, const Key* key, uint16_t job) {
  const Time deadline = monotonic_now() + timeout;
  LineChannel ch(connect_tcp(sw, timeout, "the switch"));
  const std::string peer = fmt::format("the switch at {}", sw.str());
  const std::string nonce = read_hello(ch, deadline, peer);
  nlohmann::json q = {{"op", "stats"}};
  if (key) {
    q["job"] = job;
    q["proof"] = proof(*key, stats_message(nonce, job));
  }
  ch.send(q);
  nlohmann::json m;
  if (!ch.wait_message(m, deadline, peer)) throw RuntimeError(fmt::format("timed out waiting for stats from {}", peer));
  if (op_of(m) != "stats") throw RuntimeError(fmt::format("{} answered the stats query with {}", peer, quote_json(m, 200)));
  return m;
}

}  // namespace ina::rt
