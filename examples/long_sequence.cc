// Long sequences from a user's own program (docs/SEQUENCE.md): a small GPT on English text
// (the fortunes corpus, one token per byte) trained on 2 ranks under Megatron-LM's tensor and
// sequence parallelism with selective recomputation, and under context parallelism (ring
// attention) with full recomputation, each from the same seed and batches as one process,
// which each rank also runs: the losses must agree.
//
//   bazel build -c opt //examples:long_sequence
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/long_sequence --steps=10
#include <cmath>
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

namespace {

constexpr int64_t kSeqLen = 128, kBatch = 4;

models::GPTConfig config(const std::string& recompute, const std::string& modules) {
  models::GPTConfig c;
  c.vocab_size = 256;  // bytes
  c.context = kSeqLen;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.recompute = models::Recompute::parse(recompute, modules);
  return c;
}

std::unique_ptr<optim::AdamW> adamw(nn::Module& model) {
  return std::make_unique<optim::AdamW>(model.parameters(), optim::AdamOptions(1e-3));
}

}  // namespace

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  TS_CHECK(world->size() == 2, "long_sequence: run it on 2 ranks (mpirun -np 2), not ",
           world->size());
  const data::TextTokens text = data::load_text_tokens(data::TextDataOptions().tokenizer("byte"));
  const data::TokenWindows windows(text.train, kSeqLen);

  // One process's reference, on every rank: the same seed, the same batches.
  manual_seed(0);
  auto single = models::GPT(config("none", "core_attn"));
  auto single_opt = adamw(*single);

  // Tensor parallelism over both ranks with sequence parallelism (the LayerNorm regions hold
  // kSeqLen / 2 tokens a rank), and selective recomputation of the attention core and GELU.
  manual_seed(0);
  auto tp_gpt = models::GPT(config("selective", "core_attn,gelu"));
  auto tp = dist::tensor_parallel::parallelize_gpt(
      *tp_gpt, world, dist::tensor_parallel::GPTParallelOptions().sequence_parallel(true));
  auto tp_opt = adamw(*tp_gpt);

  // Context parallelism over both ranks: ring attention, each rank holding 2 of the 4 chunks of
  // every window (head-tail: rank 0 the first and last, rank 1 the middle two), full
  // recomputation of every block; DDP averages the gradients over the ranks (each rank's loss is
  // the mean over its equal share of the tokens, so the average is the one-process gradient).
  namespace cp = dist::context_parallel;
  manual_seed(0);
  auto cp_gpt = models::GPT(config("full", "core_attn"));
  cp::parallelize_context(*cp_gpt, world);
  dist::DistributedDataParallel cp_ddp(cp_gpt, world);
  auto cp_opt = adamw(*cp_gpt);
  auto chunks = [&](const Tensor& x) {
    return cp::rank_rows(x, 1, world->rank(), world->size(), cp::SequenceSplit::kHeadTail);
  };

  int bad = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < kBatch; ++i) rows.push_back(step * kBatch + i);
    const data::Batch b = windows.get_batch(rows);

    single_opt->zero_grad();
    Variable loss = models::lm_loss((*single)(Variable(b.inputs)), b.targets);
    loss.backward();
    single_opt->step();

    tp_opt->zero_grad();
    Variable tp_loss = tp.loss((*tp_gpt)(Variable(b.inputs)), b.targets);
    tp_loss.backward();  // the LayerNorms' gradients summed over the group as they arrive
    tp_opt->step();

    cp_opt->zero_grad();
    Variable cp_loss = models::lm_loss(cp_ddp(chunks(b.inputs)), chunks(b.targets));
    cp_loss.backward();
    cp_opt->step();
    const double cp_mean = dist::all_reduce_scalar(cp_loss.item(), *world, dist::ReduceOp::kMean);

    for (double other : {tp_loss.item(), cp_mean}) {
      if (std::abs(other - loss.item()) > 1e-4 * std::abs(loss.item())) ++bad;
    }
    if (world->rank() == 0) {
      std::printf("step %lld  one process %.5f  tensor+sequence parallel, selective %.5f  "
                  "context parallel, full %.5f\n",
                  static_cast<long long>(step + 1), loss.item(), tp_loss.item(), cp_mean);
    }
  }
  return bad == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] { return train(steps, world); });
}
