// main() for tests run under mpirun: initializes the distributed environment, lets rank 0
// report everything and the others only their failures, and fails every rank if one failed.
#include <gtest/gtest.h>

#include "dist/environment.h"
#include "tensor/tensor.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto world = tessera::dist::init(&argc, &argv);
  if (world->rank() != 0) GTEST_FLAG_SET(brief, true);
  const int failed = RUN_ALL_TESTS();
  tessera::Tensor any = tessera::scalar_tensor(failed, tessera::kI64);
  world->all_reduce(any, tessera::dist::ReduceOp::kMax)->wait();
  tessera::dist::finalize();
  return any.item() != 0 ? 1 : 0;
}
