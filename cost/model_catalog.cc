#include "cost/model_catalog.h"

#include <algorithm>
#include <chrono>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "pipeline/balance.h"
#include "tensor/check.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace cost {

ModelInput parse_model_input(const std::string& name) {
  if (name == "fashion-mnist") return ModelInput{};
  if (name == "text") {
    ModelInput in;
    in.name = "text";
    in.channels = in.image_size = in.classes = 0;
    in.seq_len = 64;
    in.vocab = 50257;
    return in;
  }
  TS_CHECK(name == "imagenet", "unknown input '", name, "' (expected fashion-mnist, imagenet or text)");
  return ModelInput{3, 224, 1000, "imagenet"};
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {
      "logistic", "mlp",      "resnet20", "resnet32", "resnet56", "resnet18",
      "resnet34", "resnet50", "gpt-tiny", "gpt-nano", "gpt2"};
  return names;
}

bool is_language_model(const std::string& name) { return name.rfind("gpt", 0) == 0; }

models::GPTConfig gpt_config(const std::string& name, const ModelInput& in) {
  TS_CHECK(in.text(), name, " is a language model: it reads text (--data=text), not ", in.name);
  models::GPTConfig config = models::GPTConfig::named(name, in.vocab);
  if (in.context > 0) config.context = in.context;
  config.recompute = in.recompute;
  TS_CHECK(in.seq_len <= config.context, name, "'s context is ", config.context,
           " positions; a window of ", in.seq_len, " tokens does not fit");
  return config;
}

std::shared_ptr<nn::Sequential> build_model(const std::string& name, const ModelInput& in) {
  if (is_language_model(name)) return models::GPT(gpt_config(name, in));
  const bool known = std::find(model_names().begin(), model_names().end(), name) != model_names().end();
  TS_CHECK(!(known && in.text()), name, " reads images (--data=fashion-mnist or imagenet), not text");
  const int64_t pixels = in.channels * in.image_size * in.image_size, k = in.classes;
  if (name == "logistic") return models::LogisticRegression(pixels, k);
  if (name == "mlp") return models::MLP(pixels, 256, k);
  if (name == "resnet20") return models::ResNet20(in.channels, k);
  if (name == "resnet32") return models::ResNet32(in.channels, k);
  if (name == "resnet56") return models::ResNet56(in.channels, k);
  if (name == "resnet18") return models::ResNet18(in.channels, k);
  if (name == "resnet34") return models::ResNet34(in.channels, k);
  TS_CHECK(name == "resnet50", "unknown model '", name,
           "' (expected logistic, mlp, resnet20, resnet32, resnet56, resnet18, resnet34, resnet50, "
           "gpt-tiny, gpt-nano or gpt2)");
  return models::ResNet50(in.channels, k);
}

Tensor example_batch(const ModelInput& in, int64_t batch) {
  if (in.text()) {
    // Token ids spread over the vocabulary by a fixed stride (what they are changes no size).
    std::vector<int64_t> ids(batch * in.seq_len);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7919 + 13) % in.vocab);
    return from_vector<int64_t>(ids, {batch, in.seq_len});
  }
  Generator gen(0);
  return randn({batch, in.channels, in.image_size, in.image_size}, {}, &gen);
}

Variable example_loss(const ModelInput& in, const Variable& output, int64_t batch) {
  if (!in.text()) return cross_entropy(output, zeros({batch}, kI64));
  return models::lm_loss(output, example_batch(in, batch));  // any ids of the vocabulary do
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainingSetup& setup,
                                                 std::vector<Variable> parameters) {
  if (setup.optimizer == OptimizerKind::kAdam) {
    return std::make_unique<optim::Adam>(std::move(parameters), optim::AdamOptions(1e-3));
  }
  return std::make_unique<optim::SGD>(std::move(parameters), optim::SGDOptions(0.01).momentum(0.9));
}

