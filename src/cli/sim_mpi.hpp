#pragma once
// `mpirun -np N ina sim FILE`: a scenario's runs spread over the ranks.
// Rank 0 coordinates: it hands out one run at a time to each rank that asks
// (and runs its own share on a second thread), gathers every run's outcome
// and writes exactly what a local `ina sim` writes, plus the rank of each run
// in runs.json. Ranks > 0 only run what they are given. libmpi is loaded
// (ina-mpi-transport.so, dlopen) only here, when OpenMPI launched ina.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiment/runner.hpp"

namespace ina::cli {

// True when OpenMPI's mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool launched_by_mpirun();
// The ranks mpirun started on this machine (OMPI_COMM_WORLD_LOCAL_SIZE; 1 if unset).
unsigned mpi_local_ranks();

class MpiSweep {
 public:
  // Loads ina-mpi-transport.so (next to the ina executable) and initializes
  // MPI; throws std::runtime_error naming what is missing. `split`
  // (--partition): every rank runs every run, each run split over the ranks
  // (split_executor, follow) instead of the runs spread over them.
  explicit MpiSweep(bool split = false);
  // Rank 0: stops every rank it has not stopped yet (waiting for its
  // current run) and finalizes MPI. Ranks > 0: finalizes MPI.
  ~MpiSweep();
  MpiSweep(const MpiSweep&) = delete;
  MpiSweep& operator=(const MpiSweep&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Rank 0: an executor for exp::run_scenario that runs on every rank.
  // `digest` identifies the scenario as rank 0 read it; a rank that read
  // another one is given no runs (and a warning says so).
  exp::RunExecutor executor(uint64_t digest);
  // Ranks > 0: runs what rank 0 hands out, until it says stop. `runs` are
  // this rank's expansion of the scenario, `digest` its identity; with
  // `setup_error` non-empty (the scenario did not load) the rank tells rank
  // 0 why and takes no runs.
  void serve(const std::vector<exp::ScenarioRun>& runs, uint64_t digest, const std::string& setup_error);

  // --partition, rank 0: an executor for exp::run_scenario that runs each
  // run split over every rank (sim::Ranks; the others follow()). It first
  // checks that every rank read the scenario of `digest` and as many runs,
  // and throws naming the ranks that did not.
  exp::RunExecutor split_executor(uint64_t digest);
  // --partition, ranks > 0: each run with rank 0, in order; with
  // `setup_error` non-empty (the scenario did not load) says why and runs none.
  void follow(const std::vector<exp::ScenarioRun>& runs, uint64_t digest, const std::string& setup_error);

 private:
  struct Api;
  void send(int dest, int tag, const std::string& data);
  // The next message from `source` (-1: any rank): its tag, sender and bytes; with `wait`, waits
  // for one (without spinning), else returns 0 if none is there.
  int receive(int source, bool wait, int* from, std::string* data);
  void stop(int rank);
  // Reports a message that breaks the protocol and ends the MPI job (a peer may be waiting).
  [[noreturn]] void protocol_error(const std::string& what);

  class Ranks;  // sim::Ranks over MPI_Alltoallv
  // --partition: every rank's first message (rank 0's "go", "stop"; the others' "ready", "broken").
  std::vector<std::string> hello(const std::string& mine);

  std::unique_ptr<Api> api_;
  std::unique_ptr<Ranks> ranks_;
  int rank_ = 0, size_ = 1;
  bool split_ = false, said_hello_ = false, split_done_ = false;
  std::vector<int> state_;  // rank 0: per rank, what it is doing (sim_mpi.cpp)
};

// FNV-1a over the bytes of `text`, continuing from `h` (the scenario's identity across ranks).
uint64_t digest_text(const std::string& text, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace ina::cli
