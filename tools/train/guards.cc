#include "tools/train/guards.h"

#include <cmath>
#include <string>

#include "dist/reduce_scalar.h"
#include "dist/settings_check.h"
#include "tensor/check.h"
#include "tensor/shape.h"

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

// (An fp16 step whose gradients overflow is the loss scaler's business: it skips the step.)
void check_finite_loss(double loss, int64_t epoch, int64_t batch, int64_t batches, const Config& c,
                       dist::ProcessGroup* world) {
  double bad = std::isfinite(loss) ? 0 : 1;
  if (world != nullptr) bad = dist::all_reduce_scalar(bad, *world, dist::ReduceOp::kMax);
  if (bad == 0) return;
  TS_FAIL("the training loss is not finite (", std::isfinite(loss) ? "on another rank" :
          std::to_string(loss) + " on this rank", ") at epoch ", epoch, ", batch ", batch, " of ",
          batches, "; stopping", c.checkpoint_dir.empty() ? "" : " (the last checkpoint in " +
          c.checkpoint_dir + " is left as it was)", ". Lower --lr (", c.lr, ") or check the data");
}

}  // namespace train
}  // namespace tessera
