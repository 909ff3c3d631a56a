#include "tools/train/guards.h"

#include <cmath>
#include <optional>
#include <string>

#include "dist/reduce_scalar.h"
#include "dist/settings_check.h"
#include "dist/trace_recorder.h"
#include "optim/clip_grad.h"
#include "tensor/check.h"
#include "tensor/shape.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

void verify_configuration(const Config& c, const nn::Module& model, const Data& d,
                          dist::ProcessGroup& world) {
  dist::Settings settings = settings_that_must_agree(c);
  std::string parameters;
  for (const auto& [name, p] : model.named_parameters()) {
    parameters += name + shape_str(p.shape()) + " ";
  }
  settings.emplace_back("model parameters", parameters);
  settings.emplace_back("training examples", std::to_string(d.train->size()));
  settings.emplace_back("test examples", std::to_string(d.test->size()));
  dist::verify_same_settings(settings, world);
}

void check_finite_step(double loss, Strategy* gradients, int64_t epoch, int64_t batch,
                       int64_t batches, const Config& c, dist::ProcessGroup* world) {
  const double norm = gradients ? gradients->local_gradient_norm() : 0.0;
  // Both checks in one MAX all-reduce: 2 when a loss is bad, else 1 when a gradient norm is,
  // so the loss (whose gradients are bad too) is the one named when both are.
  const double bad_loss = 2, bad_gradients = 1;
  double bad = !std::isfinite(loss) ? bad_loss : !std::isfinite(norm) ? bad_gradients : 0;
  if (world != nullptr) {
    std::optional<dist::trace::CollectiveLabel> label;  // --trace: names it on the comm track
    if (dist::trace::recording()) label.emplace("all_reduce finite check", "all_reduce");
    bad = dist::all_reduce_scalar(bad, *world, dist::ReduceOp::kMax);
  }
  if (bad == 0) return;
  const bool is_loss = bad == bad_loss;
  const double value = is_loss ? loss : norm;
  TS_FAIL("the training ", is_loss ? "loss" : "gradient norm", " is not finite (",
          std::isfinite(value) ? "on another rank" : std::to_string(value) + " on this rank",
          ") at epoch ", epoch, ", batch ", batch, " of ", batches, "; stopping",
          c.checkpoint_dir.empty() ? "" : " (the last checkpoint in " + c.checkpoint_dir +
          " is left as it was)", ". Lower --lr (", c.lr, ") or check the data");
}

}  // namespace train
}  // namespace tessera
