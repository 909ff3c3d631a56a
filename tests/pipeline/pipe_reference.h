// What the Pipe tests compare against: the batches every rank builds alike, the loss, and a
// check of this rank's stage against the unpipelined reference model.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "autograd/functions.h"
#include "dist/process_group.h"
#include "pipeline/pipe.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/pipeline/mlp.h"

namespace tessera {
namespace pipeline {

// Flatten and four Linear layers with ReLUs: 8 layers, enough for 4 ranks x 2 chunks.
inline std::shared_ptr<nn::Sequential> deep_mlp() { return mlp_of(11, {64, 32, 32, 24, 10}); }

struct Batch {
  Tensor x, y;
};

// The same batch on every rank; `rows` varies to exercise uneven micro-batches.
inline Batch make_batch(int step, int64_t rows, const Shape& image) {
  Generator g(500 + step);
  Shape shape = {rows};
  shape.insert(shape.end(), image.begin(), image.end());
  const Tensor y = arange(rows, kI64);
  return {randn(shape, kF32, &g), sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64)};
}

inline Variable loss_fn(const Variable& out, const Tensor& y) { return cross_entropy(out, y); }

// Every parameter and buffer of this rank's chunks against the reference; across the pipeline
// group the stages cover the whole model (a stage may hold none: Flatten and ReLU chunks).
inline void expect_stage_matches_reference(const Pipe& pipe, nn::Sequential& reference, double tol,
                                           dist::ProcessGroup& pipeline_group) {
  std::map<std::string, Variable> ref;
  for (const auto& [name, p] : reference.named_parameters()) ref[name] = p;
  for (const auto& [name, b] : reference.named_buffers()) ref[name] = b;
  int compared = 0;
  for (const auto& chunk : pipe.chunks()) {
    auto named = chunk->named_parameters();
    for (const auto& nb : chunk->named_buffers()) named.push_back(nb);
    for (const auto& [name, p] : named) {
      ASSERT_TRUE(ref.count(name)) << name;
      if (p.dtype() == kI64) {
        EXPECT_EQ(max_abs_diff(p.data(), ref[name].data()), 0) << name;
      } else {
        EXPECT_LT(max_abs_diff(p.data(), ref[name].data()), tol) << "stage " << pipe.stage() << " " << name;
      }
      ++compared;
    }
  }
  Tensor total = scalar_tensor(compared, kI64).reshape({1});
  pipeline_group.all_reduce(total)->wait();
  EXPECT_EQ(total.item(), static_cast<double>(ref.size())) << "the stages do not cover the model";
}

}  // namespace pipeline
}  // namespace tessera
