// libmegaslide_mpi.so: MPI behind dist/mpi_api.h. Collectives are point-to-point messages with every peer, polled
// against a deadline, so that a peer that hangs or died is named instead of waited on for ever; the volume each
// rank sends equals a ring's ((size - 1) parts), and nothing is summed here (dist/mpi.h sums in rank order).
#include <mpi.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dist/mpi_api.h"

namespace {

std::vector<MPI_Comm> g_comms;  // one per channel
int g_rank = 0, g_size = 1;

void describe(int code, const char* what, char* err, size_t err_len) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error %d", code);
  std::snprintf(err, err_len, "%s: %s", what, text);
}

// Messages of at most 1 GiB (MPI counts are int); a part of 0 bytes is still one message, which synchronises.
constexpr size_t kPiece = size_t(1) << 30;

int init(int channels, int* rank, int* size, int* local_rank, int* local_size, char* err, size_t err_len) {
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return describe(rc, "MPI_Init_thread", err, err_len), ms_mpi_error;
  if (provided < MPI_THREAD_MULTIPLE) {
    std::snprintf(err, err_len,
                  "this MPI library does not provide MPI_THREAD_MULTIPLE (it gives level %d); megaslide's streams "
                  "issue collectives from several threads. Use an MPI built with thread support (Debian's OpenMPI is)",
                  provided);
    return ms_mpi_error;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_comms.assign(size_t(channels), MPI_COMM_NULL);
  for (MPI_Comm& c : g_comms) {
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c)) != MPI_SUCCESS)
      return describe(rc, "MPI_Comm_dup", err, err_len), ms_mpi_error;
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  }
  MPI_Comm local;
  if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local)) != MPI_SUCCESS)
    return describe(rc, "MPI_Comm_split_type", err, err_len), ms_mpi_error;
  MPI_Comm_rank(local, local_rank);
  MPI_Comm_size(local, local_size);
  MPI_Comm_free(&local);
  *rank = g_rank;
  *size = g_size;
  return ms_mpi_ok;
}

int exchange(int channel, const void* send, void* recv, size_t bytes, int gather, double timeout_s, int* missing,
             char* err, size_t err_len) {
  MPI_Comm comm = g_comms[size_t(channel)];
  char* in = static_cast<char*>(recv);
  const char* out = gather ? in + size_t(g_rank) * bytes : static_cast<const char*>(send);
  std::vector<MPI_Request> receives, sends;
  std::vector<int> from;  // the rank of each receive
  for (int j = 0; j < g_size; ++j) {
    if (j == g_rank) continue;
    for (size_t at = 0; at == 0 || at < bytes; at += kPiece) {
      const int n = int(std::min(kPiece, bytes - at));
      MPI_Request rq, sq;
      int rc = MPI_Irecv(in + size_t(j) * bytes + at, n, MPI_BYTE, j, 0, comm, &rq);
      if (rc == MPI_SUCCESS)
        rc = MPI_Isend(gather ? out + at : out + size_t(j) * bytes + at, n, MPI_BYTE, j, 0, comm, &sq);
      if (rc != MPI_SUCCESS) return describe(rc, "posting a message", err, err_len), ms_mpi_error;
      receives.push_back(rq);
      from.push_back(j);
      sends.push_back(sq);
    }
  }
  if (!gather && bytes) std::memcpy(in + size_t(g_rank) * bytes, out + size_t(g_rank) * bytes, bytes);
  // Poll, yielding the core (ranks may share cores), then sleeping a little longer each time up to 200 us.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  long nap_ns = 1000;
  for (int polls = 0;; ++polls) {
    int done_r = 0, done_s = 0;
    int rc = MPI_Testall(int(receives.size()), receives.data(), &done_r, MPI_STATUSES_IGNORE);
    if (rc == MPI_SUCCESS) rc = MPI_Testall(int(sends.size()), sends.data(), &done_s, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return describe(rc, "a collective", err, err_len), ms_mpi_error;
    if (done_r && done_s) return ms_mpi_ok;
    if (std::chrono::steady_clock::now() > deadline) break;
    if (polls < 64) {
      sched_yield();
    } else {
      timespec ts{0, nap_ns};
      nanosleep(&ts, nullptr);
      nap_ns = std::min(nap_ns * 2, 200000L);
    }
  }
  std::fill(missing, missing + g_size, 0);
  for (size_t i = 0; i < receives.size(); ++i) {
    int done = 0;
    MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE);
    if (!done) missing[from[i]] = 1;
  }
  std::snprintf(err, err_len, "no answer within %g s", timeout_s);
  return ms_mpi_timeout;
}

void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void finalize() {
  for (MPI_Comm& c : g_comms) MPI_Comm_free(&c);
  MPI_Finalize();
}

const MsMpiApi kApi{ms_mpi_api_version, init, exchange, abort_all, finalize};

}  // namespace

extern "C" __attribute__((visibility("default"))) const MsMpiApi* ms_mpi_api() { return &kApi; }
