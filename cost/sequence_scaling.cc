#include "cost/sequence_scaling.h"

#include <algorithm>
#include <cctype>

#include "tensor/check.h"

namespace tessera {
namespace cost {

namespace {

constexpr SequenceStrategy kAll[] = {SequenceStrategy::kTensor, SequenceStrategy::kTensorSequence,
                                     SequenceStrategy::kRing, SequenceStrategy::kUlysses};

bool is_block(const std::string& name) {
  return name.size() > 1 && name[0] == 'h' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return std::isdigit(c) != 0; });
}

bool tensor_parallel(SequenceStrategy s) {
  return s == SequenceStrategy::kTensor || s == SequenceStrategy::kTensorSequence;
}

// What a layer's computation is divided by on N ranks.
double compute_divisor(const std::string& layer, SequenceStrategy s, int n) {
  if (s != SequenceStrategy::kTensor) return n;  // sequence-parallel and context-parallel: all
  return is_block(layer) || layer == "lm_head" ? n : 1;
}

}  // namespace

const char* sequence_strategy_name(SequenceStrategy s) {
  switch (s) {
    case SequenceStrategy::kTensor: return "tp";
    case SequenceStrategy::kTensorSequence: return "tp-sp";
    case SequenceStrategy::kRing: return "cp-ring";
    case SequenceStrategy::kUlysses: return "cp-ulysses";
  }
  return "?";
}

bool is_sequence_strategy(const std::string& name) {
  for (SequenceStrategy s : kAll) {
    if (name == sequence_strategy_name(s)) return true;
  }
  return false;
}

SequenceStrategy parse_sequence_strategy(const std::string& name) {
  for (SequenceStrategy s : kAll) {
    if (name == sequence_strategy_name(s)) return s;
  }
  TS_FAIL("unknown long-sequence strategy '", name, "' (tp, tp-sp, cp-ring or cp-ulysses)");
}

