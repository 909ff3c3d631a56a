// gpt_curve: a GPT trained on the fortunes under DDP, writing everything a PyTorch run needs to
// train the same model on the same tokens in the same order (tools/bench/pytorch_gpt_curve.py),
// so that the two validation curves can be set beside each other (gpt_curve.sh does both):
//
//   DIR/init.safetensors   the model before the first step (tessera's names, f32)
//   DIR/run.json           the config, the token files, and each step's windows, rank by rank
//   DIR/tessera.jsonl      {"step": k, "val_loss": x} every --eval-every steps (and step 0)
//
// The recipe is GPT-2's as tools/train runs it: AdamW (betas 0.9, 0.95; weight decay 0.1 on the
// Linear weights only; constant --lr), the gradient clipped to norm 1 after DDP averaged it.
// Each rank takes its DistributedSampler share (seed 0) of the training windows, --batch a step;
// the validation loss is the mean over the first --val-windows validation windows.
//
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/tools/bench/gpt_curve --out=/tmp/c
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <string>

#include "tessera.h"
#include "tools/bench/bench_flags.h"

namespace tessera {
namespace {

const char* const kUsage =
    "--out=DIR [--model=gpt-nano] [--steps=300] [--eval-every=25] [--batch=8] [--seq-len=64] "
    "[--val-windows=64] [--lr=0.001]";

struct CurveFlags {
  std::string out, model = "gpt-nano";
  int64_t steps = 300, eval_every = 25, batch = 8, seq_len = 64, val_windows = 64;
  double lr = 1e-3;
};

bool parse(int argc, char** argv, const char* bench, CurveFlags* f) {
  for (int i = 1; i < argc; ++i) {
    const char* v;
    bool ok = true;
    if ((v = bench::flag_value(argv[i], "--out="))) f->out = v;
    else if ((v = bench::flag_value(argv[i], "--model="))) f->model = v;
    else if ((v = bench::flag_value(argv[i], "--steps="))) ok = bench::parse_number<int64_t>(bench, "--steps", v, 1, &f->steps);
    else if ((v = bench::flag_value(argv[i], "--eval-every="))) ok = bench::parse_number<int64_t>(bench, "--eval-every", v, 1, &f->eval_every);
    else if ((v = bench::flag_value(argv[i], "--batch="))) ok = bench::parse_number<int64_t>(bench, "--batch", v, 1, &f->batch);
    else if ((v = bench::flag_value(argv[i], "--seq-len="))) ok = bench::parse_number<int64_t>(bench, "--seq-len", v, 1, &f->seq_len);
    else if ((v = bench::flag_value(argv[i], "--val-windows="))) ok = bench::parse_number<int64_t>(bench, "--val-windows", v, 1, &f->val_windows);
    else if ((v = bench::flag_value(argv[i], "--lr="))) f->lr = std::atof(v);
    else {
      if (bench) bench::print_unknown_flag(bench, argv[i], kUsage);
      return false;
    }
    if (!ok) return false;
  }
  if (f->out.empty() || !(f->lr > 0)) {
    if (bench) std::fprintf(stderr, "%s: --out=DIR is required and --lr must be > 0 (%s)\n", bench, kUsage);
    return false;
  }
  return true;
}

// The mean next-token loss over the first `windows` validation windows, 8 at a time (their
// logits, 8 x T x 50304 floats, are the largest tensor).
double validation_loss(nn::Module& model, const data::TokenWindows& val, int64_t windows) {
  NoGradGuard no_grad;
  double sum = 0;
  for (int64_t first = 0; first < windows; first += 8) {
    std::vector<int64_t> chunk;
    for (int64_t i = first; i < std::min<int64_t>(first + 8, windows); ++i) chunk.push_back(i);
    const data::Batch b = val.get_batch(chunk);
    sum += models::lm_loss(model(Variable(b.inputs)), b.targets).item() * chunk.size();
  }
  return sum / windows;
}

std::string json_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

int run(const CurveFlags& f, const std::shared_ptr<dist::ProcessGroup>& world) {
  const int rank = world->rank(), ranks = world->size();
  const data::TextTokens text = data::load_text_tokens(data::TextDataOptions().tokenizer("gpt2"));
  auto train_set = std::make_shared<data::TokenWindows>(text.train, f.seq_len);
  const data::TokenWindows val_set(text.val, f.seq_len);
  TS_CHECK(f.val_windows <= val_set.size(), "--val-windows=", f.val_windows, ": the validation "
           "text has ", val_set.size(), " windows of ", f.seq_len, " tokens");

  manual_seed(0);
  auto model = models::GPT(models::GPTConfig::named(f.model, text.vocab_size));
  dist::DistributedDataParallel ddp(model, world);
  auto [decay, no_decay] = models::weight_decay_groups(*model);
  const auto adamw = optim::AdamOptions(f.lr).betas({0.9, 0.95});
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0)));
  optim::AdamW opt(std::move(groups), adamw);

  // Every rank's share of the windows (the same order as a DataLoader over the sampler).
  std::vector<std::vector<int64_t>> shares;
  for (int r = 0; r < ranks; ++r) {
    shares.push_back(data::DistributedSampler(train_set->size(), data::DistributedSamplerOptions(ranks, r).seed(0))
                         .indices(0));
  }
  const int64_t steps_per_epoch = static_cast<int64_t>(shares[0].size()) / f.batch;
  TS_CHECK(f.steps <= steps_per_epoch, "--steps=", f.steps, ": one epoch of ", train_set->size(),
           " windows over ", ranks, " ranks at --batch=", f.batch, " has ", steps_per_epoch, " steps");
  auto windows = [&](int r, int64_t step) {
    return std::vector<int64_t>(shares[r].begin() + step * f.batch, shares[r].begin() + (step + 1) * f.batch);
  };
  std::ofstream curve, run_json;
  if (rank == 0) {
    save_safetensors(f.out + "/init.safetensors", model->state_dict());
    run_json.open(f.out + "/run.json");
    run_json << "{\"model\":\"" << f.model << "\",\"ranks\":" << ranks << ",\"batch\":" << f.batch
             << ",\"seq_len\":" << f.seq_len << ",\"lr\":" << f.lr << ",\"val_windows\":" << f.val_windows
             << ",\"eval_every\":" << f.eval_every << ",\"train_file\":\"" << text.train_file
             << "\",\"val_file\":\"" << text.val_file << "\",\"steps\":[";
    for (int64_t s = 0; s < f.steps; ++s) {
      run_json << (s ? "," : "") << "[";
      for (int r = 0; r < ranks; ++r) run_json << (r ? "," : "") << json_list(windows(r, s));
      run_json << "]";
    }
    run_json << "]}\n";
    curve.open(f.out + "/tessera.jsonl");
    TS_CHECK(run_json.good() && curve.good(), "gpt_curve: cannot write into --out=", f.out);
  }
  auto evaluate = [&](int64_t step) {
    const double loss = validation_loss(*model, val_set, f.val_windows);
    if (rank == 0) {
      std::printf("step %4lld  validation loss %.4f\n", static_cast<long long>(step), loss);
      std::fflush(stdout);
      curve << "{\"step\":" << step << ",\"val_loss\":" << std::setprecision(10) << loss << "}" << std::endl;
    }
  };
  evaluate(0);
  for (int64_t step = 0; step < f.steps; ++step) {
    const data::Batch b = train_set->get_batch(windows(rank, step));
    opt.zero_grad();
    models::lm_loss(ddp(b.inputs), b.targets).backward();  // averaged over the ranks
    optim::clip_grad_norm(model->parameters(), 1.0);
    opt.step();
    if ((step + 1) % f.eval_every == 0 || step + 1 == f.steps) evaluate(step + 1);
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  auto world = tessera::dist::init(&argc, &argv);
  tessera::CurveFlags flags;
  if (!tessera::parse(argc, argv, world->rank() == 0 ? "gpt_curve" : nullptr, &flags)) return 2;
  return tessera::dist::run_or_abort([&] { return tessera::run(flags, world); });
}
