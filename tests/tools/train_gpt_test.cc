// The train tool on a GPT (--model=gpt-tiny on the fortunes corpus, one token per byte): it
// learns (the loss falls), reports validation loss and perplexity (their exp) and tokens per
// second and no accuracy, DDP on 2 ranks ends where one process on the 2-times batch does, a
// 2-stage pipeline where one process on the same batches does,
// clipping under ZeRO-1 where it does under DDP, --sample prints the tokens it generates, and
// flags that do not fit a GPT end with exit code 2 naming them. Short runs (gpt-tiny, windows of
// 32 bytes, a few hundred windows).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/tools/train_runner.h"

namespace tessera {
namespace testing {
namespace {

const std::string kTinyGpt =
    "--model=gpt-tiny --tokenizer=byte --seq-len=32 --val-limit=64 --threads=1 --seed=3 ";

// The largest |a - b| - tol |b| over every tensor of two saved models ("" names none bad).
std::string compare_models(const std::string& a_file, const std::string& b_file, double tol) {
  const StateDict a = load_safetensors(a_file).tensors;
  const StateDict b = load_safetensors(b_file).tensors;
  if (a.size() != b.size()) return "the models hold different tensors";
  for (const auto& [name, t] : b) {
    if (!a.contains(name)) return "no tensor '" + name + "'";
    const Tensor x = a.at(name).to(kF64).contiguous(), y = t.to(kF64).contiguous();
    for (int64_t k = 0; k < y.numel(); ++k) {
      const double u = x.data<double>()[k], v = y.data<double>()[k];
      if (std::abs(u - v) > tol + tol * std::abs(v)) {
        return "'" + name + "'[" + std::to_string(k) + "] is " + std::to_string(u) +
               ", expected " + std::to_string(v);
      }
    }
  }
  return "";
}

TEST(TrainGpt, OneProcessLearnsAndReportsPerplexity) {
  const auto r = run_train_single(kTinyGpt + "--train-limit=512 --epochs=2 --eval-every=8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string s = last_json_line(r.output);
  const double val_loss = json_number(s, "val_loss");
  EXPECT_NEAR(json_number(s, "val_perplexity"), std::exp(val_loss), 1e-4 * std::exp(val_loss)) << s;
  EXPECT_GT(json_number(s, "tokens_per_second"), 0) << s;
  EXPECT_EQ(s.find("accuracy"), std::string::npos) << s;
  EXPECT_EQ(s.find("images_per_second"), std::string::npos) << s;
  // ln 256 = 5.55 at random initialization; two epochs of bytes bring it well below.
  EXPECT_LT(val_loss, 5.0) << r.output;
  EXPECT_LT(json_number(s, "train_loss"), 5.3) << r.output;
  // --eval-every=8: 16 steps an epoch, so steps 8, 16, 24 and 32 print a validation loss.
  for (const char* step : {"step 8  val_loss", "step 32  val_loss"}) {
    EXPECT_NE(r.output.find(step), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("tok/s"), std::string::npos) << r.output;
}

// One process on batches of 32 windows and 2 DDP ranks on 16 each: the same averaged gradient,
// the same AdamW steps on the GPT's two weight-decay groups.
TEST(TrainGpt, DdpOnTwoRanksEqualsOneProcessOnTwiceTheBatch) {
  const std::string one = temp_path("gpt_one.safetensors"), two = temp_path("gpt_ddp.safetensors");
  const auto single = run_train_single(kTinyGpt + "--train-limit=256 --epochs=2 --batch-size=32 "
                                       "--save-model=" + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ddp = run_train(kTinyGpt + "--train-limit=256 --epochs=2 --batch-size=16 "
                             "--strategy=ddp --save-model=" + two);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_EQ(compare_models(two, one, 1e-5), "");
  EXPECT_NEAR(json_number(last_json_line(ddp.output), "val_loss"),
              json_number(last_json_line(single.output), "val_loss"), 1e-5);
}

// GPT-2's recipe under ZeRO: AdamW decaying the Linear weights only (--weight-decay defaults to
// 0.1 for a GPT), ZeRO-1/2/3 cutting their shards by the two groups, ZeRO-3 keeping the tied
// token embedding in its root unit; each ends where DDP does.
TEST(TrainGpt, ZeroStagesWithTheDecayGroupsEqualDdp) {
  const std::string flags = kTinyGpt + "--train-limit=256 --epochs=1 --batch-size=16 --save-model=";
  const std::string ddp_file = temp_path("gpt_groups_ddp.safetensors");
  const auto ddp = run_train(flags + ddp_file + " --strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const char* strategy : {"zero1", "zero2", "zero3"}) {
    const std::string file = temp_path(std::string("gpt_groups_") + strategy + ".safetensors");
    const auto zero = run_train(flags + file + " --strategy=" + strategy);
    ASSERT_EQ(zero.exit_code, 0) << zero.output;
    EXPECT_EQ(compare_models(file, ddp_file, 1e-5), "") << strategy;
    // The whole model's parameters, though ZeRO-3 has released them: gpt-tiny with the byte
    // tokenizer has 35,712 (models::GPTConfig::parameters).
    EXPECT_EQ(json_number(last_json_line(zero.output), "parameters"), 35712) << strategy;
  }
}

// The pipeline on 2 ranks (embed and h0 | h1, ln_f and lm_head, the token embedding's weight
// kept by both and its gradient summed) against one process on the same batches: AdamW's two
// decay groups, clipping that counts the tied weight once, a zero-bubble schedule.
TEST(TrainGpt, PipelineOnTwoRanksEqualsOneProcess) {
  const std::string flags = kTinyGpt + "--train-limit=256 --epochs=2 --clip-grad-norm=0.05 ";
  const std::string one = temp_path("gpt_one_clip.safetensors");
  const std::string two = temp_path("gpt_pipeline.safetensors");
  const auto single = run_train_single(flags + "--save-model=" + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto pipeline = run_train(flags + "--strategy=pipeline --pipeline-schedule=zb-h1 "
                                  "--save-model=" + two);
  ASSERT_EQ(pipeline.exit_code, 0) << pipeline.output;
  EXPECT_EQ(compare_models(two, one, 1e-5), "");
  EXPECT_NEAR(json_number(last_json_line(pipeline.output), "val_loss"),
              json_number(last_json_line(single.output), "val_loss"), 1e-5);
}

// 4 ranks as 2 stages x 2 replicas whose ZeRO-1 or ZeRO-2 optimizer cuts each stage's shard by
// AdamW's two groups (decay on the Linear weights only): the same model as 2-rank DDP on the same
// global batch; a checkpoint after the first epoch resumes to the uninterrupted run exactly, and
// into one process on the whole batch. Decay applied to every parameter alike would move the
// LayerNorm weights by about lr x 0.1 x 32 steps = 2e-3 and show.
TEST(TrainGpt, PipelineReplicasWithZeroAndDecayGroupsEqualDdpAndResume) {
  const std::string flags = kTinyGpt + "--train-limit=256 --batch-size=8 ";
  const std::string ddp_model = temp_path("gpt_ddp_decay.safetensors");
  const auto ddp = run_train(flags + "--epochs=2 --strategy=ddp --save-model=" + ddp_model);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string pipeline = flags + "--strategy=pipeline --stages=2 --dp-strategy=";
  for (const std::string dp : {"zero1", "zero2"}) {
    SCOPED_TRACE(dp);
    const std::string whole = temp_path("gpt_pipe_" + dp + ".safetensors");
    const auto run = run_train(pipeline + dp + " --epochs=2 --save-model=" + whole, 4);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(compare_models(whole, ddp_model, 1e-5), "");

    const std::string dir = temp_path("gpt_pipe_ckpt_" + dp);
    const auto first = run_train(pipeline + dp + " --epochs=1 --checkpoint-dir=" + dir, 4);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string resumed = temp_path("gpt_pipe_resumed_" + dp + ".safetensors");
    const auto second =
        run_train(pipeline + dp + " --epochs=2 --resume=" + dir + " --save-model=" + resumed, 4);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_EQ(compare_models(resumed, whole, 0.0), "");
    const std::string single = temp_path("gpt_pipe_to_single_" + dp + ".safetensors");
    const auto one = run_train_single(kTinyGpt + "--train-limit=256 --batch-size=16 --epochs=2 "
                                      "--resume=" + dir + " --save-model=" + single);
    ASSERT_EQ(one.exit_code, 0) << one.output;
    EXPECT_EQ(compare_models(single, whole, 1e-5), "");
  }
}

// ZeRO-2 replicas of a 2-stage pipeline under ZB-H1 and ZB-H2: each stage holds a micro-batch's
// B gradients (LayerNorms', the embeddings') for its W, so ZeRO-2 reduces each W's whole set
// once, as 1F1B's backward gives it: the same model bit for bit, and 2-rank DDP's within 1e-5.
// Before, the combination was refused (ZeRO-2 saw a second gradient in one reduction).
TEST(TrainGpt, PipelineZeroTwoUnderZeroBubbleSchedulesEqualsOneFOneB) {
  const std::string flags = kTinyGpt + "--train-limit=256 --batch-size=8 --epochs=1 ";
  const std::string ddp_model = temp_path("gpt_zb_ddp.safetensors");
  const auto ddp = run_train(flags + "--strategy=ddp --save-model=" + ddp_model);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string pipeline = flags + "--strategy=pipeline --stages=2 --dp-strategy=zero2 ";
  const std::string one_f_one_b = temp_path("gpt_zb_1f1b_zero2.safetensors");
  const auto reference = run_train(pipeline + "--pipeline-schedule=1f1b --save-model=" + one_f_one_b, 4);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  for (const std::string schedule : {"zb-h1", "zb-h2"}) {
    const std::string file = temp_path("gpt_" + schedule + "_zero2.safetensors");
    const auto run = run_train(pipeline + "--pipeline-schedule=" + schedule + " --save-model=" + file, 4);
    ASSERT_EQ(run.exit_code, 0) << schedule << "\n" << run.output;
    EXPECT_EQ(compare_models(file, one_f_one_b, 0.0), "") << schedule;
    EXPECT_EQ(compare_models(file, ddp_model, 1e-5), "") << schedule;
  }
}

// --clip-grad-norm through each strategy's layout: ZeRO-1 clips its reduced shard by the norm
// summed over the shards, and ends where DDP's clip of the whole averaged gradient does; a
// threshold this small clips every step, so a clip of nothing would show.
TEST(TrainGpt, ClippingUnderZeroEqualsClippingUnderDdp) {
  const std::string flags = kTinyGpt + "--train-limit=256 --epochs=1 --weight-decay=0 "
                            "--clip-grad-norm=0.05 --save-model=";
  const std::string ddp_file = temp_path("gpt_clip_ddp.safetensors");
  const std::string zero_file = temp_path("gpt_clip_zero1.safetensors");
  const std::string plain_file = temp_path("gpt_noclip_ddp.safetensors");
  const auto ddp = run_train(flags + ddp_file + " --strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto zero = run_train(flags + zero_file + " --strategy=zero1");
  ASSERT_EQ(zero.exit_code, 0) << zero.output;
  EXPECT_EQ(compare_models(zero_file, ddp_file, 1e-5), "");
  const auto plain = run_train(kTinyGpt + "--train-limit=256 --epochs=1 --weight-decay=0 "
                               "--strategy=ddp --save-model=" + plain_file);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(compare_models(plain_file, ddp_file, 1e-5), "") << "clipping changed nothing";
}

// --tensor-parallel=2 on 2 ranks: Megatron's blocks and vocabulary (each rank 128 of wte's 256
// rows and 128 logits a position; the loss and the validation loss vocabulary-parallel; --sample
// gathers the last position's logits) end where one process does: the saved model, the
// validation loss, the sampled text.
TEST(TrainGpt, TensorParallelEqualsOneProcess) {
  const std::string one = temp_path("gpt_tp_one.safetensors"), two = temp_path("gpt_tp_two.safetensors");
  const std::string flags = kTinyGpt + "--train-limit=256 --epochs=1 --sample=20 --save-model=";
  const auto single = run_train_single(flags + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto tp = run_train(flags + two + " --tensor-parallel=2");
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  EXPECT_EQ(compare_models(two, one, 1e-5), "");
  const std::string s = last_json_line(tp.output), reference = last_json_line(single.output);
  EXPECT_NEAR(json_number(s, "val_loss"), json_number(reference, "val_loss"), 1e-5);
  EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-5);
  // 35,712 parameters; a rank holds half of wte (256 x 32) and half of each block's split
  // Linears (c_attn, attn.c_proj's weight, c_fc, mlp.c_proj's weight: 12,512 a block).
  EXPECT_EQ(json_number(s, "parameter_bytes_unparallel"), 35712 * 4) << s;
  EXPECT_EQ(json_number(s, "parameter_bytes_this_rank"), (35712 - 8192 / 2 - 2 * 12512 / 2) * 4) << s;
  EXPECT_EQ(2 * json_number(s, "head_logits_bytes_this_rank"),
            json_number(s, "head_logits_bytes_unparallel")) << s;
  const size_t at = single.output.find("sample (20 tokens"), tp_at = tp.output.find("sample (20 tokens");
  ASSERT_NE(at, std::string::npos) << single.output;
  ASSERT_NE(tp_at, std::string::npos) << tp.output;
  EXPECT_EQ(tp.output.substr(tp_at, 80), single.output.substr(at, 80));
}

// A tensor-parallel checkpoint holds the plain GPT (wte's rows gathered) and AdamW's state in its
// format (wte's moments gathered too): a second epoch resumed from it in one process, and from
// the single process's checkpoint under --tensor-parallel=2, both end where the single process
// resumed from its own does.
TEST(TrainGpt, TensorParallelCheckpointsResumeInOneProcessAndBack) {
  const std::string tp_dir = temp_path("gpt_tp_ckpt"), single_dir = temp_path("gpt_single_ckpt");
  const std::string first = kTinyGpt + "--train-limit=256 --epochs=1 --checkpoint-dir=";
  const auto tp = run_train(first + tp_dir + " --tensor-parallel=2");
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  const auto single = run_train_single(first + single_dir);
  ASSERT_EQ(single.exit_code, 0) << single.output;

  const std::string second = kTinyGpt + "--train-limit=256 --epochs=2 --save-model=";
  const std::string want = temp_path("gpt_resumed.safetensors");
  const auto reference = run_train_single(second + want + " --resume=" + single_dir);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string from_tp_file = temp_path("gpt_resumed_from_tp.safetensors");
  const auto from_tp = run_train_single(second + from_tp_file + " --resume=" + tp_dir);
  ASSERT_EQ(from_tp.exit_code, 0) << from_tp.output;
  EXPECT_NE(from_tp.output.find("epoch 2/2  train_loss"), std::string::npos) << from_tp.output;
  EXPECT_EQ(from_tp.output.find("the optimizer starts fresh"), std::string::npos) << from_tp.output;
  EXPECT_EQ(compare_models(from_tp_file, want, 1e-5), "");
  const std::string into_tp_file = temp_path("gpt_resumed_into_tp.safetensors");
  const auto into_tp = run_train(second + into_tp_file + " --tensor-parallel=2 --resume=" + single_dir);
  ASSERT_EQ(into_tp.exit_code, 0) << into_tp.output;
  EXPECT_EQ(compare_models(into_tp_file, want, 1e-5), "");
}

// With one token per byte, the N generated tokens are N bytes, printed between brackets after
// the prompt, just before the JSON line (the bytes themselves may hold brackets: counted back
// from the end).
TEST(TrainGpt, SamplePrintsTheTokensItGenerates) {
  const auto r = run_train_single(kTinyGpt + "--train-limit=128 --sample=30");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("sample (30 tokens after a prompt of 16");
  ASSERT_NE(at, std::string::npos) << r.output;
  const size_t close = r.output.rfind("]\n{");
  ASSERT_NE(close, std::string::npos) << r.output;
  ASSERT_GT(close, at + 31);
  EXPECT_EQ(r.output[close - 31], '[') << r.output;
  // The same seed, the same sample (the lines before it hold timings).
  const auto again = run_train_single(kTinyGpt + "--train-limit=128 --sample=30");
  const size_t again_at = again.output.find("sample (30 tokens");
  ASSERT_NE(again_at, std::string::npos) << again.output;
  EXPECT_EQ(again.output.substr(again_at, close - at), r.output.substr(at, close - at));
}

TEST(TrainGpt, FlagsThatDoNotFitEndWithCodeTwoNamingThem) {
  struct Case {
    std::string flags, named;
  };
  for (const Case& c : {Case{"--model=gpt-tiny --seq-len=65", "--seq-len=65"},
                        Case{"--model=gpt-nano --seq-len=300", "context of 256"},
                        Case{"--model=gpt2 --data=fashion-mnist", "--data=fashion-mnist"},
                        Case{"--model=mlp --tokenizer=byte", "--tokenizer"},
                        Case{"--model=mlp --data=text", "--data=text"},
                        Case{"--model=gpt-tiny --label-smoothing=0.1", "--label-smoothing"},
                        Case{"--model=gpt-tiny --data=text:", "--data=text:FILE"},
                        Case{"--model=gpt-nano --tensor-parallel=3",
                             "--tensor-parallel=3 does not divide --model=gpt-nano's 4 attention heads"},
                        Case{"--model=gpt-tiny --tensor-parallel=2 --tp-head=true",
                             "--tp-head is for the MLP and the image models' classifiers"},
                        Case{"--model=mlp --recompute=full", "--recompute is for the language"},
                        Case{"--model=gpt-tiny --recompute-modules=gelu",
                             "--recompute-modules=gelu chooses --recompute=selective's ops; this "
                             "run has --recompute=none"},
                        Case{"--model=gpt-tiny --recompute=selective --recompute-modules=gelu,mlp",
                             "module 'mlp' in 'gelu,mlp' is not core_attn, layernorm or gelu"},
                        Case{"--model=gpt-tiny --seq-len=16 --tensor-parallel=2 "
                             "--context-parallel=2 --context-parallel-algorithm=ulysses",
                             "2 heads / --tensor-parallel=2 = 1 do not divide by "
                             "--context-parallel=2"},
                        Case{"--model=gpt-tiny --context-parallel-algorithm=ulysses",
                             "--context-parallel-algorithm needs --context-parallel of 2"},
                        Case{"--model=gpt-tiny --n-embd=30 --n-head=4",
                             "a GPT's width (30, --n-embd) does not divide into its 4 heads"},
                        Case{"--model=mlp --n-head=4", "--n-head is a GPT's"}}) {
    const auto r = run_train_single(c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.flags << "\n" << r.output;
  }
  // The layout against the world's ranks, before any rank trains.
  for (const Case& c : {Case{"--model=gpt-tiny --seq-len=16 --tensor-parallel=2 "
                             "--context-parallel=2",
                             "--tensor-parallel=2 x --context-parallel=2 = 4 does not divide "
                             "the 2 ranks"}}) {
    const auto r = run_train(c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.flags << "\n" << r.output;
  }
}

// Asynchronous SGD with GPT-2's AdamW groups (--weight-decay defaults to 0.1 for a GPT): each
// server cuts its shard where the group changes, as ZeRO does. With one worker (2 ranks: a
// server and a worker; 3: two servers, one shard cut inside a group) every push is one AdamW
// step of one process's: the model ends where one process's does. A checkpoint after the first
// epoch resumes to the uninterrupted run bit for bit, and carries AdamW's state numbered as one
// process numbers it (the decay group first): one process resumes from the servers' checkpoint,
// and the servers from one process's, each ending where one process's uninterrupted run does.
// Before, the combination was refused (the servers stepped their shards with one set of options).
TEST(TrainGpt, AsyncWithDecayGroupsEqualsOneProcessAndResumesEitherWay) {
  const std::string flags = kTinyGpt + "--train-limit=256 --batch-size=16 ";
  const std::string one = temp_path("gpt_async_one.safetensors");
  const auto single = run_train_single(flags + "--epochs=2 --save-model=" + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string single_dir = temp_path("gpt_async_single_ckpt");
  const auto single_half = run_train_single(flags + "--epochs=1 --checkpoint-dir=" + single_dir);
  ASSERT_EQ(single_half.exit_code, 0) << single_half.output;
  for (int ranks : {2, 3}) {
    const std::string n = std::to_string(ranks);
    SCOPED_TRACE(n + " ranks");
    const std::string async = flags + "--strategy=async --servers=" + std::to_string(ranks - 1) + " ";
    const std::string whole = temp_path("gpt_async_whole_" + n + ".safetensors");
    const auto run = run_train(async + "--epochs=2 --save-model=" + whole, ranks);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(compare_models(whole, one, 1e-6), "");
    const std::string dir = temp_path("gpt_async_ckpt_" + n);
    const auto first = run_train(async + "--epochs=1 --checkpoint-dir=" + dir, ranks);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string resumed = temp_path("gpt_async_resumed_" + n + ".safetensors");
    const auto second =
        run_train(async + "--epochs=2 --resume=" + dir + " --save-model=" + resumed, ranks);
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_EQ(second.output.find("starts fresh"), std::string::npos) << second.output;
    EXPECT_EQ(compare_models(resumed, whole, 0.0), "");
    const std::string to_single = temp_path("gpt_async_to_single_" + n + ".safetensors");
    const auto one_more =
        run_train_single(flags + "--epochs=2 --resume=" + dir + " --save-model=" + to_single);
    ASSERT_EQ(one_more.exit_code, 0) << one_more.output;
    EXPECT_EQ(one_more.output.find("starts fresh"), std::string::npos) << one_more.output;
    EXPECT_EQ(compare_models(to_single, one, 1e-6), "");
    const std::string from_single = temp_path("gpt_async_from_single_" + n + ".safetensors");
    const auto back = run_train(
        async + "--epochs=2 --resume=" + single_dir + " --save-model=" + from_single, ranks);
    ASSERT_EQ(back.exit_code, 0) << back.output;
    EXPECT_EQ(back.output.find("starts fresh"), std::string::npos) << back.output;
    EXPECT_EQ(compare_models(from_single, one, 1e-6), "");
  }
}

// A text file of the user's: its last tenth validates.
TEST(TrainGpt, TrainsOnATextFileOfOnesOwn) {
  const std::string file = temp_path("gpt_text.txt");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + ": the quick brown fox\n";
  run_command("printf '%s' '" + text + "' > " + file);
  const auto r = run_train_single(kTinyGpt + "--data=text:" + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(file), std::string::npos) << r.output;
  EXPECT_GT(json_number(last_json_line(r.output), "val_perplexity"), 1.0) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace tessera

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
