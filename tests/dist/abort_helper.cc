// Run under mpirun by abort_test: rank 1 throws while every other rank waits in a barrier that
// rank 1 will never reach. run_or_abort must end the whole job.
#include "dist/environment.h"

int main(int argc, char** argv) {
  auto world = tessera::dist::init(&argc, &argv);
  return tessera::dist::run_or_abort([&] {
    if (world->rank() == 1) TS_FAIL("rank 1 failed on purpose");
    world->barrier()->wait();  // never completes: rank 1 is gone
    return 0;
  });
}
