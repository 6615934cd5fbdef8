// ina-mpi-transport.so: the few MPI calls `ina sim` needs to spread a
// scenario's runs over the ranks of an `mpirun` (src/cli/sim_mpi.cpp). `ina`
// loads this module (dlopen) only when OpenMPI started it, so that a plain
// `ina` command neither links nor loads libmpi (docs/architecture.md, "Sweeps
// over MPI ranks"). Each function returns 0 on success or an MPI error code;
// COMM_WORLD returns errors instead of aborting, so that ina can report them.
#include <mpi.h>

#include <climits>
#include <vector>

extern "C" {

// `serialized`: one thread calls MPI at a time, not always the same (a run
// split over the ranks trades from whichever of its threads ends a window
// last); else only the main thread does (rank 0 runs its own share of a
// sweep's runs on another thread).
int ina_mpi_init(int* rank, int* size, int serialized) {
  int provided = 0;
  const int need = serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
  if (int rc = MPI_Init_thread(nullptr, nullptr, need, &provided)) return rc;
  if (provided < need) {
    MPI_Finalize();
    return MPI_ERR_OTHER;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) return rc;
  return MPI_Comm_size(MPI_COMM_WORLD, size);
}

// 1 and the message's source, tag and length if one from `from` (-1: any rank) is waiting, 0 if
// none, < 0 on an error.
int ina_mpi_poll(int from, int* source, int* tag, long* len) {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS) return -1;
  if (!flag) return 0;
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  *source = st.MPI_SOURCE;
  *tag = st.MPI_TAG;
  *len = n;
  return 1;
}

int ina_mpi_recv(int source, int tag, char* data, long len) {
  if (len > INT_MAX) return MPI_ERR_COUNT;
  return MPI_Recv(data, static_cast<int>(len), MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int ina_mpi_send(int dest, int tag, const char* data, long len) {
  if (len > INT_MAX) return MPI_ERR_COUNT;
  return MPI_Send(data, static_cast<int>(len), MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

// Every rank at once: send_len[r] bytes of `send` (in rank order) to rank r;
// recv_len[r] gets how many bytes rank r sent this one.
int ina_mpi_exchange_counts(const long* send_len, long* recv_len) {
  return MPI_Alltoall(send_len, 1, MPI_LONG, recv_len, 1, MPI_LONG, MPI_COMM_WORLD);
}

// Then the bytes: rank r's to this one land in `recv` in rank order.
int ina_mpi_exchange(const char* send, const long* send_len, char* recv, const long* recv_len) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  long so = 0, ro = 0;
  for (int r = 0; r < n; ++r) {
    if (send_len[r] > INT_MAX || recv_len[r] > INT_MAX || so > INT_MAX - send_len[r] || ro > INT_MAX - recv_len[r])
      return MPI_ERR_COUNT;
    sc[r] = static_cast<int>(send_len[r]);
    sd[r] = static_cast<int>(so);
    rc[r] = static_cast<int>(recv_len[r]);
    rd[r] = static_cast<int>(ro);
    so += send_len[r];
    ro += recv_len[r];
  }
  return MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD);
}

void ina_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int ina_mpi_finalize() { return MPI_Finalize(); }

void ina_mpi_error_string(int code, char* text, int cap) {
  char buf[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS) n = 0;
  int k = 0;
  for (; k < n && k + 1 < cap; ++k) text[k] = buf[k];
  if (cap > 0) text[k] = '\0';
}

}  // extern "C"
