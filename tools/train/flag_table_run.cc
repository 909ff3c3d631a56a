// The flag table's rows for the run itself: the model and data, the optimization, checkpoints
// and outputs, and mixed precision (flag_table.h says what a row holds).
#include "dist/trace_recorder.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tools/train/flag_table.h"

namespace tessera {
namespace train {

namespace {

const char* const kModels = "the model's";

std::string on_off(bool on) { return on ? "on" : "off"; }

// cpu, cuda or cuda:N; a CUDA device's number is checked when the run starts.
FlagValue device() {
  return {"cpu|cuda|cuda:N",
          [](Config& c, const std::string&, const std::string& v) {
            if (v != "cpu" && v != "cuda" && v.rfind("cuda:", 0) != 0) {
              bad("--device must be cpu, cuda or cuda:N, got '" + v + "'");
            }
            try {
              Device::parse(v);
            } catch (const std::exception& e) {
              bad("--device: " + std::string(e.what()));
            }
            c.device = v;
          },
          [](const Config& c) { return c.device; }};
}

// The learning-rate schedule; a pipeline schedule's name here is a mix-up worth naming.
FlagValue lr_schedule() {
  FlagValue value = choice(&Config::schedule, {"constant", "step", "cosine"});
  value.set = [set = value.set](Config& c, const std::string& flag, const std::string& v) {
    if (v == "gpipe" || v == "1f1b" || v == "interleaved") {
      bad("--schedule is the learning-rate schedule (constant|step|cosine); the pipeline's is "
          "--pipeline-schedule=" + v);
    }
    set(c, flag, v);
  };
  return value;
}

// "dynamic" (0) or a static scale >= 1.
FlagValue loss_scale() {
  return {"dynamic|N",
          [](Config& c, const std::string& flag, const std::string& v) {
            if (v == "dynamic") {
              c.loss_scale = 0;
              return;
            }
            c.loss_scale = to_double(flag, v, 0);
            if (c.loss_scale < 1) {
              bad("--loss-scale expects dynamic or a number >= 1, got '" + v + "'");
            }
          },
          [](const Config& c) { return exact(c.loss_scale); }};
}

// fashion-mnist, synthetic, or text with an optional file: "text:/path/book.txt".
FlagValue data_source() {
  return {"fashion-mnist|synthetic|text[:FILE]",
          [](Config& c, const std::string& flag, const std::string& v) {
            if (v.rfind("text:", 0) == 0) {
              if (v.size() == 5) bad("--data=text:FILE needs a file name after 'text:'");
              c.data = "text";
              c.text_file = v.substr(5);
              return;
            }
            c.data = one_of(flag, v, {"fashion-mnist", "synthetic", "text"});
            c.text_file.clear();
          },
          [](const Config& c) { return c.text_file.empty() ? c.data : c.data + ":" + c.text_file; }};
}

}  // namespace

std::vector<FlagSection> run_flag_sections() {
  return {
      {"the run",
       {
           Flag("model", choice(&Config::model, {"logistic", "mlp", "resnet20", "resnet32",
                                                 "resnet56", "resnet18", "resnet34", "resnet50",
                                                 "gpt-tiny", "gpt-nano", "gpt2"}),
                "the network to train; gpt-*: GPT-2 language models on --data=text (gpt-nano: 4 "
                "layers, 4 heads, 128 wide; gpt2: 124M; gpt-tiny: 2 layers, 2 heads, 32 wide, for "
                "tests)"),
           Flag("strategy", choice(&Config::strategy, {"single", "ddp", "zero1", "zero2", "zero3",
                                                       "pipeline", "gossip", "local-sgd", "async"}),
                "how the ranks of mpirun -np N share the work: one process, DDP, ZeRO stage 1, 2 "
                "or 3, a pipeline, gossip (decentralized SGD), local SGD or asynchronous SGD"),
           Flag("data", data_source(),
                "the training and test images, or for a GPT text: the fortunes corpus (installed "
                "by tools/setup.sh), or text:FILE, a plain text file whose last tenth validates")
               .default_is("fashion-mnist; text for a GPT"),
           Flag("data-dir", text(&Config::data_dir, "DIR"), "where Fashion-MNIST's files are")
               .per_rank(),
           Flag("train-limit", integer(&Config::train_limit, 1),
                "use only the first N training images (a GPT's: windows of --seq-len tokens)")
               .default_is("all"),
           Flag("tokenizer", choice(&Config::tokenizer, {"gpt2", "byte"}),
                "a GPT's tokens: GPT-2's byte-level BPE (50,257 ids) or one token per byte (256)"),
           Flag("seq-len", integer(&Config::seq_len, 1),
                "a GPT's window of T tokens (at most the model's context: gpt-tiny 64, gpt-nano "
                "256, gpt2 1024, or --context)")
               .default_is("64"),
           Flag("context", integer(&Config::context, 1),
                "a GPT's positions (wpe's rows), for windows longer than the model's context")
               .default_is("the model's"),
           Flag("n-layer", integer(&Config::n_layer, 1), "a GPT's blocks, over --model's")
               .default_is("the model's"),
           Flag("n-head", integer(&Config::n_head, 1),
                "a GPT's attention heads, over --model's (they must divide its width)")
               .default_is("the model's"),
           Flag("n-embd", integer(&Config::n_embd, 1), "a GPT's width, over --model's")
               .default_is("the model's"),
           Flag("recompute", choice(&Config::recompute, {"none", "selective", "full"}),
                "a GPT's activation recomputation (Korthikanti et al. 2022): selective "
                "recomputes --recompute-modules' outputs in backward and keeps the GEMMs', full "
                "keeps only each block's input and runs the block again"),
           Flag("recompute-modules", text(&Config::recompute_modules, "LIST"),
                "--recompute=selective's ops, any of core_attn (the attention core), layernorm, "
                "gelu, comma-separated"),
           Flag("val-limit", integer(&Config::val_limit, 0),
                "a GPT's validation loss over the first N validation windows (0: all of them)"),
           Flag("eval-every", integer(&Config::eval_every, 0),
                "a GPT's validation loss every N optimizer steps too, besides each epoch's end "
                "(0: at epoch ends only)")
               .only_with({"single", "ddp", "zero1", "zero2", "zero3", "pipeline", "local-sgd",
                           "gossip"},
                          "evaluates between steps, which asynchronous SGD's ranks do not share"),
           Flag("sample", integer(&Config::sample, 0),
                "after training, rank 0 prints N tokens the GPT generates after the start of the "
                "validation text (top-k sampling, k = 40, temperature 1, seeded by --seed)"),
           Flag("synthetic-size", integer(&Config::synthetic_size, 1),
                "training images of --data=synthetic"),
           Flag("device", device(),
                "cuda: rank r uses GPU r mod the number of GPUs (built with --config=cuda)")
               .agreed_as("device type",
                          [](const Config& c) { return c.device.substr(0, c.device.find(':')); }),
           Flag("threads", integer(&Config::threads, 1), "this rank's CPU threads")
               .per_rank()
               .default_is("$TESSERA_NUM_THREADS, else every core"),
           Flag("seed", integer(&Config::seed, 0),
                "the initial weights, the data order and the augmentation"),
       }},
      {"optimization (the defaults depend on --model: see 'defaults' at the end)",
       {
           Flag("epochs", integer(&Config::epochs, 1), "passes over the training set")
               .default_is(kModels),
           Flag("batch-size", integer(&Config::batch_size, 1),
                "images per step on each rank; for --strategy=pipeline per data-parallel replica "
                "(all stages of a pipeline share each batch)")
               .default_is(kModels),
           Flag("lr", positive(&Config::lr), "the learning rate").default_is(kModels),
           Flag("optimizer", choice(&Config::optimizer, {"sgd", "adam", "adamw"}),
                "sgd: Nesterov momentum when --momentum > 0")
               .default_is(kModels),
           Flag("momentum", number(&Config::momentum, 0), "SGD's momentum"),
           Flag("weight-decay", number(&Config::weight_decay, 0),
                "L2 (sgd, adam) or decoupled (adamw); a given 0 wins over the model's default; a "
                "GPT decays its Linear weights only (not biases, LayerNorms or embeddings)")
               .default_is(kModels),
           Flag("clip-grad-norm", number(&Config::clip_grad_norm, 0),
                "scales the gradients so that their global 2-norm (over every rank's shards, "
                "slices and stages) is at most X before each step (0: off)"),
           Flag("schedule", lr_schedule(), "the learning rate over the epochs")
               .default_is("cosine"),
           Flag("warmup-epochs", integer(&Config::warmup_epochs, 0),
                "epochs of linear warm-up, fewer than --epochs"),
           Flag("label-smoothing", number(&Config::label_smoothing, 0, 1),
                "cross-entropy against (1 - X) one-hot + X uniform"),
           Flag("augment", boolean(&Config::augment), "random crop + flip of the training images")
               .default_is("true for ResNets, else false"),
       }},
      {"checkpoints, metrics and traces",
       {
           Flag("checkpoint-dir", path(&Config::checkpoint_dir, "DIR", "a directory"),
                "saves the run after every epoch, each time into a new DIR/step-NNNNNNNN/ that "
                "counts once its last file (the checkpoint, or the sharded index) is on disk; "
                "every tensor carries a crc32; the two newest are kept")
               .agreed_as("checkpointing",
                          [](const Config& c) { return on_off(!c.checkpoint_dir.empty()); }),
           Flag("checkpoint-format", choice(&Config::checkpoint_format, {"full", "sharded"}),
                "full: rank 0 writes the whole model and optimizer state; sharded (zero1|zero2|"
                "zero3 without --tensor-parallel): every rank its shard in parallel, and rank 0 "
                "the index once all are on disk; single, ddp and ZeRO runs on any number of ranks "
                "resume it"),
           Flag("resume", path(&Config::resume, "FILE|DIR", "a checkpoint file or directory"),
                "continues from a checkpoint, its hashes checked: a file or one checkpoint's "
                "directory (an error if corrupt), or a run's --checkpoint-dir: its newest "
                "committed checkpoint, the next older when that one is corrupt (then "
                "DIR/last.safetensors, DIR/last-sharded of earlier versions)"),
           Flag("save-model", path(&Config::save_model, "FILE", "a file name"),
                "rank 0 writes the trained model's weights (safetensors, the unsharded model's "
                "names, gathered from every strategy's shards, stages and slices) when training "
                "ends")
               .per_rank(),
           Flag("metrics", path(&Config::metrics, "FILE", "a file name"),
                "rank 0 appends JSON lines: one per step (loss, lr, images/s, loss scale) and one "
                "per epoch with test accuracy; explain curves draws them")
               .per_rank(),
           Flag("trace", path(&Config::trace, "FILE", "a file name"),
                "a Chrome trace, every rank's events in one file written by rank 0: per rank a "
                "compute track and one per communication thread; DDP's layers and buckets, ZeRO's "
                "gathers, frees and reduce-scatters, pipeline actions; explain ddp|zero3 read it")
               .agreed_as("tracing", [](const Config& c) { return on_off(!c.trace.empty()); }),
           Flag("report",
                parsed(&Config::report, "FILE.html",
                       [](const std::string& v) {
                         TS_CHECK(v.size() > 5 && v.compare(v.size() - 5, 5, ".html") == 0,
                                  "--report=", v, ": expected a file name ending in .html");
                       }),
                "rank 0 writes one self-contained page when the run ends (explain report's): the "
                "loss and accuracy curves, the last step's timeline of every rank, memory per "
                "rank beside the formula, bytes per collective, the flags; --metrics and --trace "
                "go to temporary files when not given")
               .agreed_as("report", [](const Config& c) { return on_off(!c.report.empty()); }),
           Flag("trace-steps",
                parsed(&Config::trace_steps, "FIRST:LAST|STEP|last",
                       [](const std::string& v) { dist::trace::TraceSteps::parse(v); }),
                "the optimizer steps --trace records, counted from 1"),
       }},
      {"mixed precision",
       {
           Flag("amp", choice(&Config::amp, {"off", "fp16", "bf16"}),
                "autocast for forward and loss; fp16 scales the loss, bf16 does not"),
           Flag("param-dtype", choice(&Config::param_dtype, {"f32", "f16", "bf16"}),
                "the model's parameters and gradients; the optimizer keeps f32 masters, BatchNorm "
                "stays f32, f16 parameters are loss-scaled"),
           Flag("memory-format", choice(&Config::memory_format, {"contiguous", "channels-last",
                                                                  "channels-blocked"}),
                "channels-last: convolutions that can (f32 on the CPU, and bf16 on oneDNN) read "
                "and write NHWC activations, and batch norm and pooling keep them (PyTorch's "
                "channels_last); bf16 on CPUs with AMX runs so either way "
                "(TESSERA_PREFERRED_LAYOUT=off keeps contiguous); channels-blocked: the same "
                "with oneDNN's nChw16c (f32 on the CPU), the layout its convolution kernels "
                "compute in"),
           Flag("loss-scale", loss_scale(), "fp16 only; N: a static scale").default_is("dynamic"),
           Flag("loss-scale-window", integer(&Config::loss_scale_window, 1),
                "clean steps before the scale doubles"),
           Flag("loss-scale-hysteresis", integer(&Config::loss_scale_hysteresis, 1),
                "overflows in a row before it halves"),
           Flag("min-loss-scale", number(&Config::min_loss_scale, 0),
                "the scale never drops below this"),
       }},
  };
}

}  // namespace train
}  // namespace tessera
