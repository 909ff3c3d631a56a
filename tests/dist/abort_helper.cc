// Run under mpirun by abort_test, in one of two scenarios (argv[1]):
//   throw:     rank 1 throws while every other rank waits in a barrier that rank 1 will never
//              reach. run_or_abort must end the whole job.
//   mismatch:  the ranks all-reduce tensors of different sizes (rank 0: 4 floats, the others:
//              1000). The ring's size check must name the collective instead of corrupting
//              memory or hanging.
#include <cstring>

#include "dist/environment.h"
#include "tensor/ops.h"

int main(int argc, char** argv) {
  auto world = tessera::dist::init(&argc, &argv);
  const bool mismatch = argc > 1 && std::strcmp(argv[1], "mismatch") == 0;
  return tessera::dist::run_or_abort([&] {
    if (mismatch) {
      tessera::Tensor t = tessera::ones({world->rank() == 0 ? 4 : 1000});
      world->all_reduce(t)->wait();
      return 0;
    }
    if (world->rank() == 1) TS_FAIL("rank 1 failed on purpose");
    world->barrier()->wait();  // never completes: rank 1 is gone
    return 0;
  });
}
