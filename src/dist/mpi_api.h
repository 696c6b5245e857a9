// The C interface between megaslide and its MPI plugin, libmegaslide_mpi.so (src/dist/mpi_plugin/). The main binary
// never links MPI: a run without a launcher needs no MPI library at all, and the GPU bundle stays free of it. Under
// mpirun or srun it loads the plugin (dist/mpi.h), which is built against the system's MPI and exports
// ms_mpi_api(). Plain C types only, and no exception crosses it.
#pragma once
#include <stddef.h>

extern "C" {

// Results of the calls below: ms_mpi_ok, or a failure whose message is in err.
enum { ms_mpi_ok = 0, ms_mpi_timeout = 1, ms_mpi_error = 2 };
enum { ms_mpi_api_version = 1 };

struct MsMpiApi {
  int version;  // ms_mpi_api_version
  // MPI_Init_thread at MPI_THREAD_MULTIPLE (needed: each channel's collectives come from the thread of one stream)
  // and one duplicated communicator per channel; this rank, the world's size, and the rank and size among the ranks
  // on this machine.
  int (*init)(int channels, int* rank, int* size, int* local_rank, int* local_size, char* err, size_t err_len);
  // On channel c: part j of send (`bytes` each) goes to rank j, part j of recv comes from rank j (this rank's own
  // part copied). gather != 0: an allgather in place instead, where send is null and this rank's part of recv is
  // what it sends to every rank. ms_mpi_timeout when some part has not arrived after timeout_s: missing[j] is
  // then 1 for each rank j not heard from (size entries).
  int (*exchange)(int channel, const void* send, void* recv, size_t bytes, int gather, double timeout_s, int* missing,
                  char* err, size_t err_len);
  void (*abort)(int code);  // MPI_Abort on the world: mpirun ends every rank
  void (*finalize)(void);
};

typedef const MsMpiApi* (*MsMpiApiGetter)(void);
}
