// The distributed environment: MPI start-up, the world group, sub-groups, and ending a job on
// error.
//
//   mpirun -np 4 train ...     each process calls dist::init() and gets the world (size 4)
//   ./train ...                 without mpirun the world has size 1
//
// MPI is initialized with MPI_THREAD_MULTIPLE: every group's communication thread calls MPI
// on its own. An error on one rank must not leave the others waiting forever in a collective:
// run_or_abort() (and the terminate handler init() installs) print the error with the rank and
// call MPI_Abort, which ends every process of the job; an error every rank meets is printed
// once, by the lowest rank that met it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/collective_timeout.h"
#include "dist/process_group.h"

namespace tessera {
namespace dist {

// Initializes MPI once (later calls return the same world). argc/argv may be null.
std::shared_ptr<ProcessGroup> init(int* argc = nullptr, char*** argv = nullptr);
// The world group; init() must have been called.
std::shared_ptr<ProcessGroup> world();
// A group of the given world ranks, in that order. Collective: every world rank must call it
// with the same list (ranks outside it get nullptr). It starts with the world's network
// emulation.
std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);
// Network emulation (network_emulation.h) for the world and every group made so far; groups
// made later (new_group, Topology) inherit it from the world. Not collective, but every rank
// must set the same (a tool sets it from its flags, after init()). One group can then be given
// another setting with ProcessGroup::set_network_emulation (say, inter-node groups slower).
// Throws, naming the value, on a negative latency or a bandwidth that is not > 0.
void set_network_emulation(const NetworkEmulation& emulation);
// Drains every group, waits for every rank to reach finalize (answering desync queries
// meanwhile: desync_report.h) and finalizes MPI (also registered with atexit by init()).
void finalize();

// Prints "[rank R] error: message" and ends the whole job with `code`. Once per job: rank R > 0
// waits 0.2 s x R (at most 2 s) before printing, so that when several ranks fail together
// the lowest one's message is the one printed (its MPI_Abort ends the others first).
[[noreturn]] void abort_job(const std::string& message, int code = 1);
// Runs body; an exception on any rank aborts the job with its message.
int run_or_abort(const std::function<int()>& body);

}  // namespace dist
}  // namespace tessera
