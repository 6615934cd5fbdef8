// ina-gloo-allreduce: one rank of gloo's ring allreduce (the algorithm
// c10d::ProcessGroupGloo uses for dense CPU tensors), for `ina bench allreduce`
// and `scripts/netns-cluster --scheme gloo`. Links libgloo only (no libtorch).
//
//   ina-gloo-allreduce --rank R --workers N --bytes B --iterations K
//                      --store DIR [--host ADDR] [--timeout S]
//
// Rendezvous through a gloo FileStore in DIR (a directory every rank can see;
// network namespaces share the file system). The TCP device binds ADDR
// (default 127.0.0.1). After one warm-up allreduce it times K allreduces of
// B/4 floats, each between barriers, and checks every result exactly (the
// inputs are small integers, so the float sum is exact in any order). Rank 0
// prints `GLOO_SECONDS <slowest rank's total time>`. Exit status 0 ok, 2 usage,
// 3 a result differed, 1 any other failure (rendezvous timeout, I/O error).
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "reference.hpp"

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ina-gloo-allreduce: %s\nusage: ina-gloo-allreduce --rank R --workers N --bytes B --iterations K "
               "--store DIR [--host ADDR] [--timeout S]\n",
               why);
  std::exit(2);
}

long number(const char* flag, const char* v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (!*v || *end || x < lo || x > hi) {
    std::fprintf(stderr, "ina-gloo-allreduce: %s must be a whole number in [%ld, %ld] (got '%s')\n", flag, lo, hi, v);
    std::exit(2);
  }
  return x;
}


}  // namespace

int main(int argc, char** argv) {
  long rank = -1, workers = 0, bytes = 0, iterations = 0, timeout_s = 120;
  std::string store_dir, host = "127.0.0.1";
  for (int a = 1; a < argc; a += 2) {
    const std::string flag = argv[a];
    if (a + 1 >= argc) usage(("missing value after " + flag).c_str());
    const char* v = argv[a + 1];
    if (flag == "--rank") rank = number("--rank", v, 0, 1023);
    else if (flag == "--workers") workers = number("--workers", v, 1, 1024);
    else if (flag == "--bytes") bytes = number("--bytes", v, 4, 1L << 34);
    else if (flag == "--iterations") iterations = number("--iterations", v, 1, 1000000);
    else if (flag == "--timeout") timeout_s = number("--timeout", v, 1, 86400);
    else if (flag == "--store") store_dir = v;
    else if (flag == "--host") host = v;
    else usage(("unknown option '" + flag + "'").c_str());
  }
  if (rank < 0 || workers == 0 || bytes == 0 || iterations == 0 || store_dir.empty())
    usage("--rank, --workers, --bytes, --iterations and --store are required");
  if (rank >= workers) usage("--rank must be below --workers");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(store_dir);
    gloo::rendezvous::PrefixStore store("ina-bench", file_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(rank), static_cast<int>(workers));
    context->setTimeout(std::chrono::seconds(timeout_s));
    context->connectFullMesh(store, device);

    const long count = bytes / 4;
    std::vector<float> v(static_cast<size_t>(count));
    auto allreduce = [&] {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(v.data(), v.size());
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(1);
      gloo::allreduce(opts);
    };
    auto barrier = [&] {
      gloo::BarrierOptions opts(context);
      opts.setTag(2);
      gloo::barrier(opts);
    };
    ina::baseline::fill(v, rank, 0);
    allreduce();  // warm-up: connections and buffers
    double total = 0;
    for (long k = 0; k < iterations; ++k) {
      ina::baseline::fill(v, rank, k);
      barrier();
      const auto t0 = std::chrono::steady_clock::now();
      allreduce();
      total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const long bad = ina::baseline::mismatches(v, workers, k);
      if (bad) {
        std::fprintf(stderr, "ina-gloo-allreduce: rank %ld: %ld of %ld values differ from the exact sum\n", rank, bad,
                     count);
        return 3;
      }
    }
    double slowest = total;  // the slowest rank's total time, known to all
    gloo::AllreduceOptions opts(context);
    opts.setOutput(&slowest, 1);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    opts.setTag(3);
    gloo::allreduce(opts);
    if (rank == 0) std::printf("GLOO_SECONDS %.9f\n", slowest);
    barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ina-gloo-allreduce: rank %ld (host %s, store %s): %s\n", rank, host.c_str(),
                 store_dir.c_str(), e.what());
    return 1;
  }
}
