// The runs that test the support table: a pairwise covering set (every two values of two axes
// that can meet, in at least one run), generated from the table's axes and refusals, and for
// each run the reference it must equal. //tests/tools:composition_test runs the plan;
// `train --composition-plan` prints it (tools/bench/composition_sweep.sh runs the longer
// sweep from it).
//
// Generated as AETG does (Cohen et al. 1997): take the first pair no run covers yet, build
// candidate runs holding it, each other axis given the value that covers the most uncovered
// pairs with the values already chosen (ties broken by a seeded random stream), keep the valid
// candidate covering most for its cost (the test's time, estimated_cost: some attempts leave
// axes at their first, cheapest value), repeat; then drop the runs, costliest first, whose
// every pair other runs hold too. A run is valid when no refusal matches it, every axis that
// does not apply holds its first value, and its flags pass the flag checker as a whole (so a
// rule outside the table that refused a run the table allows would show up as a pair left
// uncovered, which the test reports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/train/support_table.h"

namespace tessera {
namespace train {

// One run of the plan.
struct PlannedRun {
  Assignment values;  // every axis, the strategy first
  std::string flags;  // the train tool's flags (without the test's own: data size, epochs)
  int ranks = 1;      // the processes it takes
  // The processes its job starts with: more than `ranks` when tools/launch restarts it on fewer
  // (restart=fewer-ranks), to end on `ranks`.
  int first_ranks = 1;
  // What it must equal: the same run under another strategy, or nothing (its own resumed run
  // is compared with it regardless). `reference_flags` and `reference_ranks` as above.
  std::string reference_flags;
  int reference_ranks = 0;  // 0: no reference
  // A run in half precision somewhere is compared by its distance from the reference trained in
  // float32 (these flags, on reference_ranks), which must be within twice the reference's own.
  bool half_precision = false;
  std::string reference_f32_flags;
};

struct CompositionPlan {
  std::vector<PlannedRun> runs;
  int64_t pairs_covered = 0;
  // Pairs of values no valid run holds ("compression=topk with strategy=zero1": refused), as
  // "axis=value axis=value".
  std::vector<std::string> pairs_not_coverable;
  // The test's time in seconds, estimated (estimated_cost below).
  double estimated_cost = 0;
};

// What a run costs //tests/tools:composition_test, in seconds (estimated from its ranks): its
// trainings (run, references, resumed, restarted).
double estimated_cost(const PlannedRun& run);

// Deterministic for a seed.
CompositionPlan composition_plan(uint64_t seed = 1);

// The flags for an assignment (axes not applying give none).
std::string flags_of(const Assignment& values);

}  // namespace train
}  // namespace tessera
