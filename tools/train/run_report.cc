#include "tools/train/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "dist/reduce_scalar.h"
#include "tensor/accelerator.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tools/train/restart_count.h"

namespace tessera {
namespace train {

namespace {

// This rank's step times: the median, the 10th and 90th percentiles (nearest rank), the
// fastest and slowest, and how many; the first steps (warm-up, allocation) sit in the slow tail,
// which the median and the percentiles keep out of the figure. Nulls for a run of no steps.
json::Object step_spread(std::vector<double> seconds) {
  json::Object o;
  std::sort(seconds.begin(), seconds.end());
  const auto at = [&](double q) {
    return seconds[std::min(seconds.size() - 1, static_cast<size_t>(q * static_cast<double>(seconds.size())))];
  };
  const double nan = std::nan("");
  const bool any = !seconds.empty();
  o.add("median", any ? at(0.5) : nan)
      .add("p10", any ? at(0.1) : nan)
      .add("p90", any ? at(0.9) : nan)
      .add("min", any ? seconds.front() : nan)
      .add("max", any ? seconds.back() : nan)
      .add("steps", static_cast<int64_t>(seconds.size()));
  return o;
}

// Under Slurm (srun, sbatch, salloc): the job's id and node list, so a log or a JSON line can be
// matched with its job. Nothing when SLURM_JOB_ID is unset or empty (mpirun, one process).
struct SlurmJob {
  std::string job_id, nodes;
};

std::optional<SlurmJob> slurm_job() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  SlurmJob job{env("SLURM_JOB_ID"), env("SLURM_JOB_NODELIST")};
  if (job.job_id.empty()) return std::nullopt;
  if (job.nodes.empty()) job.nodes = env("SLURM_NODELIST");  // older Slurm's name
  return job;
}

}  // namespace

void print_run_header(const RunContext& run, const Data& d) {
  if (!run.lead) return;
  const Config& c = run.config;
  if (language_model(c)) {
    std::printf("text: %s, %s tokenizer (%lld tokens), windows of %lld tokens: %lld train / %lld "
                "validation\n",
                c.text_file.empty() ? "the fortunes corpus" : c.text_file.c_str(),
                c.tokenizer.c_str(), static_cast<long long>(d.vocab_size),
                static_cast<long long>(c.seq_len), static_cast<long long>(d.train->size()),
                static_cast<long long>(d.test->size()));
  }
  std::printf("model %s (%lld parameters), %s: %lld train / %lld test, %s lr %g weight decay "
              "%g, batch %lld, %s on %d rank%s, %s, %d threads\n",
              c.model.c_str(), static_cast<long long>(run.parameters), c.data.c_str(),
              static_cast<long long>(d.train->size()), static_cast<long long>(d.test->size()),
              c.optimizer.c_str(), c.lr, c.weight_decay, static_cast<long long>(c.batch_size),
              c.strategy.c_str(), run.ranks, run.ranks == 1 ? "" : "s", run.device.str().c_str(),
              num_threads());
  std::printf("precision: %s\n", run.precision.describe().c_str());
  if (run.precision.autocast_enabled()) {
    const std::string advice = low_precision_advice(run.device, run.precision.autocast_dtype());
    if (!advice.empty()) std::printf("note: %s\n", advice.c_str());
  }
  if (const auto job = slurm_job()) {
    std::printf("slurm: job %s on %s\n", job->job_id.c_str(), job->nodes.c_str());
  }
}

std::string final_json_line(const RunContext& run, const RunTotals& totals,
                            Clock::time_point wall_start) {
  const Config& c = run.config;
  // Per-rank figures, gathered to everyone: peak memory (of the device trained on, the CPU's or
  // the GPU's) and optimizer state.
  // The allocator's peak restarted at the measured step (memory_report.h): the run's is the
  // larger of the two.
  std::vector<int64_t> peaks{
      std::max(memory_stats(run.device).peak_bytes, totals.memory.peak_before())};
  std::vector<int64_t> states{run.strategy.optimizer().state_bytes()};
  // And every rank's measured model states (memory_report.h), for the JSON's "memory".
  std::vector<std::vector<int64_t>> model_states{totals.memory.figures()};
  int64_t comm_bytes_per_step = 0;
  if (run.world) {
    std::vector<int64_t> mine{peaks[0], states[0]};
    for (int64_t v : model_states[0]) mine.push_back(v);
    const int64_t per = static_cast<int64_t>(mine.size());
    Tensor gathered = empty({per * run.ranks}, kI64);
    run.world->all_gather(from_vector<int64_t>(mine, {per}), gathered)->wait();
    const std::vector<int64_t> all = gathered.to_vector<int64_t>();
    peaks.clear();
    states.clear();
    model_states.clear();
    for (int k = 0; k < run.ranks; ++k) {
      peaks.push_back(all[per * k]);
      states.push_back(all[per * k + 1]);
      model_states.emplace_back(all.begin() + per * k + 2, all.begin() + per * (k + 1));
    }
    comm_bytes_per_step = totals.train_comm_bytes / std::max<int64_t>(totals.train_steps, 1);
  }
  // --straggler: the straggler's sleeps, for rank 0's JSON (collective when there is a world).
  const double straggler_slept =
      run.world && totals.straggler.enabled()
          ? dist::all_reduce_scalar(totals.straggler.slept_seconds(), *run.world, dist::ReduceOp::kMax)
          : totals.straggler.slept_seconds();
  json::Object summary;
  summary.add("model", c.model)
      .add("strategy", c.strategy)
      .add("world_size", run.ranks)
      .add("device", run.device.str())
      .add("epochs", c.epochs)
      .add("train_loss", totals.train_loss);
  const double examples_per_second =
      totals.train_seconds > 0 ? totals.train_images / totals.train_seconds : 0.0;
  if (language_model(c)) {
    // No accuracy for a language model: its validation loss per token and perplexity.
    summary.add("val_loss", totals.val_loss)
        .add("val_perplexity", std::exp(totals.val_loss))
        .add("seq_len", c.seq_len)
        .add("tokens_per_second", examples_per_second * static_cast<double>(c.seq_len));
  } else {
    summary.add("test_accuracy", totals.accuracy).add("images_per_second", examples_per_second);
  }
  summary.add("wall_seconds", seconds_since(wall_start));
  summary.add_raw("seconds_per_step", step_spread(totals.step_seconds).str());
  // --offload on disk: the seconds of a step rank 0 spent blocked on its transfers (the I/O that
  // the prefetch and write-behind did not hide); step time minus it is compute.
  if (c.offload != "none") {
    summary.add("io_wait_seconds_per_step",
                totals.step_seconds.empty() ? 0.0 : totals.io_wait_seconds / totals.step_seconds.size());
  }
  if (const auto job = slurm_job()) {
    json::Object slurm;
    slurm.add("job_id", job->job_id).add("nodes", job->nodes);
    summary.add_raw("slurm", slurm.str());
  }
  if (const auto restarts = restart_count()) summary.add("restarts", *restarts);  // tools/launch
  if (run.lead) {
    const std::vector<NamedGroup> groups = run.strategy.groups();
    for (const NamedGroup& g : groups) {
      const std::string which = groups.size() > 1 ? std::string(", ") + g.name + " group" : "";
      std::printf("communication, whole run (rank 0%s): %s\n", which.c_str(),
                  g.group->ledger().str().c_str());
    }
    summary.add("peak_bytes", *std::max_element(peaks.begin(), peaks.end()))
        .add("peak_bytes_per_rank", json::Array(peaks))
        .add("optimizer_state_bytes_per_rank", json::Array(states))
        .add("comm_bytes_per_step", comm_bytes_per_step);
    if (run.world) {
      // Per kind of collective, per training step (rank 0, all groups): explain comm --run.
      json::Array kinds(json::Format{6, true});  // "," alone between them, as always written
      const double steps = static_cast<double>(std::max<int64_t>(totals.train_steps, 1));
      for (size_t k = 0; k < totals.train_comm.size(); ++k) {
        const dist::LedgerEntry& e = totals.train_comm[k];
        if (e.calls == 0) continue;
        json::Object o;
        o.add("collective", dist::collective_name(static_cast<dist::CollectiveKind>(k)))
            .add("calls", e.calls / steps)
            .add("bytes", e.bytes / steps);
        kinds.add_raw(o.str());
      }
      summary.add("comm_per_step", kinds);
    }
    if (const auto theory = predicted_comm_bytes_per_step(run)) {
      summary.add("comm_bytes_per_step_theory", *theory);
    }
    summary
        .add("parameters", run.parameters)  // psi: the whole model's, before any strategy cut it
        .add("threads", num_threads())
        .add("amp", c.amp)
        .add("loss_scale", run.precision.scaler().get_scale())
        .add("skipped_steps", totals.skipped_steps);
    if (totals.memory.taken()) summary.add_raw("memory", totals.memory.json(run, model_states));
    if (totals.straggler.enabled()) {
      json::Object st;
      st.add("rank", totals.straggler.rank())
          .add("factor", totals.straggler.factor())
          .add("slept_seconds", straggler_slept);
      summary.add_raw("straggler", st.str());
    }
    if (c.net_latency_us > 0 || c.net_bandwidth_gbps > 0) {
      // The model's time for every message rank 0 sent over the whole run (the ledgers).
      double emulated = 0;
      for (const NamedGroup& g : groups) emulated += g.group->ledger().emulated_seconds();
      json::Object net;
      net.add("latency_us", c.net_latency_us)
          .add("bandwidth_gbps", c.net_bandwidth_gbps)
          .add("emulated_seconds", emulated);
      summary.add_raw("network", net.str());
    }
  }
  if (run.lead && run.tensor_parallel) run.tensor_parallel->report(summary, c.batch_size);
  run.strategy.report(summary, run.lead);  // collective
  return run.lead ? summary.str() : "";
}

}  // namespace train
}  // namespace tessera
