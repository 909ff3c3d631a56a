// Straggler emulation: one rank computes FACTOR times as slowly as the others. After each
// measured piece of compute the straggler sleeps (FACTOR - 1) times its duration, so a run on
// one machine shows what synchronous algorithms (every rank waits for the slowest) and
// asynchronous or decentralized ones do with a slow worker.
//
//   rank 0   [compute]................[all-reduce]       the others wait at the collective
//   rank 1   [compute][sleep (F-1) x ][all-reduce]       the straggler (F = 2)
#pragma once

#include <string>

namespace tessera {
namespace dist {

class StragglerEmulation {
 public:
  // Off.
  StragglerEmulation() = default;
  // `rank` is the straggler; factor >= 1 (1: no slow-down). Errors name the values.
  StragglerEmulation(int rank, double factor);
  // "RANK:FACTOR", as the train tool's --straggler takes it.
  static StragglerEmulation parse(const std::string& text);

  // On the straggler, sleeps (factor - 1) x compute_seconds; elsewhere returns at once.
  void after_compute(int my_rank, double compute_seconds);
  bool enabled() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  double factor() const { return factor_; }
  double slept_seconds() const { return slept_; }

 private:
  int rank_ = -1;
  double factor_ = 1;
  double slept_ = 0;
};

}  // namespace dist
}  // namespace tessera
