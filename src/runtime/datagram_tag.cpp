#include "runtime/datagram_tag.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "runtime/net.hpp"
#include "wire/packet.hpp"

namespace ina::rt {

DatagramKey datagram_key(const Key& job_key, const Key& salt) {
  static constexpr char kLabel[] = "ina datagram key v1";
  uint8_t msg[sizeof kLabel - 1 + sizeof(Key)];
  std::memcpy(msg, kLabel, sizeof kLabel - 1);
  std::memcpy(msg + sizeof kLabel - 1, salt.data(), salt.size());
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  HMAC(EVP_sha256(), job_key.data(), static_cast<int>(job_key.size()), msg, sizeof msg, mac, &n);
  DatagramKey k;
  std::memcpy(k.k, mac, sizeof k.k);
  return k;
}

SipHash24 payload_state(const DatagramKey& k, const std::byte* datagram, size_t len) {
  SipHash24 s(k.k);
  s.update(datagram + kHeaderBytes, len - kHeaderBytes);
  return s;
}

uint64_t finish_tag(SipHash24 state, const std::byte* header) {
  state.update(header, kHeaderBytes);
  return state.final();
}

uint64_t datagram_tag(const DatagramKey& k, const std::byte* datagram, size_t len) {
  return finish_tag(payload_state(k, datagram, len), datagram);
}

void put_tag(std::byte* out, uint64_t tag) {
  if constexpr (std::endian::native == std::endian::big) tag = __builtin_bswap64(tag);
  std::memcpy(out, &tag, kTagBytes);
}

uint64_t get_tag(const std::byte* in) {
  uint64_t tag;
  std::memcpy(&tag, in, kTagBytes);
  if constexpr (std::endian::native == std::endian::big) tag = __builtin_bswap64(tag);
  return tag;
}

bool tag_matches(const DatagramKey& k, const std::byte* datagram, size_t len) {
  if (len < kHeaderBytes + kTagBytes) return false;
  const uint64_t want = datagram_tag(k, datagram, len - kTagBytes);
  return (want ^ get_tag(datagram + len - kTagBytes)) == 0;
}

bool member_tags(bool required, bool switch_tags, const std::string& who, const std::string& sw) {
  if (required && !switch_tags)
    throw RuntimeError(fmt::format("{}: datagram authentication required (--datagram-auth), but the switch at {} does not "
                                   "tag datagrams: start it with --datagram-auth", who, sw));
  return switch_tags;
}

}  // namespace ina::rt
