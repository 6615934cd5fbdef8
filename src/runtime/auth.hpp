#pragma once
// Credentials of the control plane (see docs/runtime.md, "Security").
//
// A switch has a 256-bit secret, the switch key, known to its operator and to
// the launchers allowed to start jobs on it. The credential of job J is
//   job_key(J) = HMAC-SHA256(switch_key, "ina job key v1" || J)
// which the launcher hands to job J's processes only (INA_JOB_KEY). The
// switch recomputes it from J, so it keeps no per-job state, and knowing
// job_key(99) tells nothing about job_key(4) (HMAC is a pseudo-random function).
//
// No secret crosses the wire. On every control connection the switch first
// sends a fresh random nonce; a member proves it holds job_key(J) with
//   proof = HMAC-SHA256(job_key(J), context || nonce || the request's fields)
// which binds the proof to this connection (no replay) and to what it asks
// for (no field can be changed under it). The operator proves the switch key
// the same way (for statistics of every job).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ina::rt {

using Key = std::array<uint8_t, 32>;

// A fresh key or nonce from the kernel's CSPRNG (getrandom).
Key random_key();
// 64 lowercase hex digits <-> key; parse throws RuntimeError naming `what`.
std::string to_hex(const Key& k);
Key parse_key(std::string_view hex, const std::string& what);
// Reads a key file (64 hex digits, surrounding whitespace ignored). Refuses,
// naming the file, a directory, anything but a regular file (a device such as
// /dev/zero, a FIFO) and a file of more than 1 KiB.
Key read_key_file(const std::string& path);
// The whole of a small regular file, read with at most max_bytes + 1 bytes
// held; throws RuntimeError naming `what` (and saying what a file of `holds`
// is) if the path is a directory, not a regular file, larger, or unreadable.
std::string read_bounded_file(const std::string& path, size_t max_bytes, const std::string& what, const std::string& holds);
// Writes a key file readable by its owner only (mode 0600).
void write_key_file(const std::string& path, const Key& k);

Key job_key(const Key& switch_key, uint16_t job);
// HMAC-SHA256 of `message` under `key`, as 64 hex digits.
std::string proof(const Key& key, std::string_view message);
// Constant-time comparison of a received proof with the expected one.
bool proof_matches(std::string_view got, const std::string& want);

// The messages that are signed (one place, so both sides agree).
std::string join_message(std::string_view nonce, std::string_view role, uint16_t job, unsigned rank,
                         unsigned nworkers, uint64_t payload, uint64_t retain_ops, std::string_view udp);
std::string stats_message(std::string_view nonce, uint16_t job);  // job 0: the operator (switch key)
// A ring job's new membership for a ToR after a failure (the job's key;
// control.hpp "reconfigure"): node ids by new rank, the ToR's rack and upstream ranks.
std::string reconfigure_message(std::string_view nonce, uint16_t job, unsigned epoch, const std::vector<uint16_t>& workers,
                                const std::vector<uint16_t>& rack, const std::vector<uint16_t>& upstream);

// Keys from the environment: INA_JOB_KEY (a job's credential) and
// INA_SWITCH_KEY (the switch key, from which a job key can be derived).
// Empty optional-like: returns false if the variable is unset.
bool key_from_env(const char* var, Key& out);

}  // namespace ina::rt
