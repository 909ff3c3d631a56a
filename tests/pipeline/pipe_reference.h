// What the Pipe tests compare against: the batches every rank builds alike, the loss, and a
// check of this rank's stage against the unpipelined reference model.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/process_group.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
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

using MakeModel = std::function<std::shared_ptr<nn::Sequential>()>;

// The reference: one process, gradient accumulation over the same micro-batches.
inline double reference_step(nn::Sequential& model, optim::SGD& opt, const Batch& b, int M) {
  opt.zero_grad();
  double total = 0;
  for (const Microbatch& mb : split_microbatches(b.x, b.y, M)) {
    const Variable loss = loss_fn(model.forward(Variable(mb.input)), mb.target) * mb.weight;
    total += loss.item();
    loss.backward();
  }
  opt.step();
  return total;
}

inline void pipeline_matches_accumulation(const MakeModel& make, const std::string& schedule, int M,
                                   const std::vector<int64_t>& batch_rows, const Shape& image,
                                   int chunks_per_rank = 1, const std::string& checkpoint = "never") {
  auto world = dist::world();
  auto reference = make();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto model = make();
  Pipe pipe(model, world, loss_fn,
            PipeOptions().microbatches(M).schedule(schedule).chunks_per_rank(chunks_per_rank).checkpoint(
                checkpoint));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (size_t step = 0; step < batch_rows.size(); ++step) {
    const Batch b = make_batch(static_cast<int>(step), batch_rows[step], image);
    const double expected = reference_step(*reference, ref_opt, b, M);
    opt.zero_grad();
    const double loss = pipe.train_step(b.x, b.y);
    opt.step();
    EXPECT_NEAR(loss, expected, 1e-5) << "step " << step << " on stage " << pipe.stage();
  }
  expect_stage_matches_reference(pipe, *reference, 1e-5, *world);
}

}  // namespace pipeline
}  // namespace tessera
