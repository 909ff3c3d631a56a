#include "tools/train/language_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "autograd/grad_mode.h"
#include "data/tokenizer.h"
#include "models/gpt.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace train {

namespace {

constexpr int kTopK = 40;

// A draw from the k most likely of `logits` (temperature 1): softmax over those k, inverse CDF
// at a uniform from `gen`.
int32_t sample_top_k(const std::vector<float>& logits, int k, int64_t vocab, Generator& gen) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  k = static_cast<int>(std::min<int64_t>(k, vocab));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<double> p(static_cast<size_t>(k));
  const double top = logits[ids[0]];
  double total = 0;
  for (int i = 0; i < k; ++i) total += p[i] = std::exp(logits[ids[i]] - top);
  double u = rand({1}, TensorOptions(kF64), &gen).item() * total;
  for (int i = 0; i < k; ++i) {
    if ((u -= p[i]) < 0) return ids[i];
  }
  return ids[k - 1];
}

}  // namespace

Head language_model_head() {
  return {[](const Variable& logits, const Tensor& targets) {
            return models::lm_loss(logits, targets);
          },
          [](const Tensor&) -> Tensor {
            TS_FAIL("a language model has no predicted classes (the train tool evaluates its "
                    "validation loss)");
          }};
}

void print_sample(const RunContext& run, const Data& d) {
  const Config& c = run.config;
  if (c.sample == 0) return;
  const auto tokenizer = data::make_tokenizer(c.tokenizer);
  // The prompt: the validation text's first tokens, half a window (at most 32).
  const int64_t prompt = std::min<int64_t>({std::max<int64_t>(c.seq_len / 2, 1), 32,
                                            static_cast<int64_t>(d.val_tokens->size())});
  std::vector<int32_t> tokens(d.val_tokens->begin(), d.val_tokens->begin() + prompt);
  // Ids the padded vocabulary has but the tokenizer does not are never drawn.
  const int64_t vocab = tokenizer->vocab_size();
  Generator gen(c.seed);
  NoGradGuard no_grad;
  run.model.eval();
  for (int64_t n = 0; n < c.sample; ++n) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(tokens.size()), c.seq_len);
    std::vector<int64_t> window(tokens.end() - t, tokens.end());
    // --sequence-parallel: each tensor-parallel rank holds t / T tokens, so the window is padded
    // at its end to a multiple of T (--seq-len is one); causal attention keeps the padding from
    // the positions before it, so the logits at t - 1 are the unpadded window's.
    const int64_t parts = c.sequence_parallel ? c.tensor_parallel : 1;
    window.resize(static_cast<size_t>((t + parts - 1) / parts * parts), 0);
    const int64_t padded = static_cast<int64_t>(window.size());
    const Tensor logits = run.strategy.predict(
        from_vector<int64_t>(window, {1, padded}).to(run.device));  // [1, padded, V]
    // The last position's distribution only (under --tensor-parallel each rank's slice of the
    // vocabulary, gathered: V values, not the window's t x V).
    const Tensor last =
        run.head.whole_rows(logits.select(1, t - 1)).reshape({-1}).to(kF32).to(Device::cpu());
    const std::vector<float> row = last.contiguous().to_vector<float>();
    tokens.push_back(sample_top_k(row, kTopK, vocab, gen));
  }
  run.model.train();
  if (!run.lead) return;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + prompt);
  const std::vector<int32_t> tail(tokens.begin() + prompt, tokens.end());
  std::printf("sample (%lld tokens after a prompt of %lld, top-k %d, seed %llu):\n",
              static_cast<long long>(c.sample), static_cast<long long>(prompt), kTopK,
              static_cast<unsigned long long>(c.seed));
  // Written as bytes: a byte-level model may well generate a NUL.
  const std::string text = tokenizer->decode(head) + "[" + tokenizer->decode(tail) + "]\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace train
}  // namespace tessera
