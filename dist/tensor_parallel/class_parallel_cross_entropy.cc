#include "dist/tensor_parallel/class_parallel_cross_entropy.h"

#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/loss_reduction.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

ClassParallelCrossEntropy::ClassParallelCrossEntropy(std::shared_ptr<ProcessGroup> group,
                                                     Slice classes, int64_t num_classes,
                                                     Reduction reduction, double label_smoothing)
    : group_(std::move(group)),
      classes_(classes),
      num_classes_(num_classes),
      reduction_(reduction),
      label_smoothing_(label_smoothing) {
  TS_CHECK(group_ != nullptr, "ClassParallelCrossEntropy: the tensor-parallel group is null");
  const Slice expected = slice_of(num_classes, group_->size(), group_->rank(),
                                  "ClassParallelCrossEntropy: classes");
  TS_CHECK(classes.start == expected.start && classes.length == expected.length,
           "ClassParallelCrossEntropy: rank ", group_->rank(), " of ", group_->size(),
           " holds classes [", expected.start, ", ", expected.end(), ") of ", num_classes,
           ", not [", classes.start, ", ", classes.end(), ")");
  TS_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "ClassParallelCrossEntropy: label_smoothing must be in [0, 1], got ", label_smoothing);
}

namespace {

const ColumnParallelLinear& split_head(const ColumnParallelLinear& head) {
  TS_CHECK(!head.gathers_output(), "ClassParallelCrossEntropy: the head (", head.in_features(),
           " -> ", head.out_features(), ") gathers its output, so its logits are not split by "
           "class; make it with gather_output false (Style::kClassParallelHead)");
  TS_CHECK(head.chunks() == 1, "ClassParallelCrossEntropy: the head (", head.in_features(),
           " -> ", head.out_features(), ") is split by heads in ", head.chunks(),
           " chunks (q | k | v), not by class");
  return head;
}

}  // namespace

ClassParallelCrossEntropy::ClassParallelCrossEntropy(const ColumnParallelLinear& head,
                                                     Reduction reduction, double label_smoothing)
    : ClassParallelCrossEntropy(split_head(head).group(), head.output_slice(),
                                head.out_features(), reduction, label_smoothing) {}

void ClassParallelCrossEntropy::check(const Tensor& logits, const Tensor* target,
                                      const char* op) const {
  TS_CHECK(logits.dim() >= 2 && logits.size(-1) == classes_.length, op,
           ": expected this rank's logits [N, ", classes_.length, "] or [..., ", classes_.length,
           "] (classes [", classes_.start, ", ", classes_.end(), ") of ", num_classes_,
           "), got shape ", logits.shape());
  if (target == nullptr) return;
  const Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  TS_CHECK(target->shape() == rows, op, ": expected target ", rows,
           " of class indices (the logits' shape without its classes), got shape ",
           target->shape());
  TS_CHECK(target->dtype() == kI64 || target->dtype() == kI32, op,
           ": target must hold class indices (i64 or i32), got ", target->dtype());
  if (target->numel() > 0) {
    const int64_t lo = static_cast<int64_t>(amin(*target).item());
    const int64_t hi = static_cast<int64_t>(amax(*target).item());
    TS_CHECK(lo >= 0 && hi < num_classes_, op, ": target class out of range: values span [", lo,
             ", ", hi, "] but there are ", num_classes_, " classes");
  }
}

