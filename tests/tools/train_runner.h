// Runs the train tool as a user would, one process or under mpirun, for the tool's multi-rank
// test binaries: their main() takes the mpirun wrapper and the train binary as arguments
// (Bazel passes their locations).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/util/test_util.h"

namespace tessera {
namespace testing {

struct TrainBinaries {
  std::string runner;  // tools/mpi_run.sh
  std::string train;   // tools/train
};

// The multi-rank tests' short run: the MLP (a layer with parameters in each pipeline stage:
// Flatten + Linear, ReLU + Linear) on 2000 images in batches of 64 per rank, one epoch, seed 3,
// then a full test-set evaluation.
inline const std::string kShortMlp =
    "--model=mlp --train-limit=2000 --epochs=1 --threads=1 --seed=3 ";

inline TrainBinaries& train_binaries() {
  static TrainBinaries b;
  return b;
}

// `ranks` processes under mpirun.
inline CommandResult run_train(const std::string& flags, int ranks = 2) {
  return run_command(train_binaries().runner + " " + std::to_string(ranks) + " " +
                     train_binaries().train + " " + flags);
}

// One process, without mpirun.
inline CommandResult run_train_single(const std::string& flags) {
  return run_command(train_binaries().train + " " + flags);
}

// main() of a test binary given MPI_RUN TRAIN.
inline int train_test_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MPI_RUN TRAIN\n", argv[0]);
    return 2;
  }
  train_binaries() = {argv[1], argv[2]};
  return RUN_ALL_TESTS();
}

}  // namespace testing
}  // namespace tessera
