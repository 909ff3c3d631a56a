// The ring all-reduce as lecturers draw it on the board: each rank's buffer, cut into N chunks,
// after every step, and an arrow for every chunk on the wire. A row per state (before the first
// step, then after each of the 2 (N-1) steps), a column per rank; each chunk box says whose
// contributions it holds ("0+1": ranks 0's and 1's summed; "all": every rank's) and is shaded
// darker the more it holds; the arrows of step s go from the sender's chunk in row s to the
// receiver's chunk in row s+1 (rank N-1's to rank 0's around the ring, dashed):
//
//            rank 0          rank 1          rank 2
//   start   [0 ][0 ][0 ]    [1 ][1 ][1 ]    [2 ][2 ][2 ]
//                  \               \   ...
//   step 0  [0 ][0 ][0+2]   [0+1][1 ][1 ]   [2 ][1+2][2 ]
//
// The contents are played from dist/ring_schedule.h's steps (the schedule ProcessGroupMPI runs):
// a reduce-scatter step adds what arrives, an all-gather step copies it.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace tessera {
namespace explain {

// holds[step][rank][chunk]: the ranks whose contributions that chunk holds after `step` steps
// (step 0: before the first), for N ranks.
std::vector<std::vector<std::vector<std::set<int>>>> ring_buffer_states(int ranks);

// The picture; each chunk box carries data-state, data-rank, data-chunk and data-holds ("0,1"),
// each arrow data-step, data-from, data-to and data-chunk, for tests to read back.
std::string ring_buffers_svg(int ranks, const std::string& title);

}  // namespace explain
}  // namespace tessera
