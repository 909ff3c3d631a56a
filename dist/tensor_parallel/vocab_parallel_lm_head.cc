#include "dist/tensor_parallel/vocab_parallel_lm_head.h"

#include <vector>

#include "autograd/functions.h"
#include "autograd/recompute.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"
#include "dist/trace_recorder.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

VocabParallelLMHead::VocabParallelLMHead(std::shared_ptr<VocabParallelEmbedding> wte)
    : wte_(std::move(wte)) {
  TS_CHECK(wte_ != nullptr, "VocabParallelLMHead: the embedding it is tied to is null");
  // The tie in the module tree (as models::GPT's lm_head registers it), so that what must know
  // every layer using a parameter finds this one: a pipeline's stages, ZeRO-3's units.
  register_tied_parameter("weight", wte_->weight());
}

std::string VocabParallelLMHead::extra_repr() const {
  return detail::str("tied to a VocabParallelEmbedding(", wte_->extra_repr(), ")",
                     sequence_parallel_ ? ", sequence_parallel=true" : "");
}

Variable VocabParallelLMHead::forward(const Variable& x) {
  TS_CHECK(x.dim() >= 1 && x.size(-1) == wte_->embedding_dim(), "VocabParallelLMHead::forward: "
           "expected ", wte_->embedding_dim(), " input features, got shape ", x.shape());
  const UnaryFn product = [this](const Variable& input) {
    return linear(input, wte_->weight(), Variable());
  };
  if (!sequence_parallel_) return product(copy_to_parallel_region(x, wte_->group()));
  // As ColumnParallelLinear: this rank's S/T tokens kept, all-gathered again in backward.
  return recompute_output(
      [group = wte_->group()](const Variable& v) {
        return gather_from_sequence_parallel_region(v, group);
      },
      x, product);
}

ClassParallelCrossEntropy VocabParallelLMHead::loss(Reduction reduction) const {
  return ClassParallelCrossEntropy(wte_->group(), wte_->vocab_slice(), wte_->num_embeddings(),
                                   reduction);
}

Tensor VocabParallelLMHead::gather_logits(const Tensor& local) const {
  const Slice s = wte_->vocab_slice();
  TS_CHECK(local.dim() >= 1 && local.size(-1) == s.length, "VocabParallelLMHead::gather_logits: "
           "expected this rank's logits [..., ", s.length, "] (tokens [", s.start, ", ", s.end(),
           ") of ", wte_->num_embeddings(), "), got shape ", local.shape());
  trace::LabelIfRecording label("tp all_gather logits", "all_gather");
  const std::vector<int64_t> lengths(wte_->group()->size(), s.length);
  return all_gather_along(local, -1, lengths, *wte_->group());
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
