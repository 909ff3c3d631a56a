#include "tools/train/train_loop.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "dist/reduce_scalar.h"
#include "dist/trace_recorder.h"
#include "dist/zero/offload/io_pool.h"
#include "tensor/allocator.h"
#include "tensor/random.h"
#include "tools/train/evaluate.h"
#include "tools/train/guards.h"
#include "tools/train/restart_count.h"
#include "tools/train/tracing.h"

namespace tessera {
namespace train {

namespace {

using PerKind = std::array<dist::LedgerEntry, static_cast<size_t>(dist::CollectiveKind::kCount)>;

// Calls and bytes sent per kind of collective so far, summed over the strategy's groups (the
// ledgers are per group).
PerKind sent_per_kind(const Strategy& strategy) {
  PerKind out{};
  for (const NamedGroup& g : strategy.groups()) {
    for (size_t k = 0; k < out.size(); ++k) {
      const dist::LedgerEntry e = g.group->ledger().entry(static_cast<dist::CollectiveKind>(k));
      out[k].calls += e.calls;
      out[k].bytes += e.bytes;
    }
  }
  return out;
}

double average_over_ranks(double value, dist::ProcessGroup* group) {
  return group == nullptr ? value : dist::all_reduce_scalar(value, *group, dist::ReduceOp::kMean);
}

struct EpochFigures {
  double loss_sum = 0;
  int64_t batches = 0, images = 0, skipped_steps = 0, comm_bytes = 0;
  PerKind comm{};  // per kind of collective
  double seconds = 0;
  std::vector<double> step_seconds;  // each step's, on this rank
  double io_wait_seconds = 0;        // blocked on offload transfers during the steps
};

// One epoch's training steps; `step` counts the optimizer steps of the whole run. `evaluation`:
// the validation loader of --eval-every (null: none).
EpochFigures train_epoch(const RunContext& run, const data::DataLoader& loader, int64_t epoch,
                         int64_t& step, MemoryReport& memory, dist::StragglerEmulation& straggler,
                         const FaultInjection& fault, MetricsFile& metrics, bool tty,
                         const data::DataLoader* evaluation) {
  run.model.train();
  // A language model's throughput counts tokens: seq_len of them an example.
  const bool lm = language_model(run.config);
  const double per_example = lm ? static_cast<double>(run.config.seq_len) : 1.0;
  Progress progress(epoch, run.config.epochs, loader.num_batches(), tty, lm ? "tok/s" : "img/s");
  const auto start = Clock::now();
  const PerKind comm_before = sent_per_kind(run.strategy);
  EpochFigures f;
  // step_start: when the step began (before next_batch() when batches are assigned: it pulls).
  auto train_on = [&](const data::Batch& batch, Clock::time_point step_start) {
    begin_traced_step(step + 1);  // --trace: the library records while a selected step runs
    const double io_wait_before = dist::offload::io_wait_seconds();  // --offload=...: disk waits
    const bool measured = memory.measures();
    if (measured) memory.before_step(run);
    // --trace: a strategy that records no computation of its own (the data-parallel ones,
    // ZeRO-3 and the pipeline record theirs; gossip, local SGD and asynchronous SGD do not) gets
    // one span for its whole train_step (forward, backward and what its library does inside,
    // which the library's own spans show: a pull, a gossip exchange).
    // Off, this costs one relaxed load and no clock read.
    auto& recorder = dist::trace::TraceRecorder::global();
    const bool tracing = recorder.recording();
    const double compute_start = tracing ? dist::steady_seconds() : 0;
    const int64_t compute_events = tracing ? recorder.compute_events() : 0;
    const double loss = run.strategy.train_step(model_inputs(run, batch.inputs),
                                                batch.targets.to(run.device));
    if (tracing && recorder.recording() && recorder.compute_events() == compute_events) {
      recorder.span("train_step", "compute", compute_start, dist::steady_seconds());
    }
    // --straggler: that rank's step takes FACTOR times as long (measured around train_step,
    // which for DDP includes waiting for its buckets and for async the pull, and around
    // next_batch() too when it assigns the batch: the pull then happens there).
    straggler.after_compute(run.world ? run.world->rank() : 0, seconds_since(step_start));
    if (measured) memory.after_backward(run);
    // Under loss scaling an inf gradient is the scaler's to skip; otherwise the guard's.
    const bool scaled = run.precision.scaler().is_enabled();
    check_finite_step(loss, scaled ? nullptr : &run.strategy, epoch, f.batches + 1,
                      loader.num_batches(), run.config,
                      run.strategy.checks_steps_over_world() ? run.world : nullptr);
    // --clip-grad-norm: on the true gradients (unscaled first under loss scaling), in the
    // strategy's layout. An overflowing fp16 step clips infinities; the scaler skips it anyway.
    if (run.config.clip_grad_norm > 0) {
      run.precision.unscale(run.strategy.optimizer());
      run.strategy.clip_grad_norm(run.config.clip_grad_norm);
    }
    bool stepped;
    {
      // --trace: what the optimizer step sends (ZeRO-1/2's parameter all-gather) is named so.
      std::optional<dist::trace::CollectiveLabel> label;
      if (dist::trace::recording()) label.emplace("optimizer step", "optimizer");
      stepped = run.precision.step(run.strategy.optimizer());  // the same on every rank
    }
    if (!stepped) ++f.skipped_steps;
    if (measured) memory.after_step(run);
    memory.stepped(stepped);
    run.strategy.after_step();
    end_traced_step();
    ++step;
    fault.after_step(run.world ? run.world->rank() : 0, step, epoch, f.batches + 1);
    f.loss_sum += loss;
    ++f.batches;
    // Batches assigned at run time: each rank counts its own (summed over ranks after).
    const int64_t images = batch.size() * (run.strategy.assigns_batches() ? 1 : run.strategy.replicas());
    f.images += images;
    const double step_seconds = seconds_since(step_start);
    f.step_seconds.push_back(step_seconds);
    f.io_wait_seconds += dist::offload::io_wait_seconds() - io_wait_before;
    metrics.step({step, epoch, loss, run.strategy.optimizer().param_groups()[0].options->lr(),
                  images, step_seconds},
                 run.precision.scaler());
    if (run.lead) {
      progress.update(f.batches, f.loss_sum / f.batches,
                      f.images * per_example / seconds_since(start));
    }
    // --eval-every: a language model's validation loss between steps (collective, as at an
    // epoch's end; the flag table keeps it from asynchronous SGD, whose ranks step apart).
    if (run.config.eval_every > 0 && step % run.config.eval_every == 0 && evaluation) {
      run.strategy.sync_buffers();
      const Evaluation e = evaluate(run, *evaluation);
      if (run.lead) {
        progress.finish();
        std::printf("step %lld  val_loss %.4f  val_perplexity %.2f\n",
                    static_cast<long long>(step), e.loss, e.perplexity());
        std::fflush(stdout);
      }
    }
  };
  if (run.strategy.assigns_batches()) {
    for (;;) {
      const auto step_start = Clock::now();
      const int64_t b = run.strategy.next_batch(epoch, loader.num_batches());
      if (b == Strategy::kNoBatch) break;
      train_on(loader.batch(epoch, b), step_start);
    }
  } else {
    for (data::Batch& batch : loader.epoch(epoch)) train_on(batch, Clock::now());
  }
  if (run.lead) progress.finish();
  f.seconds = seconds_since(start);
  // Only the training steps' traffic counts toward bytes per step (not evaluation's).
  const PerKind after = sent_per_kind(run.strategy);
  for (size_t k = 0; k < after.size(); ++k) {
    f.comm[k].calls = after[k].calls - comm_before[k].calls;
    f.comm[k].bytes = after[k].bytes - comm_before[k].bytes;
    f.comm_bytes += f.comm[k].bytes;
  }
  return f;
}

}  // namespace

RunTotals train_epochs(const RunContext& run, const Loaders& loaders,
                       optim::LRScheduler* schedule, StartingPoint start, MetricsFile& metrics) {
  const Config& c = run.config;
  // mpirun gives rank 0 a pseudo-terminal even when its own output is a file: plain lines then.
  const bool tty = run.lead && run.world == nullptr && ::isatty(STDOUT_FILENO) != 0;
  reset_peak(Device::cpu());
  if (run.device.is_cuda()) reset_peak(run.device);
  for (const NamedGroup& g : run.strategy.groups()) g.group->ledger().reset();
  RunTotals totals;
  if (!c.straggler.empty()) totals.straggler = dist::StragglerEmulation::parse(c.straggler);
  if (!c.inject_fault.empty()) {
    // Under the elastic launcher, on the first attempt only: a restarted run finishes.
    const int attempt = restart_count().value_or(0);
    if (attempt == 0) {
      totals.fault = FaultInjection::parse(c.inject_fault);
    } else if (run.lead) {
      std::printf("--inject-fault=%s: not fired on restart %d\n", c.inject_fault.c_str(), attempt);
    }
  }
  int64_t step = start.step;
  start_tracing(c, step + 1,
                run.strategy.assigns_batches()
                    ? 0
                    : step + (c.epochs - start.first_epoch + 1) * loaders.train.num_batches());
  for (int64_t epoch = start.first_epoch; epoch <= c.epochs; ++epoch) {
    const double lr = run.strategy.optimizer().param_groups()[0].options->lr();
    EpochFigures f = train_epoch(run, loaders.train, epoch, step, totals.memory, totals.straggler,
                                 totals.fault, metrics, tty,
                                 language_model(c) && c.eval_every > 0 ? &loaders.test : nullptr);
    totals.train_comm_bytes += f.comm_bytes;
    for (size_t k = 0; k < f.comm.size(); ++k) {
      totals.train_comm[k].calls += f.comm[k].calls;
      totals.train_comm[k].bytes += f.comm[k].bytes;
    }
    totals.skipped_steps += f.skipped_steps;
    if (schedule) schedule->step();
    if (run.strategy.assigns_batches() && run.world) {
      // Ranks trained on different numbers of batches (a server on none): the mean over
      // batches, and every rank's images.
      const double batches = dist::all_reduce_scalar(static_cast<double>(f.batches), *run.world,
                                                     dist::ReduceOp::kSum);
      totals.train_loss = dist::all_reduce_scalar(f.loss_sum, *run.world, dist::ReduceOp::kSum) /
                          std::max(batches, 1.0);
      f.images = static_cast<int64_t>(dist::all_reduce_scalar(static_cast<double>(f.images),
                                                              *run.world, dist::ReduceOp::kSum));
    } else {
      totals.train_loss =
          average_over_ranks(f.loss_sum / std::max<int64_t>(f.batches, 1), run.world);
    }
    const double images_per_second = f.images / f.seconds;
    totals.train_seconds += f.seconds;
    totals.step_seconds.insert(totals.step_seconds.end(), f.step_seconds.begin(), f.step_seconds.end());
    totals.io_wait_seconds += f.io_wait_seconds;
    totals.train_images += f.images;
    // Batches assigned at run time: a step is the epoch's batches over the replicas, on average
    // (what each would have trained on with fixed shards), on every rank (a server too).
    totals.train_steps += run.strategy.assigns_batches()
                              ? loaders.train.num_batches() / run.strategy.replicas()
                              : f.batches;
    // The ranks holding the same parameters evaluate (and rank 0 saves) replica 0's BatchNorm
    // statistics (dist::sync_buffers over the world, or a pipeline stage's replicas).
    run.strategy.sync_buffers();
    const Evaluation e = evaluate(run, loaders.test);
    totals.accuracy = e.accuracy;
    totals.val_loss = e.loss;
    const bool lm = language_model(c);
    const double tokens_per_second = images_per_second * static_cast<double>(c.seq_len);
    if (run.lead && lm) {
      std::printf("epoch %lld/%lld  train_loss %.4f  val_loss %.4f  val_perplexity %.2f  %.0f "
                  "tokens/s  %.1f s  lr %.3g\n",
                  static_cast<long long>(epoch), static_cast<long long>(c.epochs),
                  totals.train_loss, e.loss, e.perplexity(), tokens_per_second, f.seconds, lr);
      std::fflush(stdout);
    } else if (run.lead) {
      std::printf("epoch %lld/%lld  train_loss %.4f  test_accuracy %.4f  %.0f images/s  %.1f s  "
                  "lr %.3g\n",
                  static_cast<long long>(epoch), static_cast<long long>(c.epochs),
                  totals.train_loss, totals.accuracy, images_per_second, f.seconds, lr);
      std::fflush(stdout);
    }
    EpochMetrics em{epoch, step, totals.train_loss, totals.accuracy, images_per_second, f.seconds, lr};
    em.language_model = lm;
    em.val_loss = e.loss;
    em.tokens_per_second = tokens_per_second;
    metrics.epoch(em, run.precision.scaler());
    if (!c.checkpoint_dir.empty()) {
      save_epoch_checkpoint(run, {epoch, step, default_generator().state()});
    }
  }
  return totals;
}

}  // namespace train
}  // namespace tessera
