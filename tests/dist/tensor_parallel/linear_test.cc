// Column- and row-parallel Linear and the Megatron MLP block against one non-parallel Linear
// with the same full weights: outputs and every gradient (f64, 1e-10), uneven slices included
// (run on 2 and 3 ranks: 7 features split 4 + 3 and 3 + 2 + 2); state dicts that hold the full
// weights and move between parallel and non-parallel models; the same seed giving the same
// full weights; and the errors for sizes that cannot be split.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/tensor_parallel/row_parallel_linear.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "tensor/ops.h"
#include "tensor/allocator.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;
constexpr double kTol = 1e-10;

std::shared_ptr<nn::Linear> full_linear(int64_t in, int64_t out, uint64_t seed) {
  manual_seed(seed);
  auto l = std::make_shared<nn::Linear>(in, out);
  l->to(kF64);
  return l;
}

Tensor input(int64_t rows, int64_t cols) {
  Generator g(42);
  return randn({rows, cols}, kF64, &g);
}

// The same "upstream gradient" on every rank: L = sum(y * w).
Tensor upstream(int64_t rows, int64_t cols) {
  Generator g(43);
  return randn({rows, cols}, kF64, &g);
}

TEST(ColumnParallelLinear, SplitOutputAndGradientsEqualOneLinear) {
  auto group = dist::world();
  auto full = full_linear(5, 7, 1);
  ColumnParallelLinear col(*full, group);
  const Slice s = col.output_slice();
  Variable x_ref(input(4, 5), true), x(input(4, 5), true);
  const Tensor w = upstream(4, 7);

  const Variable y_ref = full->forward(x_ref);
  sum(mul(y_ref, Variable(w))).backward();
  const Variable y = col.forward(x);
  EXPECT_EQ(y.shape(), (Shape{4, s.length}));
  EXPECT_LT(max_abs_diff(y.data(), y_ref.data().narrow(1, s.start, s.length)), kTol);
  // Each rank's loss is its slice's part of L; the input's gradient is summed over ranks by
  // copy_to_parallel_region's backward.
  sum(mul(y, Variable(w.narrow(1, s.start, s.length).contiguous()))).backward();
  EXPECT_LT(max_abs_diff(x.grad(), x_ref.grad()), kTol);
  EXPECT_LT(max_abs_diff(col.weight().grad(), full->weight().grad().narrow(0, s.start, s.length)),
            kTol);
  EXPECT_LT(max_abs_diff(col.bias().grad(), full->bias().grad().narrow(0, s.start, s.length)),
            kTol);
}

TEST(ColumnParallelLinear, GatheredOutputEqualsOneLinear) {
  auto group = dist::world();
  auto full = full_linear(5, 7, 2);
  ColumnParallelLinear col(*full, group, /*gather_output=*/true);
  const Slice s = col.output_slice();
  Variable x_ref(input(3, 5), true), x(input(3, 5), true);
  const Tensor w = upstream(3, 7);
  const Variable y_ref = full->forward(x_ref);
  sum(mul(y_ref, Variable(w))).backward();
  const Variable y = col.forward(x);
  EXPECT_LT(max_abs_diff(y.data(), y_ref.data()), kTol);
  sum(mul(y, Variable(w))).backward();  // the full L on every rank
  EXPECT_LT(max_abs_diff(x.grad(), x_ref.grad()), kTol);
  EXPECT_LT(max_abs_diff(col.weight().grad(), full->weight().grad().narrow(0, s.start, s.length)),
            kTol);
}

