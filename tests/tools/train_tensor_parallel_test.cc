// The train tool with --tensor-parallel: the Megatron MLP block (T = 2) ends where one process
// does and sends the forward all-reduce's bytes; a class-parallel head inside data parallelism
// (T = 2 x D = 2 on 4 ranks) ends where 2-rank DDP does and holds half the head's logits;
// checkpoints move between tensor-parallel and single-process runs both ways; pipeline stages of
// tensor-parallel layers (3D) end where one process does and checkpoint in the unsplit format;
// a GPT with --sequence-parallel ends where it does without, and resumes either's checkpoint;
// and flags that cannot work end every rank with code 2, naming them.
#include <gtest/gtest.h>

#include <string>

#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::kShortMlp;
using tessera::testing::last_json_line;
using tessera::testing::run_train;
using tessera::testing::run_train_single;
using tessera::testing::temp_path;

// The same arithmetic in another order (the row-parallel sum, the class-parallel loss's three
// sums): equal to ~1e-7 per step; the tolerances are the pipeline tests'.
void expect_same_run(const std::string& s, const std::string& reference) {
  EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
  EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
      << s;
}

// fc1 column-parallel, fc2 row-parallel on 2 ranks (--strategy=single: no data parallelism).
TEST(TrainTensorParallel, MegatronMLPEndsWhereOneProcessDoes) {
  const auto single = run_train_single(kShortMlp);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto r = run_train(kShortMlp + "--tensor-parallel=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string s = last_json_line(r.output), reference = last_json_line(single.output);
  expect_same_run(s, reference);
  EXPECT_EQ(json_number(s, "tensor_parallel"), 2) << s;
  // MLP(784, 256, 10): 203,530 parameters; a rank holds half of fc1 (128 x 785) and half of
  // fc2's columns (10 x 128) plus its whole bias (10): 101,770.
  EXPECT_EQ(json_number(s, "parameter_bytes_unparallel"), 203530 * 4) << s;
  EXPECT_EQ(json_number(s, "parameter_bytes_this_rank"), 101770 * 4) << s;
  // Per step: fc2's forward all-reduce of [64, 10] f32 over 2 ranks, 2 (T-1)/T x 2560 bytes (the
  // input needs no gradient, so fc1's backward all-reduce does not run), and the NaN guard's
  // 8-byte flag.
  EXPECT_EQ(json_number(s, "comm_bytes_per_step"), 2560 + 8) << s;
}

// TorchShard's recipe on 4 ranks: the classifier column-parallel over T = 2, 2 data-parallel
// replicas under DDP or ZeRO-1. --batch-size is per replica, so this is 2-rank DDP's run.
TEST(TrainTensorParallel, ClassParallelHeadTimesDataParallelEndsWhereDdpDoes) {
  // 101 classes: slices of 51 and 50; label smoothing through the class-parallel loss.
  const std::string flags = "--model=mlp --data=synthetic --synthetic-size=1024 --num-classes=101 "
                            "--label-smoothing=0.1 --epochs=1 --threads=1 --seed=3 --batch-size=32 ";
  const auto ddp = run_train(flags + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  for (const char* strategy : {"ddp", "zero1"}) {
    const auto r =
        run_train(flags + "--tensor-parallel=2 --tp-head=true --strategy=" + strategy, 4);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    expect_same_run(s, reference);
    EXPECT_EQ(json_number(s, "world_size"), 4) << s;
    // Rank 0 holds 51 of the 101 classes of a batch's 32 logits rows.
    EXPECT_EQ(json_number(s, "head_logits_bytes_this_rank"), 32 * 51 * 4) << s;
    EXPECT_EQ(json_number(s, "head_logits_bytes_unparallel"), 32 * 101 * 4) << s;
  }
}

// The ResNets' head is class-parallel: ResNet-20 with T = 2 inside 2 replicas ends where 2-rank
// DDP does (4 steps of 32 synthetic images, a test set of 51; lr 0.01 and no augmentation keep
// the comparison out of the chaotic start that amplifies rounding).
TEST(TrainTensorParallel, ResNetHeadTimesDataParallelEndsWhereDdpDoes) {
  const std::string flags = "--model=resnet20 --data=synthetic --synthetic-size=256 "
                            "--batch-size=32 --epochs=1 --threads=1 --seed=3 --lr=0.01 "
                            "--augment=false --strategy=ddp ";
  const auto ddp = run_train(flags);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto r = run_train(flags + "--tensor-parallel=2", 4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string s = last_json_line(r.output);
  expect_same_run(s, last_json_line(ddp.output));
  EXPECT_EQ(json_number(s, "head_logits_bytes_this_rank"), 32 * 5 * 4) << s;
}

// A checkpoint holds the full model and the optimizer's state in the unsplit model's format,
// whichever way it was trained: a second epoch resumed from the tensor-parallel run's
// checkpoint in one process, and from the single-process run's checkpoint with tensor
// parallelism, both end where the single process resumed from its own checkpoint does.
TEST(TrainTensorParallel, CheckpointsMoveBetweenTensorParallelAndOneProcess) {
  const std::string tp_dir = temp_path("tp_ckpt"), single_dir = temp_path("single_ckpt");
  const auto tp = run_train(kShortMlp + "--tensor-parallel=2 --checkpoint-dir=" + tp_dir);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  const auto single = run_train_single(kShortMlp + "--checkpoint-dir=" + single_dir);
  ASSERT_EQ(single.exit_code, 0) << single.output;

  const std::string second_epoch = "--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 ";
  const auto reference = run_train_single(second_epoch + "--resume=" + single_dir);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string expected = last_json_line(reference.output);
  const auto from_tp = run_train_single(second_epoch + "--resume=" + tp_dir);
  ASSERT_EQ(from_tp.exit_code, 0) << from_tp.output;
  EXPECT_NE(from_tp.output.find("epoch 2/2  train_loss"), std::string::npos) << from_tp.output;
  EXPECT_EQ(from_tp.output.find("the optimizer starts fresh"), std::string::npos) << from_tp.output;
  expect_same_run(last_json_line(from_tp.output), expected);
  const auto tp_from_single =
      run_train(second_epoch + "--tensor-parallel=2 --resume=" + single_dir);
  ASSERT_EQ(tp_from_single.exit_code, 0) << tp_from_single.output;
  expect_same_run(last_json_line(tp_from_single.output), expected);
}

// 3D parallelism through the tool: --strategy=pipeline --stages=2 --tensor-parallel=2 on 4 ranks
// (the MLP's fc1 column-parallel on stage 0, fc2 row-parallel on stage 1: the activations
// between the stages travel split) ends where one process does, and its checkpoint, unsplit,
// resumes a second epoch in one process where the single process's own checkpoint does; the
// ResNet's class-parallel head on the last stage ends where tensor parallelism alone does
// (one micro-batch, so BatchNorm sees the same batch).
TEST(TrainTensorParallel, PipelineStagesOfTensorParallelLayersEndWhereOneProcessDoes) {
  const std::string dir = temp_path("pp_tp_ckpt"), single_dir = temp_path("pp_tp_single_ckpt");
  const auto single = run_train_single(kShortMlp + "--checkpoint-dir=" + single_dir);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto three_d = run_train(kShortMlp + "--strategy=pipeline --stages=2 --tensor-parallel=2 "
                                 "--checkpoint-dir=" + dir, 4);
  ASSERT_EQ(three_d.exit_code, 0) << three_d.output;
  const std::string s = last_json_line(three_d.output);
  expect_same_run(s, last_json_line(single.output));
  EXPECT_EQ(json_number(s, "tensor_parallel"), 2) << s;
  EXPECT_NE(json_field(s, "pipeline").find("\"stages\": 2"), std::string::npos) << s;

  const std::string second_epoch = "--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 ";
  const auto reference = run_train_single(second_epoch + "--resume=" + single_dir);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const auto from_3d = run_train_single(second_epoch + "--resume=" + dir);
  ASSERT_EQ(from_3d.exit_code, 0) << from_3d.output;
  EXPECT_EQ(from_3d.output.find("the optimizer starts fresh"), std::string::npos) << from_3d.output;
  expect_same_run(last_json_line(from_3d.output), last_json_line(reference.output));
  // And the other way: the single process's checkpoint resumed in 3D.
  const auto into_3d = run_train(second_epoch + "--strategy=pipeline --stages=2 "
                                 "--tensor-parallel=2 --resume=" + single_dir, 4);
  ASSERT_EQ(into_3d.exit_code, 0) << into_3d.output;
  expect_same_run(last_json_line(into_3d.output), last_json_line(reference.output));
}

TEST(TrainTensorParallel, ResNetClassParallelHeadOnTheLastStageEndsWhereTensorParallelismDoes) {
  // Synthetic data: its test set is 51 images, where Fashion-MNIST's 10,000 would make the
  // ResNet's evaluation most of the test's minute.
  const std::string resnet = "--model=resnet20 --data=synthetic --synthetic-size=256 --epochs=1 "
                             "--threads=1 --seed=3 --batch-size=32 --augment=false --tensor-parallel=2 ";
  const auto tp = run_train(resnet, 2);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  const auto three_d = run_train(resnet + "--strategy=pipeline --stages=2 --micro-batches=1", 4);
  ASSERT_EQ(three_d.exit_code, 0) << three_d.output;
  const std::string s = last_json_line(three_d.output);
  EXPECT_EQ(json_number(s, "head_logits_bytes_this_rank"), 32 * 5 * 4) << s;
  expect_same_run(s, last_json_line(tp.output));
}

// 8 ranks: P = 2 stages x T = 2 x D = 2 replicas under ZeRO-1 end their epoch where 2-rank DDP
// does, and their checkpoint (the optimizer state gathered over the replicas' shards, the
// pipeline and the tensor-parallel group) resumes a second epoch under 2-rank DDP where two
// DDP epochs end.
TEST(TrainTensorParallel, ThreeDimensionsWithZeroReplicasCheckpointIntoDdp) {
  const std::string dir = temp_path("pp_tp_zero1_ckpt");
  const auto ddp = run_train(kShortMlp + "--strategy=ddp", 2);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto three_d = run_train(kShortMlp + "--strategy=pipeline --stages=2 --tensor-parallel=2 "
                                 "--dp-strategy=zero1 --checkpoint-dir=" + dir, 8);
  ASSERT_EQ(three_d.exit_code, 0) << three_d.output;
  expect_same_run(last_json_line(three_d.output), last_json_line(ddp.output));
  const std::string second_epoch = "--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 ";
  const auto straight = run_train(second_epoch + "--strategy=ddp", 2);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto resumed = run_train(second_epoch + "--strategy=ddp --resume=" + dir, 2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("the optimizer starts fresh"), std::string::npos) << resumed.output;
  expect_same_run(last_json_line(resumed.output), last_json_line(straight.output));
}

// --sequence-parallel changes where a GPT's LayerNorms run, not its parameters: a run with it ends
// where the run without it does, and a checkpoint of either resumes a second epoch in the other,
// ending where the uninterrupted run does (the train and validation losses to 1e-5).
TEST(TrainTensorParallel, SequenceParallelismEqualsTensorParallelismAndResumesEitherWay) {
  const std::string gpt =
      "--model=gpt-tiny --data=text --tokenizer=byte --seq-len=16 --train-limit=64 --val-limit=16 "
      "--batch-size=8 --threads=1 --seed=3 --schedule=constant --tensor-parallel=2 ";
  const auto expect_same_losses = [](const std::string& s, const std::string& reference) {
    for (const char* field : {"train_loss", "val_loss"}) {
      EXPECT_NEAR(json_number(s, field), json_number(reference, field), 1e-5) << field << ": " << s;
    }
  };
  const std::string on_dir = temp_path("sp_on_ckpt"), off_dir = temp_path("sp_off_ckpt");
  const auto on = run_train(gpt + "--epochs=1 --sequence-parallel=true --checkpoint-dir=" + on_dir);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  const auto off = run_train(gpt + "--epochs=1 --checkpoint-dir=" + off_dir);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  expect_same_losses(last_json_line(on.output), last_json_line(off.output));

  const auto straight = run_train(gpt + "--epochs=2");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto off_from_on = run_train(gpt + "--epochs=2 --resume=" + on_dir);
  ASSERT_EQ(off_from_on.exit_code, 0) << off_from_on.output;
  EXPECT_NE(off_from_on.output.find("after epoch 1"), std::string::npos) << off_from_on.output;
  expect_same_losses(last_json_line(off_from_on.output), last_json_line(straight.output));
  const auto on_from_off = run_train(gpt + "--epochs=2 --sequence-parallel=true --resume=" + off_dir);
  ASSERT_EQ(on_from_off.exit_code, 0) << on_from_off.output;
  expect_same_losses(last_json_line(on_from_off.output), last_json_line(straight.output));
}

TEST(TrainTensorParallel, FlagsThatCannotWorkExitWithTwo) {
  struct Case {
    const char* flags;
    int ranks;
    const char* says;
  };
  for (const Case& c : {
           Case{"--tensor-parallel=3", 2, "--tensor-parallel=3 does not divide the 2 ranks"},
           Case{"--tensor-parallel=2", 4,
                "makes 2 data-parallel replicas: choose --strategy=ddp or zero1"},
           Case{"--tensor-parallel=2 --strategy=zero3", 2,
                "--tensor-parallel=2 with --strategy=zero3: tensor parallelism combines with "
                "--strategy=ddp or zero1"},
           Case{"--tensor-parallel=2 --strategy=pipeline --stages=3", 4,
                "--stages=3 x --tensor-parallel=2 does not divide the 4 ranks"},
           Case{"--tensor-parallel=2 --strategy=pipeline --stages=2 --balance=time", 4,
                "--balance=time with --tensor-parallel"},
           Case{"--tp-head=true", 2, "--tp-head needs --tensor-parallel of 2 or more"},
           Case{"--num-classes=100", 2, "--num-classes is for --data=synthetic"},
           Case{"--model=logistic --tensor-parallel=2 --tp-head=false", 2,
                "--tp-head=false: --model=logistic has no other layer to split"},
           Case{"--sequence-parallel=true", 2,
                "--sequence-parallel=true with --tensor-parallel=1: sequence parallelism splits"},
           Case{"--tensor-parallel=2 --sequence-parallel=true", 2,
                "--sequence-parallel=true with --tensor-parallel=2 and --model=mlp: sequence "
                "parallelism splits a transformer's tokens"},
           Case{"--model=gpt-tiny --data=text --tokenizer=byte --seq-len=15 --tensor-parallel=2 "
                "--sequence-parallel=true", 2,
                "--sequence-parallel with --tensor-parallel=2: --seq-len=15 does not divide by 2"},
           Case{"--model=logistic --data=synthetic --num-classes=3 --tensor-parallel=4", 4,
                "--tensor-parallel=4 splits the classifier by class, but there are only 3 classes"},
       }) {
    const std::string model = std::string(c.flags).find("--model") == std::string::npos ? "--model=mlp " : "";
    const auto r = run_train(model + "--threads=1 " + std::string(c.flags), c.ranks);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
  }
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