Variable ClassParallelCrossEntropy::operator()(const Variable& logits_in,
                                               const Tensor& target) const {
  const char* op = "ClassParallelCrossEntropy";
  // As cross_entropy: computed in f32 under autocast.
  const Variable cast = autocast_args("cross_entropy", logits_in)[0];
  check(cast.data(), &target, op);
  // Rows of classes: [..., C_r] as [N, C_r] (a language model's tokens are its rows).
  const int64_t c = classes_.length;
  const Variable logits = cast.dim() == 2 ? cast : reshape(cast, {-1, c});
  const int64_t n = logits.size(0);
  // Half-precision logits are computed in f32; f32 and f64 as they are.
  const DType compute = logits.dtype() == kF64 ? kF64 : kF32;
  const Tensor x = logits.data().to(compute);

  // 1. The row maxima over all classes.
  Tensor m = amax(x, {1}, /*keepdim=*/true);  // [N, 1]
  {
    trace::LabelIfRecording label("tp all_reduce cross-entropy max", "all_reduce");
    group_->all_reduce(m, ReduceOp::kMax)->wait();
  }
  const Tensor shifted = sub(x, m);
  const Tensor e = exp(shifted);

  // This rank's part of the target logit: rows whose target lies in [start, end). `where`, not a
  // product with the mask: a -inf logit (a masked class) times 0 would be NaN.
  const Tensor y = target.to(kI64).reshape({-1});
  const Tensor local_y = sub(y, static_cast<double>(classes_.start));
  const Tensor mine =  // [N]: 1 where this rank holds the target, else 0
      mul(ge(local_y, 0.0).to(compute), lt(local_y, static_cast<double>(c)).to(compute));
  const Tensor index = clamp(local_y, 0.0, static_cast<double>(c - 1));            // [N]
  const Tensor zero = zeros({n}, compute);
  const Tensor picked = where(ne(mine, 0.0), gather(shifted, 1, index.unsqueeze(1)).squeeze(1), zero);

  // 2. One all-reduce for the three sums.
  Tensor sums = stack({sum(e, {1}), picked, sum(shifted, {1})}, 1).contiguous();  // [N, 3]
  {
    trace::LabelIfRecording label("tp all_reduce cross-entropy sums", "all_reduce");
    group_->all_reduce(sums, ReduceOp::kSum)->wait();
  }
  const Tensor s = sums.select(1, 0), x_y = sums.select(1, 1), sum_x = sums.select(1, 2);
  const Tensor log_s = log(s);
  const double eps = label_smoothing_;
  Tensor rows = mul(sub(log_s, x_y), 1.0 - eps);
  if (eps > 0) rows = add(rows, mul(sub(log_s, div(sum_x, static_cast<double>(num_classes_))), eps));

  // Backward keeps p = exp(x - m) / S ([N, C_r], the gradient's own size) and, per row, the
  // target's local index and whether this rank holds it; q is rebuilt there.
  const DType dtype = logits.dtype();
  const Tensor probs = div(e, s.unsqueeze(1));
  const Tensor target_weight = mul(mine, 1.0 - eps).unsqueeze(1);  // [N, 1]
  const Reduction reduction = reduction_;
  const int64_t classes = num_classes_;
  // Without a reduction, the rows' losses in the target's shape.
  const Tensor value = reduction == Reduction::kNone ? rows.reshape(target.shape())
                                                     : reduce_rows(rows, reduction);
  return record("ClassParallelCrossEntropyBackward", value, {logits},
                [=](const Tensor& g) -> Grads {
                  // p - q on this rank's classes, q = (1 - eps) one_hot(y) + eps / C.
                  Tensor grad = sub(probs, eps / static_cast<double>(classes));
                  grad = scatter_add(grad, 1, index.unsqueeze(1), neg(target_weight));
                  grad = mul(grad, per_row_grad(g.to(compute), n, reduction));
                  return {grad.to(dtype)};
                });
}

Tensor ClassParallelCrossEntropy::argmax(const Tensor& logits) const {
  check(logits, nullptr, "ClassParallelCrossEntropy::argmax");
  const Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  const Tensor x =
      (logits.dtype() == kF64 ? logits : logits.to(kF32)).reshape({-1, classes_.length});
  const Tensor local_best = amax(x, {1});                                           // [N]
  const Tensor local_class = add(tessera::argmax(x, 1), static_cast<double>(classes_.start));
  Tensor best = local_best.clone();
  {
    trace::LabelIfRecording label("tp all_reduce argmax best", "all_reduce");
    group_->all_reduce(best, ReduceOp::kMax)->wait();
  }
  // Ranks whose best equals the group's offer their class; the others offer "no class" (a
  // value past every class), and the smallest offer wins, as argmax breaks ties.
  Tensor offer = where(eq(local_best, best), local_class.to(kF64),
                       full(local_best.shape(), static_cast<double>(num_classes_), kF64));
  {
    trace::LabelIfRecording label("tp all_reduce argmax class", "all_reduce");
    group_->all_reduce(offer, ReduceOp::kMin)->wait();
  }
  return offer.to(kI64).reshape(rows);
}

int64_t ClassParallelCrossEntropy::num_correct(const Tensor& logits, const Tensor& target) const {
  check(logits, &target, "ClassParallelCrossEntropy::num_correct");
  return static_cast<int64_t>(sum(eq(argmax(logits), target.to(kI64)).to(kI64)).item());
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