TEST(RowParallelLinear, FullOrSplitInputEqualsOneLinear) {
  auto group = dist::world();
  for (bool input_is_parallel : {false, true}) {
    auto full = full_linear(7, 5, 3);
    RowParallelLinear row(*full, group, input_is_parallel);
    const Slice s = row.input_slice();
    Variable x_ref(input(4, 7), true);
    Variable x(input_is_parallel ? input(4, 7).narrow(1, s.start, s.length).contiguous()
                                 : input(4, 7),
               true);
    const Tensor w = upstream(4, 5);
    const Variable y_ref = full->forward(x_ref);
    sum(mul(y_ref, Variable(w))).backward();
    const Variable y = row.forward(x);
    EXPECT_LT(max_abs_diff(y.data(), y_ref.data()), kTol) << input_is_parallel;
    sum(mul(y, Variable(w))).backward();
    const Tensor x_grad_ref =
        input_is_parallel ? x_ref.grad().narrow(1, s.start, s.length) : x_ref.grad();
    EXPECT_LT(max_abs_diff(x.grad(), x_grad_ref), kTol) << input_is_parallel;
    EXPECT_LT(max_abs_diff(row.weight().grad(), full->weight().grad().narrow(1, s.start, s.length)),
              kTol);
    EXPECT_LT(max_abs_diff(row.bias().grad(), full->bias().grad()), kTol);
  }
}

// fc1 column-parallel, fc2 row-parallel: one all-reduce forward (fc2's), one backward (fc1's).
TEST(MegatronMLP, ParallelizedMLPEqualsTheMLP) {
  auto group = dist::world();
  const int T = group->size();
  manual_seed(5);
  auto reference = models::MLP(6, 7, 4);
  reference->to(kF64);
  manual_seed(5);
  auto model = models::MLP(6, 7, 4);
  model->to(kF64);
  parallelize_module(*model, group, {{"fc1", Style::kColumnwise}, {"fc2", Style::kRowwise}});
  const Tensor images = input(6, 6), w = upstream(6, 4);
  sum(mul(reference->forward(Variable(images)), Variable(w))).backward();
  const int64_t before = group->ledger().total_bytes();
  const Variable y = model->forward(Variable(images));
  EXPECT_LT(max_abs_diff(y.data(), reference->forward(Variable(images)).data()), kTol);
  sum(mul(y, Variable(w))).backward();
  // Forward: fc2's all-reduce of [6, 4] f64. Backward: fc1's input gradient would be the next
  // all-reduce, but the input does not require grad, so there is none.
  EXPECT_EQ(group->ledger().total_bytes() - before, 2 * (T - 1) * 6 * 4 * 8 / T);

  const auto fc1 = std::dynamic_pointer_cast<ColumnParallelLinear>((*model)[1]);
  const auto fc2 = std::dynamic_pointer_cast<RowParallelLinear>((*model)[3]);
  ASSERT_TRUE(fc1 && fc2);
  const auto ref1 = std::dynamic_pointer_cast<nn::Linear>((*reference)[1]);
  const auto ref2 = std::dynamic_pointer_cast<nn::Linear>((*reference)[3]);
  const Slice h = fc1->output_slice();
  EXPECT_EQ(fc2->input_slice().start, h.start);
  EXPECT_LT(max_abs_diff(fc1->weight().grad(), ref1->weight().grad().narrow(0, h.start, h.length)),
            kTol);
  EXPECT_LT(max_abs_diff(fc1->bias().grad(), ref1->bias().grad().narrow(0, h.start, h.length)),
            kTol);
  EXPECT_LT(max_abs_diff(fc2->weight().grad(), ref2->weight().grad().narrow(1, h.start, h.length)),
            kTol);
  EXPECT_LT(max_abs_diff(fc2->bias().grad(), ref2->bias().grad()), kTol);
}

