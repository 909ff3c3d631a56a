// Profiles read off the repository's models: parameter counts, output sizes, tensor-parallel
// figures, and measured layer times.
#include "cost/model_catalog.h"

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

TEST(ModelCatalog, MlpAsTheTrainToolBuildsIt) {
  const ModelInput in;
  auto model = build_model("mlp", in);
  const ModelProfile p = describe_model("mlp", *model, in, 64);
  EXPECT_EQ(p.parameters(), 784 * 256 + 256 + 256 * 10 + 10);
  ASSERT_EQ(p.layers.size(), 4u);  // flatten fc1 relu fc2
  EXPECT_EQ(p.layers[0].output_elements, 784);
  EXPECT_EQ(p.layers[1].parameter_numels, (std::vector<int64_t>{784 * 256, 256}));
  EXPECT_EQ(p.layers[3].output_elements, 10);
  EXPECT_EQ(p.tensor_parallel_parameters, p.parameters() - 10);  // fc2's bias stays whole
  EXPECT_EQ(p.compute_seconds(), 0);
}

TEST(ModelCatalog, ResNet20HasItsPublishedParameterCount) {
  const ModelInput in;
  auto model = build_model("resnet20", in);
  const ModelProfile p = describe_model("resnet20", *model, in, 128);
  EXPECT_EQ(p.parameters(), 269434);  // models/resnet.h
  EXPECT_EQ(p.tensor_parallel_parameters, 64 * 10 + 10);
  EXPECT_EQ(p.tensor_parallel_all_reduces[0].second, 64);
}

TEST(ModelCatalog, MeasuresAndScalesLayerTimes) {
  const ModelInput in;
  auto model = build_model("mlp", in);
  ModelProfile p = describe_model("mlp", *model, in, 8);
  measure_layer_times(*model, in, 8, 1, &p);
  EXPECT_GT(p.compute_seconds(), 0);
  EXPECT_NEAR(p.backward_seconds(), 2 * p.forward_seconds(), 1e-12);
  const double fc1_share = (p.layers[1].forward_seconds + p.layers[1].backward_seconds) / p.compute_seconds();
  scale_compute_time(&p, 0.1, "given");
  EXPECT_NEAR(p.compute_seconds(), 0.1, 1e-12);
  EXPECT_NEAR((p.layers[1].forward_seconds + p.layers[1].backward_seconds) / 0.1, fc1_share, 1e-9);
  EXPECT_EQ(p.times_source, "given");
}

TEST(ModelCatalog, Gpt2HasLlmCsParameterCountAndMegatronsSplit) {
  const ModelInput in = parse_model_input("text");  // GPT-2's BPE, windows of 64
  ASSERT_EQ(in.vocab, 50257);
  auto model = build_model("gpt2", in);
  const ModelProfile p = describe_model("gpt2", *model, in, 4);
  // llm.c's count for the padded vocabulary (50304): 124,475,904.
  EXPECT_EQ(p.parameters(), 124475904);
  ASSERT_EQ(p.layers.size(), 15u);  // embed, h0..h11, ln_f, lm_head
  EXPECT_EQ(p.layers[0].output_elements, 64 * 768);
  EXPECT_EQ(p.layers[14].output_elements, 64 * 50304);
  EXPECT_EQ(p.input_elements, 64);
  // Per block: c_attn (3C x C + 3C), attn.c_proj's weight (C x C), c_fc (4C x C + 4C),
  // mlp.c_proj's weight (C x 4C); and wte's rows (V x C).
  const int64_t c = 768;
  EXPECT_EQ(p.tensor_parallel_parameters,
            12 * (3 * c * c + 3 * c + c * c + 4 * c * c + 4 * c + 4 * c * c) + 50304 * c);
  // g twice, f twice, per block; then the lookup's g, lm_head's f, the loss's max and sums.
  ASSERT_EQ(p.tensor_parallel_all_reduces.size(), 12u * 4 + 4);
  for (size_t i = 0; i < 12 * 4 + 2; ++i) {
    EXPECT_EQ(p.tensor_parallel_all_reduces[i].second, 64 * c) << p.tensor_parallel_all_reduces[i].first;
  }
  EXPECT_EQ(p.tensor_parallel_all_reduces[12 * 4 + 2].second, 64);
  EXPECT_EQ(p.tensor_parallel_all_reduces[12 * 4 + 3].second, 3 * 64);
}

TEST(ModelCatalog, AGptTrainsOnItsExampleBatch) {
  ModelInput in = parse_model_input("text");
  in.vocab = 256;
  in.seq_len = 8;
  auto model = build_model("gpt-tiny", in);
  const Tensor ids = example_batch(in, 3);
  EXPECT_EQ(ids.shape(), (Shape{3, 8}));
  for (int64_t id : ids.to_vector<int64_t>()) ASSERT_TRUE(id >= 0 && id < 256) << id;
  const Variable logits = model->forward(Variable(ids));
  // The targets are the window's own ids: the language model's loss of them.
  EXPECT_EQ(example_loss(in, logits, 3).data().item(), models::lm_loss(logits, ids).data().item());
  ModelProfile p = describe_model("gpt-tiny", *model, in, 3);
  measure_layer_times(*model, in, 3, 1, &p);  // token ids in: the first layer takes no gradient
  EXPECT_GT(p.compute_seconds(), 0);
}

TEST(ModelCatalog, ErrorsNameTheValue) {
  testing::expect_error([] { build_model("vgg16", ModelInput{}); }, "unknown model 'vgg16'");
  testing::expect_error([] { parse_model_input("cifar"); }, "unknown input 'cifar'");
  testing::expect_error([] { build_model("gpt2", ModelInput{}); },
                        "gpt2 is a language model: it reads text (--data=text), not fashion-mnist");
  testing::expect_error([] { build_model("resnet20", parse_model_input("text")); },
                        "resnet20 reads images");
  const ModelInput in;
  auto model = build_model("mlp", in);
  ModelProfile p = describe_model("mlp", *model, in, 8);
  testing::expect_error([&] { set_layer_times(&p, {1, 2}, "x"); }, "has 4 layers; got 2 times");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
