#pragma once
// Optional per-datagram authentication of the UDP runtime (docs/runtime.md,
// "Security", "Datagram authentication").
//
// Off by default. On, every datagram of job J carries an 8-byte trailer
//   tag = SipHash-2-4(datagram_key(J), payload || header)
// after its payload, and the header's wire-only flag bit flag::kTagged
// (wire/packet.hpp). The header is the 36 bytes as sent (with kTagged set),
// so the tag binds the job, source node id, destination, rank, PSN, bitmap
// and every other field, and the payload bytes; the message's length (in
// SipHash's last word) and the header's count fix where the payload ends.
// The payload comes first so that copies of one result to several workers,
// which differ only in their header's destination, share the payload's
// SipHash state (the engine's one-encoding multicast).
//
// The key of one run of job J (from its "ready" to its end):
//   datagram_key(J) = the first 16 bytes of
//   HMAC-SHA256(job_key(J), "ina datagram key v1" || salt)
// with `salt` 32 random bytes the switch draws when the job starts and sends
// in "ready" (not secret: the key needs job_key(J)). A key of its own, so
// the control plane's credential (join and stats proofs) is never used as a
// MAC key on the data path, and a fresh one for every run of job J, so a
// datagram recorded in an earlier run of job J under the same switch key
// (whose PSNs started at 0 too) is refused in a later one. The switch
// derives it from the switch key; a job's members from their job key.
//
// Why SipHash-2-4: a pseudo-random function, so a tag needs no nonce (a
// retransmission of the same bytes has the same tag, and nothing breaks if
// two datagrams are equal), and it is measured cheaper here than Poly1305 via
// libcrypto, which as a one-time MAC needs a fresh key per datagram
// (ChaCha20 of a unique nonce); `ina bench switch` has the tagged variants.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/siphash.hpp"
#include "runtime/auth.hpp"

namespace ina::rt {

constexpr size_t kTagBytes = 8;

struct DatagramKey {
  uint8_t k[16] = {};
  bool operator==(const DatagramKey&) const = default;
};

DatagramKey datagram_key(const Key& job_key, const Key& salt);

// The SipHash state after a tagged datagram's payload: `datagram` is its
// encoding (header, then payload), `len` its length without the tag.
SipHash24 payload_state(const DatagramKey& k, const std::byte* datagram, size_t len);
// The tag: that state, then the header (kHeaderBytes, kTagged set).
uint64_t finish_tag(SipHash24 state, const std::byte* header);
uint64_t datagram_tag(const DatagramKey& k, const std::byte* datagram, size_t len);
// Writes / reads the tag's 8 bytes (little-endian).
void put_tag(std::byte* out, uint64_t tag);
uint64_t get_tag(const std::byte* in);
// Whether a datagram of `len` bytes (tag included) ends in its correct tag.
// Compares without a data-dependent branch.
bool tag_matches(const DatagramKey& k, const std::byte* datagram, size_t len);

// Whether a job member tags its datagrams: as the switch announced in
// "ready" (`switch_tags`). A member that requires tags (`required`, its
// --datagram-auth) refuses a switch that does not use them: RuntimeError
// naming `who` and the switch.
bool member_tags(bool required, bool switch_tags, const std::string& who, const std::string& sw);

}  // namespace ina::rt
