#include "nn/embedding.h"

#include "autograd/functions.h"
#include "nn/init.h"

namespace tessera {
namespace nn {

Embedding::Embedding(const EmbeddingOptions& options) : options_(options) {
  TS_CHECK(options.num_embeddings() > 0 && options.embedding_dim() > 0,
           "Embedding: num_embeddings and embedding_dim must be positive, got ",
           options.num_embeddings(), " and ", options.embedding_dim());
  TS_CHECK(options.init_std() >= 0, "Embedding: init_std must be non-negative, got ",
           options.init_std());
  weight_ = register_parameter("weight",
                               empty({options.num_embeddings(), options.embedding_dim()}));
  reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight_.data(), 0.0, options_.init_std()); }

std::string Embedding::extra_repr() const {
  return detail::str(options_.num_embeddings(), ", ", options_.embedding_dim());
}

Variable Embedding::forward(const Variable& indices) {
  TS_CHECK(indices.defined(), "Embedding: indices are undefined");
  TS_CHECK(!indices.requires_grad(), "Embedding: indices (", indices.dtype(), " ",
           indices.shape(), ") are token ids and take no gradient");
  return embedding(weight_, indices.data());
}

}  // namespace nn
}  // namespace tessera