TEST(TensorParallelStateDict, HoldsFullWeightsAndMovesBetweenParallelAndNot) {
  auto group = dist::world();
  manual_seed(9);
  auto reference = models::MLP(6, 7, 4);
  manual_seed(9);
  auto model = models::MLP(6, 7, 4);
  parallelize_module(*model, group, {{"fc1", Style::kColumnwise}, {"fc2", Style::kRowwise}});
  // Same keys, full shapes, same values.
  const StateDict ref_state = reference->state_dict(), state = model->state_dict();
  ASSERT_EQ(state.size(), ref_state.size());
  for (const auto& [name, t] : ref_state) {
    ASSERT_TRUE(state.contains(name)) << name;
    EXPECT_EQ(state.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(max_abs_diff(state.at(name), t), 0.0) << name;
  }
  // A non-parallel checkpoint loaded into the parallel model: each rank takes its slices.
  StateDict doubled;
  for (const auto& [name, t] : ref_state) doubled.set(name, mul(t, 2.0));
  model->load_state_dict(doubled);
  const auto fc1 = std::dynamic_pointer_cast<ColumnParallelLinear>((*model)[1]);
  const Slice h = fc1->output_slice();
  EXPECT_EQ(max_abs_diff(fc1->weight().data(), doubled.at("fc1.weight").narrow(0, h.start, h.length)),
            0.0);
  // And back: the parallel model's state loads into a non-parallel one.
  manual_seed(123);
  auto plain = models::MLP(6, 7, 4);
  plain->load_state_dict(model->state_dict());
  for (const auto& [name, t] : plain->state_dict()) {
    EXPECT_EQ(max_abs_diff(t, doubled.at(name)), 0.0) << name;
  }
  // A mis-shaped checkpoint names the full shapes.
  StateDict wrong = doubled;
  wrong.set("fc1.weight", zeros({3, 6}));
  expect_error([&] { model->load_state_dict(wrong); }, "fc1.weight (checkpoint [3, 6], model [7, 6])");
}

TEST(TensorParallelInit, TheSameSeedGivesTheSameFullWeightsWhateverT) {
  auto group = dist::world();
  manual_seed(11);
  nn::Linear a(5, 7);
  nn::Linear a_next(3, 3);  // the layer built after it
  manual_seed(11);
  ColumnParallelLinear col(5, 7, group);
  nn::Linear col_next(3, 3);
  const Slice s = col.output_slice();
  EXPECT_EQ(max_abs_diff(col.weight().data(), a.weight().data().narrow(0, s.start, s.length)), 0.0);
  EXPECT_EQ(max_abs_diff(col_next.weight().data(), a_next.weight().data()), 0.0);
  manual_seed(12);
  nn::Linear b(7, 5);
  manual_seed(12);
  RowParallelLinear row(7, 5, group);
  const Slice c = row.input_slice();
  EXPECT_EQ(max_abs_diff(row.weight().data(), b.weight().data().narrow(1, c.start, c.length)), 0.0);
  EXPECT_EQ(max_abs_diff(row.bias().data(), b.bias().data()), 0.0);
}

// The counting allocator: once the full Linear is gone, a rank holds only its slices (a slice of
// leading rows must be a copy, not a view keeping the full storage alive).
TEST(TensorParallelMemory, ARankHoldsOnlyItsSlice) {
  auto group = dist::world();
  const Slice rows = slice_of(700, group->size(), group->rank(), "test");
  const Slice cols = slice_of(600, group->size(), group->rank(), "test");
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  {
    ColumnParallelLinear col(600, 700, group);
    EXPECT_EQ(memory_stats(Device::cpu()).current_bytes - base, rows.length * (600 + 1) * 4);
  }
  {
    RowParallelLinear row(600, 700, group);
    EXPECT_EQ(memory_stats(Device::cpu()).current_bytes - base, (700 * cols.length + 700) * 4);
  }
}

TEST(TensorParallelErrors, SizesThatCannotBeSplitAndWrongLayersAreNamed) {
  auto group = dist::world();
  const int T = group->size();
  const std::string t = std::to_string(T);
  expect_error([&] { ColumnParallelLinear(5, T - 1, group); },
               "ColumnParallelLinear: output features: " + std::to_string(T - 1) +
                   " cannot be split over " + t + " tensor-parallel ranks");
  expect_error([&] { RowParallelLinear(T - 1, 5, group); },
               "RowParallelLinear: input features: " + std::to_string(T - 1) +
                   " cannot be split over " + t);
  ColumnParallelLinear col(5, 7, group);
  expect_error([&] { col.forward(Variable(zeros({2, 6}))); },
               "ColumnParallelLinear::forward: expected 5 input features, got shape [2, 6]");
  auto model = models::MLP(6, 7, 4);
  expect_error([&] { parallelize_module(*model, group, {{"relu", Style::kColumnwise}}); },
               "'relu' is a ReLU, not a Linear");
  expect_error([&] { parallelize_module(*model, group, {{"fc9", Style::kColumnwise}}); },
               "the model has no module 'fc9'");
  EXPECT_EQ(last_linear_name(*model), "fc2");
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
