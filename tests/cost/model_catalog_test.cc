// Profiles read off the repository's models: parameter counts, output sizes, tensor-parallel
// figures, and measured layer times.
#include "cost/model_catalog.h"

#include <gtest/gtest.h>

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

TEST(ModelCatalog, ErrorsNameTheValue) {
  testing::expect_error([] { build_model("vgg16", ModelInput{}); }, "unknown model 'vgg16'");
  testing::expect_error([] { parse_model_input("cifar"); }, "unknown input 'cifar'");
  const ModelInput in;
  auto model = build_model("mlp", in);
  ModelProfile p = describe_model("mlp", *model, in, 8);
  testing::expect_error([&] { set_layer_times(&p, {1, 2}, "x"); }, "has 4 layers; got 2 times");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
