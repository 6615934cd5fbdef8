#include "runtime/auth.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "runtime/net.hpp"

namespace ina::rt {

Key random_key() {
  Key k{};
  size_t got = 0;
  while (got < k.size()) {
    const ssize_t n = ::getrandom(k.data() + got, k.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw RuntimeError(fmt::format("getrandom: {}", errno_text(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return k;
}

std::string to_hex(const Key& k) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * k.size(), '0');
  for (size_t i = 0; i < k.size(); ++i) {
    s[2 * i] = d[k[i] >> 4];
    s[2 * i + 1] = d[k[i] & 15];
  }
  return s;
}

namespace {
int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Key parse_key(std::string_view hex, const std::string& what) {
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.back()))) hex.remove_suffix(1);
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.front()))) hex.remove_prefix(1);
  Key k{};
  if (hex.size() != 2 * k.size())
    throw InputError(fmt::format("{}: a key is 64 hex digits (256 bits), got {} characters", what, hex.size()));
  for (size_t i = 0; i < k.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) throw InputError(fmt::format("{}: a key is 64 hex digits; character {} is not one", what, 2 * i + (hi < 0 ? 1 : 2)));
    k[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return k;
}

Key read_key_file(const std::string& path) {
  const std::string what = fmt::format("key file '{}'", path);
  // 64 hex digits and a newline; whitespace around them is allowed, a
  // longer file (or a device such as /dev/zero) is not a key file.
  constexpr size_t kMaxBytes = 1024;
  const std::string text = read_bounded_file(path, kMaxBytes, what, "64 hex digits ('ina key new FILE' makes one)");
  return parse_key(text, what);
}

std::string read_bounded_file(const std::string& path, size_t max_bytes, const std::string& what, const std::string& holds) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw InputError(fmt::format("cannot read {}: {}", what, errno_text(errno)));
  UniqueFd guard(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw InputError(fmt::format("cannot read {}: {}", what, errno_text(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{} is a directory, not a file of {}", what, holds));
  if (!S_ISREG(st.st_mode))
    throw InputError(fmt::format("{} is not a regular file (a device, FIFO or socket); give a file of {}", what, holds));
  auto too_big = [&](uint64_t n) {
    return InputError(fmt::format("{} is {} bytes: more than the {} bytes a file of {} can be", what, n, max_bytes, holds));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) throw too_big(static_cast<uint64_t>(st.st_size));
  std::string text(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("cannot read {}: {}", what, errno_text(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) throw too_big(got);  // it grew since fstat
  text.resize(got);
  return text;
}

void write_key_file(const std::string& path, const Key& k) {
  // A fresh file of ours, mode 0600: never one someone else created (with
  // other permissions) or a symbolic link planted at that path.
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InputError(fmt::format("cannot write key file '{}': it is a directory; give a file path in it, e.g. '{}/switch.key'",
                                 path, path));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw InputError(fmt::format("cannot replace key file '{}': {}", path, errno_text(errno)));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw InputError(fmt::format("cannot write key file '{}': {}", path, errno_text(errno)));
  UniqueFd guard(fd);
  const std::string s = to_hex(k) + "\n";
  if (::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size()))
    throw InputError(fmt::format("cannot write key file '{}': {}", path, errno_text(errno)));
}

namespace {
std::array<uint8_t, 32> hmac(const Key& key, std::string_view msg) {
  std::array<uint8_t, 32> out{};
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
            msg.size(), out.data(), &len) ||
      len != out.size())
    throw RuntimeError("HMAC-SHA256 failed (libcrypto)");
  return out;
}
}  // namespace

Key job_key(const Key& switch_key, uint16_t job) { return hmac(switch_key, fmt::format("ina job key v1\n{}", job)); }

std::string proof(const Key& key, std::string_view message) { return to_hex(hmac(key, message)); }

bool proof_matches(std::string_view got, const std::string& want) {
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

std::string join_message(std::string_view nonce, std::string_view role, uint16_t job, unsigned rank,
                         unsigned nworkers, uint64_t payload, uint64_t retain_ops, std::string_view udp) {
  return fmt::format("ina join v2\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", nonce, role, job, rank, nworkers, payload, retain_ops, udp);
}

std::string stats_message(std::string_view nonce, uint16_t job) { return fmt::format("ina stats v2\n{}\n{}", nonce, job); }

std::string reconfigure_message(std::string_view nonce, uint16_t job, unsigned epoch, const std::vector<uint16_t>& workers,
                                const std::vector<uint16_t>& rack, const std::vector<uint16_t>& upstream) {
  return fmt::format("ina reconfigure v1\n{}\n{}\n{}\n{}\n{}\n{}", nonce, job, epoch, fmt::join(workers, ","),
                     fmt::join(rack, ","), fmt::join(upstream, ","));
}

bool key_from_env(const char* var, Key& out) {
  const char* v = std::getenv(var);
  if (!v || !*v) return false;
  out = parse_key(v, fmt::format("environment variable {}", var));
  return true;
}

}  // namespace ina::rt
