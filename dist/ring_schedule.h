// The ring collectives' schedule: which chunk each rank sends to its right-hand neighbour and
// receives from its left at each step (process_group_mpi.h draws it). The buffer is cut into N
// chunks; chunk k ends fully reduced on rank k after the reduce-scatter pass, and every rank
// holds every chunk after the all-gather pass:
//
//   reduce-scatter, step s = 0 .. N-2: rank r sends chunk (r-1-s) mod N, receives chunk
//                                      (r-2-s) mod N and adds it into its own copy
//   all-gather,     step s = 0 .. N-2: rank r sends chunk (r-s) mod N, receives (r-1-s) mod N
//
// Pure arithmetic, shared by ProcessGroupMPI (which runs it) and explain ring (which draws it).
#pragma once

namespace tessera {
namespace dist {

struct RingStep {
  int send_chunk = 0, receive_chunk = 0;
};

// 0 <= rank < size, 0 <= step < size - 1.
RingStep reduce_scatter_step(int rank, int size, int step);
RingStep all_gather_step(int rank, int size, int step);

}  // namespace dist
}  // namespace tessera
