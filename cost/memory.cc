#include "cost/memory.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

namespace {

using dist::zero::Sharding;

std::string str(int64_t v) { return std::to_string(v); }

MemoryRow zero_row(Sharding sharding, int64_t psi, const TrainingSetup& s, int ranks) {
  static const char* const names[] = {"ddp", "zero1", "zero2", "zero3"};
  const int64_t p = s.parameter_bytes(), m = s.moment_bytes();
  MemoryRow row;
  row.strategy = names[static_cast<int>(sharding)];
  row.divisor = sharding == Sharding::kNone ? 1 : ranks;
  row.bytes = dist::zero::predicted_model_state(sharding, psi, p, m, ranks);
  switch (sharding) {
    case Sharding::kNone:
      row.formula = "(" + str(p) + " + " + str(p) + " + " + str(s.optimizer_bytes()) + ") psi";
      break;
    case Sharding::kStage1:
      row.formula = str(p) + " psi + " + str(p) + " psi + " + str(m + 4) + " psi/N";
      break;
    case Sharding::kStage2:
      row.formula = str(p) + " psi + (4 + " + str(m + 4) + ") psi/N";
      break;
    case Sharding::kStage3:
      row.formula = "(4 + 4 + " + str(m) + ") psi/N";
      break;
  }
  return row;
}

// A replica holding `held` parameters whole, with DDP's bytes per parameter.
MemoryRow replica_row(const std::string& strategy, int divisor, int64_t held, const TrainingSetup& s,
                      const std::string& held_formula) {
  MemoryRow row = zero_row(Sharding::kNone, held, s, 1);
  row.strategy = strategy;
  row.divisor = divisor;
  row.formula = "(" + str(s.parameter_bytes()) + " + " + str(s.gradient_bytes()) + " + " +
                str(s.optimizer_bytes()) + ") " + held_formula;
  return row;
}

}  // namespace

std::vector<MemoryRow> memory_per_rank(int64_t psi, int64_t tensor_parallel_parameters,
                                       int64_t tied_parameters, const TrainingSetup& setup,
                                       int ranks, int stages, int tensor_parallel) {
  TS_CHECK(ranks >= 1 && stages >= 1 && tensor_parallel >= 1, "memory_per_rank: ranks ", ranks,
           ", stages ", stages, ", tensor_parallel ", tensor_parallel, " (each must be >= 1)");
  TS_CHECK(tensor_parallel_parameters >= 0 && tensor_parallel_parameters <= psi,
           "memory_per_rank: ", tensor_parallel_parameters, " split parameters of ", psi);
  TS_CHECK(tied_parameters >= 0 && tied_parameters <= psi, "memory_per_rank: ", tied_parameters,
           " tied parameters of ", psi);
  std::vector<MemoryRow> rows;
  for (Sharding s : {Sharding::kNone, Sharding::kStage1, Sharding::kStage2, Sharding::kStage3}) {
    rows.push_back(zero_row(s, psi, setup, ranks));
  }
  // One stage holds every layer, tied ones once; more stages hold a second copy between them.
  const int64_t copies = stages > 1 ? tied_parameters : 0;
  rows.push_back(replica_row("pipeline", stages, (psi + copies + stages - 1) / stages, setup,
                             copies > 0 ? "(psi + psi_t)/K" : "psi/K"));
  const int64_t replicated = psi - tensor_parallel_parameters;
  rows.push_back(replica_row("tensor_parallel", tensor_parallel,
                             replicated + (tensor_parallel_parameters + tensor_parallel - 1) / tensor_parallel,
                             setup, "(psi_r + psi_s/T)"));
  return rows;
}

MemoryRow pipeline_stage_row(int64_t stage_parameters, const TrainingSetup& setup, int stages) {
  TS_CHECK(stage_parameters >= 0 && stages >= 1, "pipeline_stage_row: ", stage_parameters,
           " parameters, stages ", stages);
  return replica_row("pipeline", stages, stage_parameters, setup, "psi_k");
}

std::vector<MemoryRow> paper_memory_per_rank(int64_t psi, const TrainingSetup& s, int ranks,
                                             int stages) {
  TS_CHECK(psi >= 1, "paper_memory_per_rank: psi must be >= 1, got ", psi);
  TS_CHECK(ranks >= 1 && stages >= 1, "paper_memory_per_rank: ranks ", ranks, ", stages ", stages,
           " (each must be >= 1)");
  const int64_t p = s.parameter_bytes(), g = s.gradient_bytes(), k = s.optimizer_bytes();
  // psi x bytes / N, rounded up: a rank holds whole elements.
  const auto shard = [&](int64_t bytes) { return (psi * bytes + ranks - 1) / ranks; };
  std::vector<MemoryRow> rows(4);
  rows[0] = {"ddp", 1, {p * psi, g * psi, k * psi}, "(" + str(p) + " + " + str(g) + " + " + str(k) + ") psi"};
  rows[1] = {"zero1", ranks, {p * psi, g * psi, shard(k)},
             str(p) + " psi + " + str(g) + " psi + " + str(k) + " psi/N"};
  rows[2] = {"zero2", ranks, {p * psi, shard(g), shard(k)},
             str(p) + " psi + (" + str(g) + " + " + str(k) + ") psi/N"};
  rows[3] = {"zero3", ranks, {shard(p), shard(g), shard(k)},
             "(" + str(p) + " + " + str(g) + " + " + str(k) + ") psi/N"};
  rows.push_back(replica_row("pipeline", stages, (psi + stages - 1) / stages, s, "psi/K"));
  return rows;
}

}  // namespace cost
}  // namespace tessera
