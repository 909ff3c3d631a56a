// --inject-fault=crash:RANK:STEP|stall:RANK:STEP, a testing aid: at optimizer step STEP
// (counted from the start of training, across epochs, 1-based) rank RANK dies (SIGKILL, as a
// lost node would) or stops answering (sleeps forever inside the training loop, as a hung
// kernel would). With the first the job ends (mpirun takes down the other ranks); with the
// second the other ranks' next collective times out (--collective-timeout) and ends the job.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {
namespace train {

class FaultInjection {
 public:
  FaultInjection() = default;  // none
  // "crash:1:5", "stall:0:3"; throws naming what was wrong.
  static FaultInjection parse(const std::string& text);
  bool enabled() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  // Called after every optimizer step; fires on the chosen rank at the chosen step.
  void after_step(int my_rank, int64_t step) const;

 private:
  enum class Kind { kCrash, kStall };
  Kind kind_ = Kind::kCrash;
  int rank_ = -1;
  int64_t step_ = 0;
};

}  // namespace train
}  // namespace tessera
