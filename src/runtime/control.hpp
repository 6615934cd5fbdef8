#pragma once
// The runtime's control plane: how a worker or a PS joins a job at `ina
// switch`. It is the runtime's counterpart of what the simulator's runner
// does by direct calls (node ids, SwitchProgram::add_job, remove_job).
//
// Newline-delimited JSON over TCP, on the same port number as the switch's
// UDP data socket. The connection lives as long as the member does, so the
// switch learns at once when a member goes away.
//
//   switch -> anyone  {"op":"hello","version":2,"nonce":"<64 hex>"}   first, on every connection
//   member -> switch  {"op":"join","role":"worker"|"ps","job":J,"rank":r,"nworkers":N,
//                      "payload":V (0: any),"retain_ops":R,"udp":"ip:port",
//                      "proof":HMAC(job_key(J), join_message(nonce, fields))}   (auth.hpp)
//   switch -> member  {"op":"waiting","workers_joined":k,"nworkers":N,"ps_joined":b,"ps_needed":b}
//                     {"op":"ready","job":J,"self":id,"switch":0,"ps":id|-1,"workers":[ids by rank],
//                      "payload":V,"window_cap":S,"policy":"...","scheme":"...",
//                      "kv":{"pairs":K,"ps_pairs":P,"ack_every":A,"hot_results":"via-ps"|"multicast","registers":m,
//                            "table_entries":E,"value_registers":R}}   (kv: sparse schemes)
//                     {"op":"error","message":"..."}          (then the switch closes)
//   worker -> switch  {"op":"done"}    I have finished all my allreduces
//   worker -> switch  {"op":"hot_set","from":F,"total":T,"offset":O,"keys":[...]}   sparse hot-ina jobs (Zebra):
//                     this worker's ranked hot keys (hottest first) for iterations F on, in chunks of at most
//                     kHotSetChunk keys sent in order; every worker of the job must send the same list
//   switch -> workers {"op":"hot_set","from":F,"version":V} once all N lists are in, equal, and installed
//                     {"op":"hot_set","from":F,"error":"..."}  not installed (lists differ, too many keys, too late)
//   switch -> PS      {"op":"hot_set","from":F,"version":V,"total":T,"offset":O,"keys":[...]}  with hot_results
//                     via-ps: the installed hot set, in the workers' chunks, before the workers hear of it
//   switch -> member  {"op":"finish"}  every worker is done: the job is over (barrier)
//                     {"op":"abort","message":"..."}  a member left early: the job is dead
//   control node -> switch (a static ring job, `ina switch --layout`; after a failure, Rina §IV-C)
//                     {"op":"reconfigure","job":J,"epoch":E,"workers":[ids by new rank],"rack":[new ranks],
//                      "upstream":[new ranks],"proof":HMAC(job_key(J), reconfigure_message(nonce, fields))}
//                     -> {"op":"reconfigured","job":J,"epoch":E,"aggregates":bool}: the job is registered again
//                     under epoch E (host::ring_failover's RingTorJob; an empty rack: the ToR only forwards)
//   anyone -> switch  {"op":"stats"}  -> {"op":"stats", ...}   the switch's shape only
//                     {"op":"stats","job":J,"proof":HMAC(job_key(J), stats_message(nonce, J))}  + job J's state
//                     {"op":"stats","job":0,"proof":HMAC(switch_key, stats_message(nonce, 0))}  everything
//
// Every message is validated (types, ranges, known fields, at most 64 KiB,
// nesting depth 8); a bad one, or a wrong proof, closes that connection with
// {"op":"error"}: never the switch, and no other job notices.
//
// A job goes live when all N workers (and, for shared policies, its PS) have
// joined: the switch assigns node ids, registers the job with the switch
// program and its address book, and answers "ready". Errors are explicit: a
// worker count that differs from the job's, a rank or PS already present, a
// job id that is live, a payload that differs from the switch's.
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/sparse.hpp"
#include "runtime/auth.hpp"
#include "schemes/admission.hpp"
#include "schemes/registry.hpp"
#include "runtime/net.hpp"
#include "wire/packet.hpp"

