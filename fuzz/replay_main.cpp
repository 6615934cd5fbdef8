// Replay driver for the fuzz targets in the normal (GCC) build, run by ctest:
// calls LLVMFuzzerTestOneInput on every file of the given corpus directories,
// then on N pseudo-random mutations of them (fixed seed, so every run is the
// same). A finding aborts; the handler names the input and, for a mutation,
// writes it to ./replay-crash-<target> so that it can be replayed or added to
// the corpus.
//
//   fuzz_replay_<target> [--mutations N] [--seed S] [--max-len L] <dir or file>...
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// What is running, for the crash handler (set before each input).
const char* g_target = "";
char g_what[512] = "";
const Bytes* g_input = nullptr;

void on_crash(int sig) {
  auto say = [](const char* s) { (void)!write(2, s, strlen(s)); };
  say("\nreplay: ");
  say(g_target);
  say(": crashed on ");
  say(g_what);
  say("\n");
  if (g_input) {
    char path[256] = "replay-crash-";
    strncat(path, g_target, sizeof(path) - strlen(path) - 1);
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!write(fd, g_input->data(), g_input->size());
      close(fd);
      say("replay: input written to ");
      say(path);
      say("\n");
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// splitmix64: the same sequence on every platform and compiler.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
};

// One of libFuzzer's simple byte mutations (a subset: enough to leave the
// corpus' neighbourhood, deterministic).
void mutate_once(Bytes& b, const std::vector<Bytes>& corpus, Rng& rng, size_t max_len) {
  static constexpr uint8_t kInteresting[] = {0, 1, 2, 0x7F, 0x80, 0xFF, 0xFE, 16, 32, 64, 100, '"', '[', ']', '{', '}',
                                             '=', ',', '.', '-', 'e', '\n', '#', '\\'};
  const size_t at = rng.below(b.size() + 1);
  switch (rng.below(9)) {
    case 0:  // flip a bit
      if (!b.empty()) b[rng.below(b.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
      break;
    case 1:  // random byte
      if (!b.empty()) b[rng.below(b.size())] = static_cast<uint8_t>(rng.next());
      break;
    case 2:  // interesting byte
      if (!b.empty()) b[rng.below(b.size())] = kInteresting[rng.below(sizeof(kInteresting))];
      break;
    case 3:  // insert a byte
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), kInteresting[rng.below(sizeof(kInteresting))]);
      break;
    case 4: {  // erase a range
      if (b.empty()) break;
      const size_t from = rng.below(b.size()), len = 1 + rng.below(std::min<size_t>(16, b.size() - from));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + len));
      break;
    }
    case 5: {  // duplicate a range
      if (b.empty()) break;
      const size_t from = rng.below(b.size()), len = 1 + rng.below(std::min<size_t>(64, b.size() - from));
      const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + len));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // splice: our head, another input's tail
      const Bytes& o = corpus[rng.below(corpus.size())];
      const size_t cut = rng.below(o.size() + 1);
      b.resize(at);
      b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(cut), o.end());
      break;
    }
    case 7:  // truncate
      b.resize(at);
      break;
    case 8:  // a digit becomes another number-ish byte
      for (size_t k = 0; k < b.size(); ++k) {
        uint8_t& c = b[(at + k) % b.size()];
        if (c >= '0' && c <= '9') {
          c = "0123456789-.e9"[rng.below(14)];
          break;
        }
      }
      break;
  }
  if (b.size() > max_len) b.resize(max_len);
}

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--max-len L] <corpus dir or file>...\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mutations = 0, max_len = 8192;
  uint64_t seed = 1;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--mutations" || a == "--seed" || a == "--max-len") && i + 1 < argc) {
      const uint64_t v = std::strtoull(argv[++i], nullptr, 10);
      (a == "--mutations" ? mutations : a == "--seed" ? seed : max_len) = v;
    } else if (a.starts_with("--")) {
      return usage(argv[0]);
    } else if (fs::is_directory(a)) {
      for (const auto& e : fs::recursive_directory_iterator(a))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(a)) {
      inputs.push_back(a);
    } else {
      std::fprintf(stderr, "%s: no such corpus: %s\n", argv[0], a.c_str());
      return 2;
    }
  }
  if (inputs.empty()) return usage(argv[0]);
  std::sort(inputs.begin(), inputs.end());  // directory order is not stable

  std::string target = fs::path(argv[0]).filename().string();
  if (target.starts_with("fuzz_replay_")) target = target.substr(12);
  g_target = target.c_str();
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_crash);

  std::vector<Bytes> corpus;
  for (const auto& p : inputs) {
    corpus.push_back(read_file(p));
    std::snprintf(g_what, sizeof(g_what), "corpus file %s", p.c_str());
    LLVMFuzzerTestOneInput(corpus.back().data(), corpus.back().size());
  }

  Rng rng{seed};
  Bytes b;
  g_input = &b;
  for (size_t m = 0; m < mutations; ++m) {
    const size_t base = rng.below(corpus.size());
    b = corpus[base];
    const size_t k = 1 + rng.below(4);
    for (size_t j = 0; j < k; ++j) mutate_once(b, corpus, rng, max_len);
    std::snprintf(g_what, sizeof(g_what), "mutation %zu of %s (seed %llu)", m, inputs[base].c_str(),
                  static_cast<unsigned long long>(seed));
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("%s: %zu corpus files and %zu mutations replayed, no finding\n", g_target, corpus.size(), mutations);
  return 0;
}