namespace {

// Tensor parallelism as tools/train applies it (see the header).
void add_tensor_parallel(const std::string& name, nn::Sequential& model, const ModelInput& in,
                         ModelProfile& p) {
  if (is_language_model(name)) {
    // Megatron's block: c_attn and c_fc split by columns (weights and biases), the two c_proj
    // by rows (their biases whole). Per block and window, two all-reduces of [T, C] forward
    // (g, after each c_proj) and two backward (f, before c_attn and c_fc). The vocabulary
    // (parallelize_gpt): wte's rows split; per window the lookup's g of [T, C] forward, lm_head's
    // f of [T, C] backward, and the vocabulary-parallel cross-entropy's max and three sums per
    // token.
    int64_t width = 0, blocks = 0;
    for (const auto& [pname, v] : model.named_parameters()) {
      const bool column = pname.find(".c_attn.") != std::string::npos || pname.find(".c_fc.") != std::string::npos;
      const bool row_weight = pname.find(".c_proj.weight") != std::string::npos;
      const bool vocabulary = pname == "embed.wte.weight";
      if (column || row_weight || vocabulary) p.tensor_parallel_parameters += v.numel();
      if (pname.find(".c_attn.weight") != std::string::npos) width = v.shape()[1], ++blocks;
    }
    for (int64_t b = 0; b < blocks; ++b) {
      for (const char* what : {"attn.c_proj output (g)", "mlp.c_proj output (g)",
                               "ln_1 output gradient (f)", "ln_2 output gradient (f)"}) {
        p.tensor_parallel_all_reduces.push_back({what, in.seq_len * width});
      }
    }
    p.tensor_parallel_all_reduces.push_back({"wte lookup (g)", in.seq_len * width});
    p.tensor_parallel_all_reduces.push_back({"lm_head input gradient (f)", in.seq_len * width});
    p.tensor_parallel_all_reduces.push_back({"cross-entropy max", in.seq_len});
    p.tensor_parallel_all_reduces.push_back({"cross-entropy sums", 3 * in.seq_len});
    return;
  }
  if (name == "mlp") {
    for (const auto& [pname, v] : model.named_parameters()) {
      if (pname != "fc2.bias") p.tensor_parallel_parameters += v.numel();
    }
    // g after fc2 (f's backward all-reduce before fc1 does not run: the input needs no gradient).
    p.tensor_parallel_all_reduces.push_back({"fc2 output (g)", in.classes});
    return;
  }
  const auto params = model.named_parameters();
  const Variable& weight = params[params.size() - 2].second;  // the classifier's [classes, in]
  p.tensor_parallel_parameters = weight.numel() + params.back().second.numel();
  if (name != "logistic") {  // the logistic model's head input is the data: no gradient
    p.tensor_parallel_all_reduces.push_back({"head input gradient (f)", weight.shape()[1]});
  }
  p.tensor_parallel_all_reduces.push_back({"cross-entropy max", 1});
  p.tensor_parallel_all_reduces.push_back({"cross-entropy sums", 3});
}

}  // namespace

ModelProfile describe_model(const std::string& name, nn::Sequential& model, const ModelInput& in,
                            int64_t batch) {
  TS_CHECK(batch >= 1, "describe_model: batch must be >= 1, got ", batch);
  ModelProfile p;
  p.name = name;
  p.batch = batch;
  p.input_elements = in.text() ? in.seq_len : in.channels * in.image_size * in.image_size;
  NoGradGuard no_grad;
  Variable x(example_batch(in, 1));
  for (size_t i = 0; i < model.size(); ++i) {
    LayerProfile layer;
    layer.name = model.name_at(i);
    for (const Variable& v : model[i]->parameters()) {
      layer.parameter_numels.push_back(v.numel());
      layer.parameter_shapes.push_back(v.shape());
    }
    // A use of another layer's parameter (models::GPT's lm_head reads wte): a pipeline's copy.
    for (const auto& tied : model[i]->named_tied_parameters()) p.tied_parameters += tied.second.numel();
    x = model[i]->forward(x);
    layer.output_elements = x.numel();
    p.layers.push_back(std::move(layer));
  }
  add_tensor_parallel(name, model, in, p);
  return p;
}

void set_layer_times(ModelProfile* p, const std::vector<double>& seconds, const std::string& source) {
  TS_CHECK(seconds.size() == p->layers.size(), p->name, " has ", p->layers.size(), " layers; got ",
           seconds.size(), " times");
  for (size_t i = 0; i < seconds.size(); ++i) {
    TS_CHECK(seconds[i] >= 0, "layer ", i, " (", p->layers[i].name, "): negative time ", seconds[i]);
    p->layers[i].forward_seconds = seconds[i] / 3;
    p->layers[i].backward_seconds = seconds[i] * 2 / 3;
  }
  p->times_source = source;
}

void measure_layer_times(nn::Sequential& model, const ModelInput& in, int64_t batch, int repeats,
                         ModelProfile* p) {
  std::vector<double> seconds = pipeline::profile_layer_times(model, example_batch(in, batch), repeats);
  for (double& s : seconds) s /= repeats;
  set_layer_times(p, seconds, "measured on this machine, batch " + std::to_string(batch));
}

void measure_step_overhead(nn::Sequential& model, const ModelInput& in, const TrainingSetup& setup,
                           int repeats, ModelProfile* p) {
  TS_CHECK(p->compute_seconds() > 0, "measure_step_overhead: ", p->name,
           " has no layer times (measure them first)");
  TS_CHECK(repeats >= 1, "measure_step_overhead: repeats must be >= 1, got ", repeats);
  const Tensor x = example_batch(in, p->batch);
  const std::unique_ptr<optim::Optimizer> opt = make_optimizer(setup, model.parameters());
  model.train();
  std::vector<double> seconds;
  for (int r = 0; r <= repeats; ++r) {  // the first is the warm-up (the optimizer's state)
    const auto start = std::chrono::steady_clock::now();
    opt->zero_grad();
    example_loss(in, model.forward(Variable(x)), p->batch).backward();
    opt->step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  p->step_overhead_seconds = std::max(0.0, seconds[seconds.size() / 2] - p->compute_seconds());
}

void scale_compute_time(ModelProfile* p, double seconds, const std::string& source) {
  const double total = p->compute_seconds();
  TS_CHECK(total > 0, "scale_compute_time: ", p->name, " has no layer times to scale");
  TS_CHECK(seconds > 0, "scale_compute_time: the total must be > 0 s, got ", seconds);
  std::vector<double> scaled;
  for (const LayerProfile& l : p->layers) {
    scaled.push_back((l.forward_seconds + l.backward_seconds) * seconds / total);
  }
  set_layer_times(p, scaled, source);
}

}  // namespace cost
}  // namespace tessera
