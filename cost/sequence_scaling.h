// Strong scaling of one replica's sequence: a GPT's step on N ranks that share its layers or its
// tokens (docs/SEQUENCE.md), from the layers' times on one rank (cost/model_profile.h) and the
// alpha-beta link (cost/collective_time.h). Each rank keeps the batch of b windows of s tokens
// (the whole sequence) and N ranks split its work:
//
//   tp          Megatron-LM's tensor parallelism, T = N: the blocks' time / T (heads and MLP
//               split; the LayerNorms' few element-wise ops counted as split too), lm_head's
//               / T (the vocabulary), the embedding and ln_f whole. Per block 2 all-reduces of
//               b s h p bytes forward and 2 backward, on the critical path (not overlapped);
//               the embedding's and lm_head's one each.
//   tp-sp       with sequence parallelism: every layer / T. Per block forward 2 all-gathers and
//               2 reduce-scatters of b s h p, backward 2 and 2 again plus the column-parallel
//               Linears' 2 re-gathers, and the LayerNorms' and row-parallel biases' 6 h f32
//               gradients all-reduced; the embedding's reduce-scatter (and its all-gather back),
//               lm_head's all-gather (and its reduce-scatter back); none overlapped.
//   cp-ring     ring attention, C = N, head-tail chunks (the causal work even): every layer / C.
//               Per block forward C-1 steps, each passing one K/V block, 2 b (s/C) h p bytes,
//               to the next rank while the attention core computes one block pair, so a step
//               costs max(its message, the core's time / C^2); backward C-1 steps each passing
//               a K/V block and a dK/dV block (two messages) under the core's backward / C^2.
//               The core's share of a block's time is its share of the FLOPs: causal
//               attention's 2 b s^2 h of 24 b s h^2 + 2 b s^2 h, s / (12 h + s).
//   cp-ulysses  DeepSpeed-Ulysses, C = N: every layer / C; per block 4 all-to-alls forward (q, k,
//               v, the output) and 4 backward, each sending (C-1)/C of b (s/C) h p bytes from a
//               rank as C-1 messages posted at once (C-1 latencies), not overlapped.
//
// The step overhead (the loss, the engine, the optimizer step) is divided by T under tensor
// parallelism (each rank steps its slices) and whole under context parallelism (every rank
// holds the whole model). Efficiency = tokens/s at N / (N x one rank's).
#pragma once

#include <cstdint>
#include <string>

#include "cost/collective_time.h"
#include "cost/model_profile.h"

namespace tessera {
namespace cost {

enum class SequenceStrategy { kTensor, kTensorSequence, kRing, kUlysses };
const char* sequence_strategy_name(SequenceStrategy s);  // "tp", "tp-sp", "cp-ring", "cp-ulysses"
bool is_sequence_strategy(const std::string& name);
SequenceStrategy parse_sequence_strategy(const std::string& name);

// A GPT's step as the model needs it: b windows of s tokens, width h, a heads, p bytes per
// activation element.
struct SequenceShape {
  int64_t batch = 0, seq_len = 0, width = 0, heads = 0, activation_bytes = 4;
};

// One N's prediction (the fields scaling.h's ScalingPoint reports).
struct SequenceStep {
  double compute = 0;        // seconds of computation on a rank (overhead included)
  double communication = 0;  // seconds of its transfers, hidden or not
  double exposed = 0;        // step - compute
  double step = 0;
  int collectives = 0;       // collectives and ring messages issued per step by a rank
};

// The blocks are the profile's layers named h0, h1, ...; the model's other layers are the
// embedding, ln_f, lm_head and the loss. Errors: N < 1, a profile without blocks or times, N not
// dividing the heads (tp, tp-sp, and cp-ulysses: a/N heads a rank) or 2N not dividing s
// (cp-ring, cp-ulysses), and N not dividing s under tp-sp.
SequenceStep sequence_step(const ModelProfile& model, const SequenceShape& shape, int ranks,
                           SequenceStrategy strategy, const Network& network);

// The assumptions above for this strategy, one sentence each, for reports.
std::string sequence_assumption(SequenceStrategy strategy);

}  // namespace cost
}  // namespace tessera
