// Stands in for the tests that include CUDA headers (cuda_runtime_test.cc) in a build without
// --config=cuda, so the target exists in every build and says why it did not run.
#include <gtest/gtest.h>

TEST(Cuda, NotBuilt) { GTEST_SKIP() << "built without --config=cuda: the CUDA tests did not run"; }
