// Validator: runs every stage's action list together and proves the schedule is sound.
//
// The lists are played as the ranks would play them, under one of two transports:
//   * blocking (the default): a send waits until its receiver stands at the matching receive
//     (same micro-batch, chunk and kind), the strictest transport: a schedule that passes here
//     cannot hang on any transport. A send and its receive complete together at the later of
//     the two clocks.
//   * buffered: a send returns at once (MPI_Isend, what the executor uses) and its message
//     queues on the link; a receive takes the oldest message of its link and it must be the
//     one expected (the executor checks each message's header the same way).
// Compute actions take one time slot.
//
//   stage 0:  F0 SA0 F1 SA1 ...          stage 0's SA0 meets stage 1's RA0: both advance
//   stage 1:  RA0 F0 RA1 F1 ...          a head that can never be met: a deadlock, reported
//                                        with every stuck stage and what it waits for
//
// It checks, and says which rule broke (an Error naming stage, action and micro-batch):
//   * every micro-batch forwarded and backwarded exactly once per stage (per chunk), every
//     message a virtual stage must send or receive present exactly once, none that it must not;
//   * dependencies on each stage: F i after its activation arrived, B i after F i and after its
//     gradient arrived, a send after the computation that produces it;
//   * sends and receives meet in the same order on both ends; no deadlock.
// And it measures, on the simulated clock: peak micro-batches in flight per stage (forwarded,
// not yet backwarded: GPipe M, 1F1B min(K-s, M)), and each stage's idle fraction beside the
// theory (K-1)/(vM+K-1).
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule.h"

namespace tessera {
namespace pipeline {

// A computation placed on the simulated clock.
struct TimedAction {
  long start;  // slot index
  Action action;
};

struct StageReport {
  int peak_in_flight = 0;  // micro-batch chunks whose activations are held at once
  long busy_slots = 0;     // slots spent computing
  double idle_fraction = 0;  // 1 - busy / makespan
  std::vector<TimedAction> timeline;
};

struct ValidationReport {
  int stages = 0, microbatches = 0, chunks = 1;
  long makespan = 0;  // slots until the last stage finishes
  std::vector<StageReport> stage;
  double bubble_theory() const;    // (K-1)/(vM+K-1)
  double bubble_simulated() const;  // the largest idle fraction of any stage
  // One line per stage: peak in flight and idle fraction, then the theory.
  std::string str() const;
};

enum class Transport { kBlocking, kBuffered };

// schedules[s] is stage s's list (make_schedules()). Throws tessera::Error on any violation.
// With backward = false the lists are forward-only (evaluation): no backward or gradient
// message may appear, and none is required.
ValidationReport validate(const std::vector<std::vector<Action>>& schedules, int microbatches,
                          int chunks = 1, Transport transport = Transport::kBlocking,
                          bool backward = true);

// The transport a schedule kind is sound under: blocking for GPipe and 1F1B, buffered for
// interleaved 1F1B (see schedule.h).
Transport transport_for(ScheduleKind kind);

}  // namespace pipeline
}  // namespace tessera
