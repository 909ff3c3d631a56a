// The train tool's flags: parsing, per-model defaults, validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace train {

struct Config {
  std::string model = "logistic";  // logistic|mlp|resnet20|resnet32|resnet56|resnet18|resnet34|resnet50
  std::string data = "fashion-mnist";  // fashion-mnist|synthetic
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string strategy = "single";  // single|ddp|zero1
  int64_t epochs = 0;      // 0: the model's default
  int64_t batch_size = 0;  // 0: the model's default
  double lr = 0;           // 0: the model's default
  std::string optimizer;   // sgd|adam|adamw; empty: the model's default
  double momentum = 0.9;
  double weight_decay = -1;  // < 0: the model's default
  std::string schedule;      // constant|step|cosine; empty: the model's default
  int64_t warmup_epochs = 0;
  double label_smoothing = 0;
  int augment = -1;  // -1: the model's default (on for ResNets)
  uint64_t seed = 0;
  int threads = 0;  // 0: leave as is ($TESSERA_NUM_THREADS or all cores)
  // "cpu", "cuda" (rank r uses GPU r mod the GPU count) or "cuda:N".
  std::string device = "cpu";
  int64_t train_limit = 0;  // use only the first N training examples (0: all)
  int64_t synthetic_size = 10000;
  std::string checkpoint_dir;
  std::string resume;
  std::string metrics;
};

// Parses argv. On --help prints usage and exits 0; on a bad flag or value prints what was wrong
// and exits 2.
Config parse_flags(int argc, char** argv);
// Fills the model's defaults into unset fields.
void apply_model_defaults(Config& config);
std::string usage();

}  // namespace train
}  // namespace tessera
