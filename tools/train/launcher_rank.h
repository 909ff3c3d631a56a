// The rank the process launcher (mpirun, srun) gave this process, read from the
// environment before MPI starts (MPI_Init of a process no launcher started sets Open MPI's
// variables itself): OMPI_COMM_WORLD_RANK (Open MPI's mpirun), PMIX_RANK (any
// PMIx launcher), PMI_RANK (MPICH's hydra), SLURM_PROCID (srun).
//
// What the train tool finds before MPI_Init, a bad flag say, every rank finds alike; with this
// rank 0 prints it at once and the others wait to be ended by mpirun, so the user reads it
// once, not once per rank (flags.cc).
#pragma once

#include <optional>

namespace tessera {
namespace train {

// None when no launcher started this process (a plain ./train).
std::optional<int> launcher_rank();

}  // namespace train
}  // namespace tessera