namespace ina::rt {

enum class Role { Worker, Ps };
const char* to_string(Role r);

struct JoinOptions {
  Endpoint sw;                  // the switch (UDP data and TCP control)
  Role role = Role::Worker;
  uint16_t job = 1;
  unsigned rank = 0;            // workers
  unsigned nworkers = 1;
  uint16_t payload_values = 0;  // 0: accept the switch's
  size_t retain_ops = 0;        // workers: must agree within the job
  Key key{};                    // the job's credential, job_key(switch key, job) (auth.hpp)
  std::string bind_ip;          // UDP source address; empty: the one that reaches the switch
  int udp_buffer_bytes = 4 << 20;
  Time connect_timeout = 10 * kSec;
  Time rendezvous_timeout = 60 * kSec;
  // Who is joining ("ina: worker rank 0 of job 1"): says so on stderr when the
  // switch refuses connections for connect_notice_after (then every 5 s), and
  // when the job takes more than assemble_notice_after to assemble (then
  // every 10 s; runtime/wait_notice.hpp); empty: silent.
  std::string announce;
  Time connect_notice_after = 2 * kSec;
  Time assemble_notice_after = 5 * kSec;
};

// The switch's answer to a completed rendezvous.
struct JobAssignment {
  uint16_t job = 0;
  NodeId self = kNoNode;
  NodeId sw = kNoNode;
  NodeId ps = kNoNode;
  std::vector<NodeId> workers;  // by rank
  uint16_t payload_values = 0;
  uint32_t window_cap = 0;      // isolated policy: slots per pool
  std::string policy;
  std::string scheme;           // the switch's scheme (schemes/registry.hpp)
  bool datagram_auth = false;   // the switch tags this job's datagrams and requires tags (datagram_tag.hpp)
  Key datagram_salt{};          // with datagram_auth: this run's salt of the job's datagram key
  // Sparse schemes: the <key, value> pairs per packet, and for a hot-set
  // table (Zebra) the register arrays of its layout (m), the key table's
  // entries and the value registers. 0 for dense schemes.
  uint16_t kv_pairs = 0;
  // The streams to and from the PS (host::SparseConfig::ps_pairs,
  // ack_every): pairs per packet (0: kv_pairs) and a cumulative
  // acknowledgement per this many packets.
  uint16_t kv_ps_pairs = 0;
  uint16_t kv_ack_every = 1;
  kv::HotRoute kv_hot_results = kv::HotRoute::ViaPs;  // where the switch sends the hot results (wire/kv.hpp)
  uint32_t kv_registers = 0, kv_table_entries = 0;
  uint64_t value_registers = 0;
};

// The int32 words of the largest payload a job's packets carry (its
// dense payload, or a <key, value> packet of either stream).
uint16_t payload_words(const JobAssignment& a);

struct Joined {
  LineChannel control;  // stays open for the member's lifetime
  UniqueFd udp;         // bound data socket, advertised to the switch
  JobAssignment job;
};

// Connects (retrying until connect_timeout), binds the UDP socket, joins and
// waits for "ready" (at most rendezvous_timeout). Throws RuntimeError with the
// switch's address and what was missing on timeout, or the switch's reason
// when it rejects the join.
Joined join_job(const JoinOptions& o);

// What a job member's control connection said since the last call: the
// switch's "finish" or "abort", and whether the connection is still open.
// Messages join_job read along with "ready" come first (epoll never reports
// data already read off the socket, so members call this once right after
// they start watching the connection). A broken or malformed stream sets
// `error`.
// To a worker: the answer to its hot-set list. To the PS of a job whose hot
// results go through it (kv::HotRoute::ViaPs): a chunk of an installed hot
// set, `keys` from `offset` of `total` (the worker's hot_set chunks with the
// version), so the PS maps the switch's rank indices back to keys.
struct HotSetNews {
  uint32_t from = 0, version = 0;
  std::string error;  // empty: installed
  bool chunk = false;  // a chunk of an installed hot set (to the PS)
  uint64_t total = 0, offset = 0;
  std::vector<uint64_t> keys;
};
struct ControlNews {
  bool open = true;
  bool finished = false;
  std::string aborted;  // the switch's reason, if it aborted the job
  std::string error;
  std::vector<HotSetNews> hot_sets;  // answers to this member's hot_set lists, in order
};
ControlNews read_control(LineChannel& ch);

// A member's request to the switch, validated: every field of the right
// type and range, no unknown field. parse_control_request throws
// RuntimeError naming the operation, the field and the value.
struct JoinRequest {
  Role role = Role::Worker;
  uint16_t job = 0;
  unsigned rank = 0, nworkers = 0;  // rank 0 for a PS
  uint64_t payload = 0;
  uint64_t retain_ops = 0;          // 0 for a PS
  std::string udp;                  // as sent (signed as sent); Endpoint::parse it after the proof
  std::string proof;                // empty if absent
};
struct StatsRequest {
  bool with_proof = false;
  uint16_t job = 0;                 // 0: the operator (switch key)
  std::string proof;
};
struct DoneRequest {};
inline constexpr size_t kHotSetChunk = schemes::Admission::kHotChunkKeys;  // keys per hot_set message
inline constexpr uint64_t kMaxHotSet = 1u << 20;    // keys in one hot set
struct HotSetRequest {
  uint32_t from = 0;
  uint64_t total = 0, offset = 0;
  std::vector<uint64_t> keys;
};
struct ReconfigureRequest {
  uint16_t job = 0;
  unsigned epoch = 0;
  std::vector<uint16_t> workers, rack, upstream;
  std::string proof;
};
using ControlRequest = std::variant<JoinRequest, StatsRequest, DoneRequest, HotSetRequest, ReconfigureRequest>;
ControlRequest parse_control_request(const nlohmann::json& m);

// The switch's scheme as the registry knows it; RuntimeError if it does not.
const schemes::Scheme& scheme_of(const JobAssignment& a, const Endpoint& sw);
// A <key, value> job's member settings from the switch's answer: ids, the
// switch if it aggregates hot keys (else kNoNode: every pair to the PS), pairs per packet.
host::SparseConfig sparse_config(const JobAssignment& a, const schemes::Scheme& s);

// The hot_set message carrying a worker's ranked keys from `offset` on (at
// most kHotSetChunk of them), for iterations `from` on.
nlohmann::json hot_set_chunk(uint32_t from, std::span<const uint64_t> ranked, size_t offset);
// The switch's chunk of installed hot set `version` to a job's PS.
nlohmann::json installed_hot_set_chunk(uint32_t from, uint32_t version, std::span<const uint64_t> ranked, size_t offset);

// Asks a running switch for its statistics ({"op":"stats", ...}): with no key
// only the switch's shape; with job J's key that job's state; with the
// switch key and job 0 everything.
nlohmann::json query_switch_stats(const Endpoint& sw, Time timeout, const Key* key = nullptr, uint16_t job = 0);

// Sends a static ring job's new membership to its ToR's `ina switch` (the
// "reconfigure" operation, proven with the job's key) and waits for the
// answer; RuntimeError with the switch's reason if it refuses.
nlohmann::json reconfigure_switch(const Endpoint& sw, Time timeout, const Key& job_key, const ReconfigureRequest& r);

// The job key a member uses: INA_JOB_KEY, else derived from INA_SWITCH_KEY;
// throws RuntimeError naming both variables if neither is set.
Key job_key_from_env(uint16_t job);

}  // namespace ina::rt
