// ina-mpi-allreduce: OpenMPI MPI_Allreduce (MPI_FLOAT, MPI_SUM, in place)
// goodput, for `ina bench allreduce` and `scripts/netns-cluster --scheme mpi`.
//
//   mpirun -np N ina-mpi-allreduce BYTES ITERATIONS
//
// After one warm-up allreduce it times ITERATIONS allreduces of BYTES/4 floats,
// each after a barrier, and checks every result exactly (small-integer inputs:
// the float sum is exact in any order). Rank 0 prints `MPI_SECONDS <slowest
// rank's total time>`, then `MPI_CPUS <the fewest CPUs any rank may run on>`
// (its affinity mask: a launcher that binds every rank to the same core
// shows as 1). A result mismatch aborts with status 3.
#include <mpi.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "reference.hpp"


int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const long bytes = argc > 1 ? std::atol(argv[1]) : 0;
  const long iters = argc > 2 ? std::atol(argv[2]) : 0;
  if (bytes < 4 || bytes / 4 > 0x7fffffffL || iters < 1) {
    if (rank == 0) std::fprintf(stderr, "usage: ina-mpi-allreduce BYTES(4..8 GiB) ITERATIONS(>=1)\n");
    MPI_Finalize();
    return 2;
  }
  const long count = bytes / 4;
  std::vector<float> v(static_cast<size_t>(count));
  ina::baseline::fill(v, rank, 0);
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // warm-up
  double total = 0;
  for (long k = 0; k < iters; ++k) {
    ina::baseline::fill(v, rank, k);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    total += MPI_Wtime() - t0;
    const long bad = ina::baseline::mismatches(v, n, k);
    if (bad) {
      std::fprintf(stderr, "ina-mpi-allreduce: rank %d: %ld of %ld values differ from the exact sum\n", rank, bad, count);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  double slowest = 0;
  MPI_Reduce(&total, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
  int fewest = 0;
  MPI_Reduce(&cpus, &fewest, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("MPI_SECONDS %.9f\nMPI_CPUS %d\n", slowest, fewest);
  MPI_Finalize();
  return 0;
}
