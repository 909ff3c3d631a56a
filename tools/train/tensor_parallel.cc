#include "tools/train/tensor_parallel.h"

#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/parallelize.h"
#include "nn/loss.h"
#include "tensor/ops.h"
#include "tools/train/language_model.h"

namespace tessera {
namespace train {

namespace tp = dist::tensor_parallel;

namespace {

int64_t parameter_bytes(const nn::Module& model) {
  int64_t bytes = 0;
  for (const Variable& p : model.parameters()) bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
  return bytes;
}

// The GPT's (padded) vocabulary: the rows of its token embedding.
int64_t gpt_vocab(nn::Module& model) {
  for (const auto& [name, p] : model.named_parameters()) {
    if (name == "embed.wte.weight") return p.shape()[0];
  }
  TS_FAIL("train: the GPT has no embed.wte.weight");
}

}  // namespace

Head plain_head(const Config& c) {
  const nn::CrossEntropyLoss cross_entropy(Reduction::kMean, c.label_smoothing);
  return {[cross_entropy](const Variable& out, const Tensor& y) { return cross_entropy(out, y); },
          [](const Tensor& logits) { return argmax(logits, 1); }};
}

Head split_layers(const Config& c, nn::Sequential& model, const dist::Topology& topology,
                  TensorParallelFigures* figures) {
  const auto& group = topology.tensor_parallel_group();
  figures->size = topology.tensor_parallel_size();
  figures->parameter_bytes_full = parameter_bytes(model);
  figures->logits_per_example_full = c.num_classes;
  figures->logits_per_example = c.num_classes;
  Head head = plain_head(c);
  if (language_model(c)) {
    // Megatron's GPT: in each block the attention's QKV split by heads and its output projection
    // row-parallel, the MLP column- then row-parallel; wte split by vocabulary rows, the tied
    // lm_head's logits left split and the loss over them vocabulary-parallel; wpe and the
    // LayerNorms whole on every rank.
    const int64_t vocab = gpt_vocab(model);
    if (vocab % figures->size != 0) {
      throw FlagError("--tensor-parallel=" + std::to_string(figures->size) + " does not divide "
                      "the GPT's vocabulary of " + std::to_string(vocab) + " tokens (--tokenizer=" +
                      c.tokenizer + ", padded to a multiple of 64): each rank holds V/T rows of "
                      "the embedding and V/T logits");
    }
    const auto split = std::make_shared<tp::VocabParallelLM>(tp::parallelize_gpt(
        model, group, tp::GPTParallelOptions().sequence_parallel(c.sequence_parallel)));
    head = language_model_head();
    head.loss = [split](const Variable& logits, const Tensor& targets) {
      return split->loss(logits, targets);
    };
    head.whole_rows = [split](const Tensor& rows) { return split->lm_head->gather_logits(rows); };
    figures->logits_per_example_full = c.seq_len * vocab;
    figures->logits_per_example = c.seq_len * split->wte->vocab_slice().length;
  } else if (!c.tp_head) {  // --model=mlp: Megatron's MLP block
    tp::parallelize_module(model, group,
                           {{"fc1", tp::Style::kColumnwise}, {"fc2", tp::Style::kRowwise}});
  } else {
    const auto split = tp::parallelize_module(
        model, group, {{tp::last_linear_name(model), tp::Style::kClassParallelHead}});
    const auto classifier = std::dynamic_pointer_cast<tp::ColumnParallelLinear>(split[0]);
    const auto loss = std::make_shared<tp::ClassParallelCrossEntropy>(
        group, classifier->output_slice(), classifier->out_features(), Reduction::kMean,
        c.label_smoothing);
    head = {[loss](const Variable& out, const Tensor& y) { return (*loss)(out, y); },
            [loss](const Tensor& logits) { return loss->argmax(logits); }};
    figures->logits_per_example = classifier->output_slice().length;
  }
  figures->parameter_bytes = parameter_bytes(model);
  return head;
}

void TensorParallelFigures::report(json::Object& summary, int64_t batch_size) const {
  // Logits of one batch in f32 (the loss computes in f32 under autocast too).
  summary.add("tensor_parallel", size)
      .add("parameter_bytes_this_rank", parameter_bytes)
      .add("parameter_bytes_unparallel", parameter_bytes_full)
      .add("head_logits_bytes_this_rank", batch_size * logits_per_example * 4)
      .add("head_logits_bytes_unparallel", batch_size * logits_per_example_full * 4);
}

}  // namespace train
}  // namespace tessera
