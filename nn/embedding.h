// Embedding: a lookup table of num_embeddings vectors of embedding_dim values, indexed by i64
// token ids of any shape ([B, T] -> [B, T, embedding_dim]), as PyTorch's nn.Embedding.
//
// Backward adds the output gradient's rows into the rows of the weight's gradient that the
// batch's tokens name (a token seen twice adds twice); the other rows stay zero and are never
// visited, so a step costs the batch's tokens, not the vocabulary.
//
// Initialization: N(0, 1) as PyTorch's, or N(0, init_std) with EmbeddingOptions::init_std
// (GPT-2 draws its embeddings with std 0.02).
//
// Weight tying (GPT-2's output projection is the token embedding, transposed): use weight() in
// the projection, e.g. matmul(h, transpose(wte->weight(), 0, 1)); the embedding's and the
// projection's gradients add up in the one weight, and named_parameters() lists it once.
#pragma once

#include "nn/module.h"

namespace tessera {
namespace nn {

class EmbeddingOptions {
 public:
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  // The standard deviation of the weight's N(0, std) initialization (1 by default).
  EmbeddingOptions& init_std(double s) { init_std_ = s; return *this; }

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  double init_std() const { return init_std_; }

 private:
  int64_t num_embeddings_, embedding_dim_;
  double init_std_ = 1.0;
};

class Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : Embedding(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  // indices: a Variable holding an i64 tensor of token ids, each in [0, num_embeddings)
  // ((*embedding)(ids_tensor) wraps a Tensor so). Returns [..., embedding_dim].
  Variable forward(const Variable& indices) override;
  // Re-draws the weight from the default generator, as at construction.
  void reset_parameters();

  const Variable& weight() const { return weight_; }  // [num_embeddings, embedding_dim]
  const EmbeddingOptions& options() const { return options_; }

 private:
  EmbeddingOptions options_;
  Variable weight_;
};

}  // namespace nn
}  // namespace tessera
