// The rank the process launcher (mpirun, srun) gave this process, read from the
// environment before MPI starts (MPI_Init of a process no launcher started sets Open MPI's
// variables itself): OMPI_COMM_WORLD_RANK (Open MPI's mpirun), PMIX_RANK (any
// PMIx launcher), PMI_RANK (MPICH's hydra), SLURM_PROCID (srun).
//
// What the train tool finds before MPI_Init, a bad flag say, every rank finds alike; with this
// rank 0 alone prints it, so the user reads it once, not once per rank.
#pragma once

#include <optional>

namespace tessera {
namespace train {

// None when no launcher started this process (a plain ./train).
std::optional<int> launcher_rank();

// Whether this process prints what every rank finds alike: rank 0, or a process no launcher
// started.
bool prints_for_all_ranks();

}  // namespace train
}  // namespace tessera
