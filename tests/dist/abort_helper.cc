// Run under mpirun by abort_test, in one of two scenarios (argv[1]):
//   throw:     rank 1 throws while every other rank waits in a barrier that rank 1 will never
//              reach. run_or_abort must end the whole job.
//   mismatch:  the ranks all-reduce tensors of different sizes (rank 0: 4 floats, the others:
//              1000). The ring's size check must name the collective instead of corrupting
//              memory or hanging.
//   async:     asynchronous SGD on 3 ranks: rank 0 serves, worker rank 2 fails after 3 pushes
//              while the server waits for requests and worker rank 1 pushes on. The job must
//              end, not leave the server waiting.
//   all:       every rank throws the same error: it must be printed once, by rank 0.
//   computing: 3 ranks all-reduce once; then rank 1 computes (sleeps 30 s) while ranks 0 and 2
//              all-reduce again and time out (2 s): the desync report must show rank 1's last
//              collective (#1) and rank 2 waiting in #2.
//   unjoined:  rank 0 alone all-reduces (the `if (rank == 0) save(state_dict())` habit) and
//              times out (2 s) while rank 1 has ended its program: the report must say so.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "dist/async/async_worker.h"
#include "dist/async/parameter_server.h"
#include "dist/environment.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace {

int async_worker_dies(tessera::dist::ProcessGroup& world) {
  using namespace tessera;
  auto group = dist::world();
  Variable p(zeros({16}), true);
  const dist::AsyncOptions options;  // one server, unbounded
  if (world.rank() == 0) {
    dist::ParameterServer server({p}, group, [](std::vector<Variable> shard) {
      return std::make_unique<optim::SGD>(shard, optim::SGDOptions(0.1));
    }, options);
    server.serve_to_end();  // never ends: worker rank 2 is gone
    return 0;
  }
  dist::AsyncWorker worker({p}, group, 0.1, options);
  for (int t = 0; t < 1000000; ++t) {
    if (world.rank() == 2 && t == 3) TS_FAIL("worker rank 2 failed on purpose");
    worker.pull();
    p.set_grad(ones({16}));
    worker.step();
  }
  worker.finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = tessera::dist::init(&argc, &argv);
  const bool mismatch = argc > 1 && std::strcmp(argv[1], "mismatch") == 0;
  const bool async = argc > 1 && std::strcmp(argv[1], "async") == 0;
  const std::string scenario = argc > 1 ? argv[1] : "throw";
  if (scenario == "computing" || scenario == "unjoined") tessera::dist::set_collective_timeout(2);
  return tessera::dist::run_or_abort([&] {
    if (async) return async_worker_dies(*world);
    if (mismatch) {
      tessera::Tensor t = tessera::ones({world->rank() == 0 ? 4 : 1000});
      world->all_reduce(t)->wait();
      return 0;
    }
    if (scenario == "all") TS_FAIL("every rank fails alike");
    if (scenario == "computing") {
      tessera::Tensor t = tessera::ones({8});
      world->all_reduce(t)->wait();  // all_reduce #1, every rank
      if (world->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
      world->all_reduce(t)->wait();  // all_reduce #2: rank 1 is late
      return 0;
    }
    if (scenario == "unjoined") {
      tessera::Tensor t = tessera::ones({8});
      if (world->rank() == 0) world->all_reduce(t)->wait();  // rank 1 never joins
      return 0;
    }
    if (world->rank() == 1) TS_FAIL("rank 1 failed on purpose");
    world->barrier()->wait();  // never completes: rank 1 is gone
    return 0;
  });
}
