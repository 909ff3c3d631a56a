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
//   * split backwards (zero-bubble lists, pipeline/zero_bubble.h): a list has a W for every B
//     or none at all; W i comes after B i on the same stage (same chunk), exactly once;
//   * sends and receives meet in the same order on both ends; no deadlock.
// And it measures, on the simulated clock (F, B and W one slot each):
//   * peak in flight per stage: micro-batches whose activations are held, from F until B, or
//     until W when the list splits its backwards (GPipe M, 1F1B min(K-s, M), ZB-H1 min(K, M),
//     ZB-H2 min(2K-1, M));
//   * peak pending W per stage: B done, W not yet (the weight-gradient work a stage has saved
//     for later; 0 without W);
//   * each stage's idle fraction beside the theory: (K-1)/(vM+K-1); with split backwards
//     (K-1)/(3vM+K-1), the least any schedule idles when the batch ends with a flush (the
//     last stage cannot start before K-1 slots);
//   * with split backwards also the bubble without a flush: batches back to back, each stage
//     starting its next batch as soon as it finishes this one (what the paper's optimizer
//     post-validation allows), so the period is the longest span from a stage's first
//     computation to its last. GPipe's, 1F1B's and interleaved's equal their flush bubbles
//     (their first stage starts first and ends last); ZB-H2's at M >= 2K-1 is 0.
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
  int peak_in_flight = 0;       // micro-batch chunks whose activations are held at once
  int peak_pending_weight = 0;  // B done, W not yet (0 when the list has no W)
  long busy_slots = 0;          // slots spent computing
  double idle_fraction = 0;     // 1 - busy / makespan
  std::vector<TimedAction> timeline;
  long span() const;  // from the start of the first computation to the end of the last
};

struct ValidationReport {
  int stages = 0, microbatches = 0, chunks = 1;
  bool split_backward = false;  // the lists have W actions
  long makespan = 0;            // slots until the last stage finishes
  std::vector<StageReport> stage;
  double bubble_theory() const;  // (K-1)/(vM+K-1); split: (K-1)/(3vM+K-1)
  double bubble_simulated() const;  // the largest idle fraction of any stage
  // Batches back to back without a flush: 1 - busy / (the longest stage span).
  double bubble_without_flush() const;
  // One line per stage: peak in flight (and pending W) and idle fraction, then the theory.
  std::string str() const;
};

enum class Transport { kBlocking, kBuffered };

// schedules[s] is stage s's list (make_schedules()). Throws tessera::Error on any violation.
// With backward = false the lists are forward-only (evaluation): no backward or gradient
// message may appear, and none is required.
ValidationReport validate(const std::vector<std::vector<Action>>& schedules, int microbatches,
                          int chunks = 1, Transport transport = Transport::kBlocking,
                          bool backward = true);

// The transport to play a schedule kind under: blocking for GPipe and 1F1B (sound there, so
// on any transport); buffered for interleaved 1F1B and ZB-H2, sound only there; and buffered
// for ZB-H1, which is sound under both but reaches its bubble only under buffered sends: a
// blocking send waits for its receiver, and ZB-H1's stages, each W passes at a different point,
// are not in step (33 slots instead of 27 at K = 4, M = 8). See schedule.h, zero_bubble.h.
Transport transport_for(ScheduleKind kind);

}  // namespace pipeline
}  // namespace tessera
