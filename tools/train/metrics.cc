#include "tools/train/metrics.h"

#include <cmath>
#include <utility>

#include "tensor/check.h"

namespace tessera {
namespace train {

MetricsFile::MetricsFile(const std::string& path) : path_(path), start_(Clock::now()) {
  if (path_.empty()) return;
  out_.open(path_, std::ios::app);
  TS_CHECK(out_.good(), "train: cannot open --metrics file '", path_, "'");
}

void MetricsFile::step(const StepMetrics& m, const optim::GradScaler& scaler) {
  if (!enabled()) return;
  write(json::Object()
            .add("kind", "step")
            .add("step", m.step)
            .add("epoch", m.epoch)
            .add("elapsed_seconds", seconds_since(start_))
            .add("loss", m.loss)
            .add("lr", m.lr)
            .add("images_per_second", m.seconds > 0 ? m.images / m.seconds : 0.0),
        scaler, "step", m.step);
}

void MetricsFile::epoch(const EpochMetrics& m, const optim::GradScaler& scaler) {
  if (!enabled()) return;
  json::Object line;
  line.add("kind", "epoch")
      .add("epoch", m.epoch)
      .add("step", m.step)
      .add("elapsed_seconds", seconds_since(start_))
      .add("train_loss", m.train_loss);
  if (m.language_model) {
    line.add("val_loss", m.val_loss)
        .add("val_perplexity", std::exp(m.val_loss))
        .add("tokens_per_second", m.tokens_per_second);
  } else {
    line.add("test_accuracy", m.test_accuracy).add("images_per_second", m.images_per_second);
  }
  line.add("seconds", m.seconds).add("lr", m.lr);
  write(std::move(line), scaler, "epoch", m.epoch);
}

void MetricsFile::write(json::Object line, const optim::GradScaler& scaler, const char* where,
                        int64_t at) {
  if (scaler.is_enabled()) line.add("loss_scale", scaler.get_scale());
  out_ << line.str() << '\n' << std::flush;
  TS_CHECK(out_.good(), "train: writing the --metrics file '", path_, "' failed after ", where,
           " ", at, " (disk full?)");
}

}  // namespace train
}  // namespace tessera
