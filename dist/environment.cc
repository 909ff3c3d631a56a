#include "dist/environment.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "dist/desync_report.h"
#include "dist/mpi_check.h"
#include "dist/process_group_mpi.h"

namespace tessera {
namespace dist {

namespace {

std::mutex g_mutex;
std::shared_ptr<ProcessGroupMPI> g_world;
std::vector<std::weak_ptr<ProcessGroupMPI>> g_groups;  // every group made, to drain at finalize

int world_rank() {
  int initialized = 0, finalized = 0, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void on_terminate() {
  std::string what = "terminate called without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "unknown exception";
    }
  }
  abort_job("uncaught: " + what);
}

}  // namespace

std::shared_ptr<ProcessGroup> init(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_world) return g_world;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    TS_CHECK(provided >= MPI_THREAD_MULTIPLE, "dist::init: this MPI provides thread level ",
             provided, ", tessera needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
             ") for its communication threads");
  }
  int size = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<int> ranks(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  g_world = std::make_shared<ProcessGroupMPI>(MPI_COMM_WORLD, ranks);
  start_desync_channel();  // desync_report.h: what each rank does when a wait times out
  g_groups.push_back(g_world);
  std::set_terminate(on_terminate);
  std::atexit(finalize);
  return g_world;
}

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard<std::mutex> lock(g_mutex);
  TS_CHECK(g_world != nullptr, "dist::world: call dist::init() first");
  return g_world;
}

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) {
  std::shared_ptr<ProcessGroupMPI> w = std::static_pointer_cast<ProcessGroupMPI>(world());
  TS_CHECK(!ranks.empty(), "new_group: empty rank list");
  int position = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    TS_CHECK(ranks[i] >= 0 && ranks[i] < w->size(), "new_group: rank ", ranks[i],
             " outside a world of ", w->size());
    for (size_t j = 0; j < i; ++j) TS_CHECK(ranks[j] != ranks[i], "new_group: rank ", ranks[i], " twice");
    if (ranks[i] == w->rank()) position = static_cast<int>(i);
  }
  // Collective over the world: members get color 0 and their position as key, others nothing.
  const MPI_Comm comm = w->split(position >= 0 ? 0 : MPI_UNDEFINED, position);
  if (comm == MPI_COMM_NULL) return nullptr;
  auto group = std::make_shared<ProcessGroupMPI>(comm, ranks);
  const NetworkEmulation emulation = w->network_emulation();
  if (emulation.enabled()) group->set_network_emulation(emulation);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_groups.push_back(group);
  return group;
}

void set_network_emulation(const NetworkEmulation& emulation) {
  emulation.check("dist::set_network_emulation");
  std::lock_guard<std::mutex> lock(g_mutex);
  TS_CHECK(g_world != nullptr, "dist::set_network_emulation: call dist::init() first");
  for (auto& weak : g_groups) {
    if (auto group = weak.lock()) group->set_network_emulation(emulation);
  }
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  for (auto& weak : g_groups) {
    if (auto group = weak.lock()) group->shutdown();
  }
  g_groups.clear();
  g_world.reset();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    // Wait for every rank here, answering desync queries meanwhile (desync_report.h): a rank
    // still in a collective this one never joined (rank 0 alone gathering a state_dict, say)
    // then learns from its timeout's report that this one has ended its program.
    static const std::string ended = "dist::finalize (this rank's program has ended)";
    const WaitingFor waiting(ended, -1);
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    for (int done = 0; !done;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  stop_desync_channel();
  MPI_Finalize();
}

void abort_job(const std::string& message, int code) {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool running = initialized && !finalized;
  if (running) MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rank = world_rank();
  // Said once. An error every rank meets (a missing file, a guard every rank runs, a collective
  // every rank waits in) would otherwise be printed by each. Rank 0 speaks at once; rank r waits
  // 0.2 s x r (at most 2 s) first, and is ended silently by MPI_Abort if a lower rank failed
  // too. A rank that fails alone is still heard, that much later.
  if (running && size > 1 && rank > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * std::min(rank, 10)));
  }
  std::fprintf(stderr, "[rank %d] error: %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (running) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

int run_or_abort(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

}  // namespace dist
}  // namespace tessera
