// Distributed launch (docs/distributed.md): a launcher (mpirun, srun) sets its world size in the environment; such a
// process connects to its peers through the MPI plugin (dist/mpi_api.h), which is loaded only then.
#pragma once
#include <memory>
#include <string>

#include "runtime/communicator.h"

namespace ms {

struct Launch {
  int ranks = 1;   // the world size the launcher set (1: no launcher)
  std::string by;  // the variable that says so, for messages
};
// OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_SIZE (MPICH, Slurm's PMI-2), or SLURM_NTASKS beside PMIX_RANK
// (srun --mpi=pmix); ranks 1 without any.
Launch detect_launch();

// Rank r of the launched world, through the MPI plugin (libmegaslide_mpi.so beside the executable, or the file
// $MEGASLIDE_MPI_PLUGIN); SingleProcess where no launcher started more than one rank. Collectives that get no answer
// within timeout_s throw ms::Error naming the silent ranks. Throws ms::Error when the plugin is missing or MPI cannot
// start, saying what to do.
std::unique_ptr<Communicator> connect_ranks(double timeout_s);

}  // namespace ms
