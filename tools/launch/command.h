// The command the elastic launcher runs (tools/launch/main.cc), and how it changes between
// attempts. The user's command is a launcher and the train tool, e.g.
//
//   mpirun -np 4 --oversubscribe --hostfile hosts bazel-bin/tools/train --model=mlp --checkpoint-dir=ck
//   srun -n 4 --mpi=pmix bazel-bin/tools/train ... --checkpoint-dir=ck
//
// and attempt k (0 the first) runs it as
//
//   mpirun -x TESSERA_RESTART_COUNT -np R ... train ... --checkpoint-dir=ck [--resume=ck]
//
// with R the ranks this attempt gets (the slots left, at most the original N), --resume when
// ck holds a committed checkpoint (the train tool then takes the newest whose hashes check, or
// the one before it), and the environment's TESSERA_RESTART_COUNT=k (the train tool reports
// it as "restarts" and fires --inject-fault only when it is 0). mpirun's -x forwards the
// variable to every node (srun forwards the whole environment by default).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace tessera {
namespace launch {

class LaunchCommand {
 public:
  // Throws, naming the argument, unless the command starts with mpirun/mpiexec/orterun or
  // srun (any path) and has its rank count (-np N, -n N, --np N, --n N, --ntasks N, and the
  // =N forms), and the train tool's flags (the --name=value arguments that end the command)
  // pass its flag checker with a restart (the support table: a --checkpoint-dir=DIR to restart
  // from); --resume is the launcher's own (refused in the command).
  explicit LaunchCommand(std::vector<std::string> argv);

  int ranks() const { return ranks_; }
  const std::string& checkpoint_dir() const { return train_.checkpoint_dir; }
  // The hostfile the command passes to mpirun (--hostfile F, -hostfile F, --machinefile F,
  // -machinefile F), or none.
  const std::optional<std::string>& hostfile() const { return hostfile_; }
  bool is_mpirun() const { return mpirun_; }

  // The most ranks, at most `available`, the train tool's flags can run on: a multiple of
  // --stages x --tensor-parallel (each a stage's tensor-parallel group, each replica the
  // pipeline), and more than --servers for --strategy=async; 0 when none fits.
  int fitting_ranks(int available) const;
  // What the ranks must be a multiple of, and more than, for messages ("--stages=2 x
  // --tensor-parallel=2").
  std::string fitting_rule() const;

  // Throws, with the support table's reason, when the train tool's flags cannot be restarted
  // so: "same-ranks" (checked by the constructor) or "fewer-ranks" (before such an attempt).
  void check_restart(const std::string& restart) const;

  // The argv of an attempt on `ranks` ranks, resuming from the checkpoint directory if asked.
  std::vector<std::string> for_attempt(int ranks, bool resume) const;

 private:
  std::vector<std::string> argv_;
  size_t ranks_at_ = 0;   // the index of the rank count's value in argv_
  bool ranks_joined_ = false;  // "-np=4": the flag and value in one argument
  std::string ranks_flag_;
  int ranks_ = 0;
  bool mpirun_ = false;
  train::Config train_;  // the train tool's flags (tools/train/flags.h)
  std::optional<std::string> hostfile_;
  int stages_ = 1, tensor_parallel_ = 1;  // --stages, --tensor-parallel of the train tool
  int context_parallel_ = 1;              // and --context-parallel
  int servers_ = 0;                       // --servers of --strategy=async (else 0)
};

// Whether `dir` holds a committed checkpoint the train tool's --resume=dir would read (a
// DIR/step-NNNNNNNN/ with its commit file, or the layout before: last.safetensors,
// last-sharded/index.safetensors; dist/checkpoint.h).
bool has_checkpoint(const std::string& dir);

}  // namespace launch
}  // namespace tessera
