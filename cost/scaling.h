// The scaling model: one training step's time at N ranks, from each layer's compute time on one
// rank, the alpha-beta collective times (cost/collective_time.h) and the order in which the
// strategy issues its collectives, played on two clocks (cost/overlap.h). Weak scaling: every
// rank keeps its batch, so N ranks process N times the examples per step.
//
// DDP (dist/ddp/ddp.h). Forward, then backward layer by layer from the last; when a layer's
// backward ends its parameters' gradients are ready; a bucket (cost/buckets.h) whose gradients
// are all ready is all-reduced, buckets strictly in order; the step ends when backward and
// the last all-reduce have:
//
//   compute  | forward | bwd L3 | bwd L2 | bwd L1 | bwd L0 |...|      hidden: what ran under
//   comm                        |  AR bucket 0  | AR bucket 1   |      backward; exposed: the rest
//
// ZeRO-3 (dist/zero/fully_sharded.h), one unit per layer with parameters, prefetching one unit
// ahead: all-gather unit u (and launch u+1's) before its forward; in backward all-gather it
// again, then reduce-scatter its gradients once its backward ends; wait for the last.
//
// Pipeline (pipeline/): K stages (layers cut by time, pipeline/balance.h), M micro-batches,
// N/K data-parallel replicas. The schedule's lists (pipeline/schedule.h: GPipe, 1F1B,
// interleaved 1F1B with v chunks per rank, so K v virtual stages; ZB-H1 and ZB-H2, whose
// backward is split into B and a deferred W by weight_fraction) are played by the timing model
// (pipeline/timing_model.h) with each stage's share of the time divided by M and each send
// taking alpha + bytes/beta of the sender's time; then the stage's gradients are all-reduced
// over the N/K replicas, after the flush, not overlapped.
//
// A GPT's long-sequence strategies (tp, tp-sp, cp-ring, cp-ulysses; ScalingOptions::sequence)
// are strong scaling instead: N ranks share one replica's batch (cost/sequence_scaling.h).
//
// Per N: step = the compute stream's clock at the end; images/s = replicas x batch / step;
// efficiency = images/s / (N x the single-rank images/s), the single rank computing without
// any communication. Added after the timeline: the profile's step overhead (the loss, the
// engine, the optimizer step: ModelProfile::step_overhead_seconds) and the options'
// step_all_reduces, neither overlapped; with `cores`, computation slowed by N/C beyond C ranks.
// Not modelled: data loading, gradient averaging, contention between ranks for links (every rank
// has its own full-duplex link) and between computation and communication for memory bandwidth.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost/collective_time.h"
#include "cost/model_profile.h"
#include "cost/precision.h"
#include "cost/sequence_scaling.h"
#include "pipeline/schedule.h"

namespace tessera {
namespace cost {

enum class Strategy { kDDP, kZeRO3, kPipeline };
const char* strategy_name(Strategy s);  // "ddp", "zero3", "pipeline"
Strategy parse_strategy(const std::string& name);

struct ScalingOptions {
  Strategy strategy = Strategy::kDDP;
  Network network;
  TrainingSetup setup;
  double first_bucket_mb = 1, bucket_cap_mb = 25;  // DDP's
  // DDP's gradient compressor, as the train tool spells it ("topk:0.01"; "none"): each f32
  // bucket's collectives become the compressor's (cost/compression.h); compressing and
  // decompressing cost no time here.
  std::string compression = "none";
  int stages = 4, microbatches = 8;                // the pipeline's K (at most N) and M
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kOneFOneB;
  int chunks = 1;  // v model chunks per rank (the interleaved schedule only)
  // Zero-bubble schedules (ZB-H1, ZB-H2): the part of each layer's backward that is the weight
  // gradient (W), the rest being the input gradient (B). About half for a Linear or a
  // convolution: both are one GEMM of the same size.
  double weight_fraction = 0.5;
  // Cores the N ranks share (0: a core per rank, as on a cluster). With N > C ranks on C cores
  // (mpirun on a workstation) each rank's computation takes N/C times as long.
  int cores = 0;
  // Small all-reduces per step outside backward, each of one 8-byte value, not overlapped (a
  // loss or NaN check: tools/train makes 1 a step over the world, 2 under loss scaling).
  int step_all_reduces = 0;
  // A GPT's long-sequence strategies (cost/sequence_scaling.h: strong scaling of one replica's
  // sequence over N ranks) in place of `strategy`, with the step's shape.
  std::optional<SequenceStrategy> sequence;
  SequenceShape shape;
};

struct ScalingPoint {
  int ranks = 1;
  int replicas = 1;             // data-parallel replicas (N, or N/K for the pipeline)
  double compute = 0;           // seconds of computation on the critical rank
  double communication = 0;     // seconds its collectives take, hidden or not
  double exposed = 0;           // step - compute: communication (and bubble) not hidden
  double step = 0;
  double images_per_second = 0;
  double efficiency = 1;
  int collectives = 0;          // issued per step
  std::string algorithm;        // that of the largest collective ("-" when none)
};

ScalingPoint predict_step(const ModelProfile& model, int ranks, const ScalingOptions& options);
std::vector<ScalingPoint> predict_scaling(const ModelProfile& model, const std::vector<int>& ranks,
                                          const ScalingOptions& options);

// Every assumption behind predict_step() for these options, one sentence each, for reports.
std::vector<std::string> scaling_assumptions(const ModelProfile& model, const ScalingOptions& options);

}  // namespace cost
}  // namespace tessera