SequenceStep sequence_step(const ModelProfile& model, const SequenceShape& shape, int n,
                           SequenceStrategy strategy, const Network& network) {
  const char* name = sequence_strategy_name(strategy);
  TS_CHECK(n >= 1, "sequence_step: ranks must be >= 1, got ", n);
  TS_CHECK(shape.batch > 0 && shape.seq_len > 0 && shape.width > 0 && shape.heads > 0,
           "sequence_step: ", model.name, " is not a GPT (the long-sequence strategies need its "
           "batch, sequence, width and heads)");
  const bool splits_heads = tensor_parallel(strategy) || strategy == SequenceStrategy::kUlysses;
  TS_CHECK(!splits_heads || shape.heads % n == 0, name, " on ", n, " ranks: ", n,
           " does not divide the ", shape.heads, " heads");
  TS_CHECK(tensor_parallel(strategy) || shape.seq_len % (2 * n) == 0, name, " on ", n,
           " ranks: the sequence of ", shape.seq_len, " tokens does not divide into ", 2 * n,
           " chunks");
  TS_CHECK(strategy != SequenceStrategy::kTensorSequence || shape.seq_len % n == 0, name, " on ",
           n, " ranks: the sequence of ", shape.seq_len, " tokens does not divide by ", n);

  SequenceStep out;
  int blocks = 0;
  double block_forward = 0, block_backward = 0;  // one rank's, summed over the blocks
  for (const LayerProfile& l : model.layers) {
    const double d = compute_divisor(l.name, strategy, n);
    out.compute += (l.forward_seconds + l.backward_seconds) / d;
    if (is_block(l.name)) {
      ++blocks;
      block_forward += l.forward_seconds / d;
      block_backward += l.backward_seconds / d;
    }
  }
  TS_CHECK(blocks > 0 && model.compute_seconds() > 0, "sequence_step: ", model.name,
           " has no blocks (h0, h1, ...) with times");
  out.compute += model.step_overhead_seconds / (tensor_parallel(strategy) ? n : 1);
  if (n == 1) {
    out.step = out.compute;
    return out;
  }

  const double b = static_cast<double>(shape.batch), s = static_cast<double>(shape.seq_len),
               h = static_cast<double>(shape.width), p = static_cast<double>(shape.activation_bytes);
  const double activation = b * s * h * p;  // one [B, S, h] tensor
  double exposed = 0;
  switch (strategy) {
    case SequenceStrategy::kTensor: {
      const double ar = all_reduce_time(n, activation, network).seconds;
      exposed = (4 * blocks + 2) * ar;
      out.collectives = 4 * blocks + 2;
      break;
    }
    case SequenceStrategy::kTensorSequence: {
      const double ag = all_gather_time(n, activation, network).seconds;
      const double rs = reduce_scatter_time(n, activation, network).seconds;
      const double sums = all_reduce_time(n, 6 * h * 4, network).seconds;
      // Per block: forward 2 + 2, backward 2 + 2 and the 2 re-gathers, the gradient sums; the
      // embedding's and lm_head's (and lm_head's re-gather).
      exposed = blocks * (6 * ag + 4 * rs + sums) + 3 * ag + 2 * rs;
      out.collectives = blocks * 11 + 5;
      break;
    }
    case SequenceStrategy::kRing: {
      const double message = network.inter.message_seconds(2 * b * (s / n) * h * p);
      const double core = s / (12 * h + s);  // the attention core's share of a block
      const double steps = n - 1;
      // Per ring step the core computes one block pair: its time / C^2 of the block's (1/C of
      // the work on each of C steps; block_forward is already the rank's 1/C).
      const double forward_core = block_forward * core / n, backward_core = block_backward * core / n;
      exposed = steps * (std::max(0.0, message - forward_core / blocks) * blocks +
                         std::max(0.0, 2 * message - backward_core / blocks) * blocks);
      out.communication = steps * blocks * 3 * message;
      out.collectives = static_cast<int>(steps) * blocks * 3;
      break;
    }
    case SequenceStrategy::kUlysses: {
      const double bytes = (n - 1.0) / n * b * (s / n) * h * p;
      const double all_to_all = (n - 1) * network.inter.latency + bytes / network.inter.bandwidth;
      exposed = blocks * 8 * all_to_all;
      out.collectives = blocks * 8;
      break;
    }
  }
  if (out.communication == 0) out.communication = exposed;  // nothing overlapped
  out.exposed = exposed;
  out.step = out.compute + exposed;
  return out;
}

std::string sequence_assumption(SequenceStrategy strategy) {
  switch (strategy) {
    case SequenceStrategy::kTensor:
      return "tp: strong scaling of one replica's sequence over T = N ranks: the blocks' and "
             "lm_head's time / T, the embedding and ln_f whole; per block 2 all-reduces of b s h "
             "p bytes forward and 2 backward (the embedding's and lm_head's one each), not "
             "overlapped";
    case SequenceStrategy::kTensorSequence:
      return "tp-sp: strong scaling over T = N ranks with sequence parallelism: every layer's "
             "time / T; per block 2 all-gathers and 2 reduce-scatters of b s h p bytes forward, "
             "2 + 2 and 2 re-gathers backward, the LayerNorms' and biases' 6 h f32 gradients "
             "all-reduced; not overlapped";
    case SequenceStrategy::kRing:
      return "cp-ring: strong scaling over C = N ranks, head-tail chunks: every layer's time / "
             "C; per block C-1 K/V messages of 2 b (s/C) h p bytes forward and C-1 pairs (K/V, "
             "dK/dV) backward, each step hidden under the attention core's time / C^2, the "
             "core's share of a block taken as its share of the FLOPs, s / (12 h + s)";
    case SequenceStrategy::kUlysses:
      return "cp-ulysses: strong scaling over C = N ranks: every layer's time / C; per block 4 "
             "all-to-alls forward and 4 backward, each (C-1)/C of b (s/C) h p bytes as C-1 "
             "messages posted at once, not overlapped";
  }
  return "";
}

}  // namespace cost
}  // namespace tessera
