// OverlapTimeline: a step played on two clocks, the compute stream and one communication
// stream, the way DDP and ZeRO-3 overlap collectives with backward (one communication thread on
// CPU, one NCCL stream on GPU: collectives run one at a time, in issue order).
//
//   compute   | bwd L3 | bwd L2 | bwd L1 | bwd L0 |.wait.|
//   comm               | all-reduce b0 |      | all-reduce b1 |
//                      ^ launched when bucket 0 is full        ^ step ends
//
//   compute(t)   the compute stream works t seconds
//   launch(c)    a collective of c seconds starts once it is issued (now, on the compute clock)
//                and the communication stream has finished the previous one
//   wait(id)     the compute stream stalls until that collective has ended
//
// Assumed: a running collective does not slow the computation (no shared memory bandwidth or
// cores), and issuing one costs nothing.
#pragma once

#include <vector>

namespace tessera {
namespace cost {

class OverlapTimeline {
 public:
  void compute(double seconds);
  int launch(double seconds);  // returns the collective's id
  void wait(int id);
  void wait_all();

  double now() const { return compute_clock_; }  // the compute stream's clock
  double compute_seconds() const { return computing_; }
  double communication_seconds() const { return communicating_; }
  // Time the compute stream spent waiting for collectives: now() - compute_seconds().
  double exposed_seconds() const { return compute_clock_ - computing_; }
  double end(int id) const { return ends_.at(id); }

 private:
  double compute_clock_ = 0, comm_clock_ = 0;
  double computing_ = 0, communicating_ = 0;
  std::vector<double> ends_;
};

}  // namespace cost
}  // namespace tessera
