// The support table's composition tests, generated from the table: every run of its pairwise
// plan (tools/train/composition_plan.h) trains 2 epochs and must exit 0 (the table allows it);
// its trained model (--save-model) must equal its reference's (the same training without the
// strategy's machinery: ZeRO, a pipeline, tensor parallelism == DDP or one process); and a run
// the plan resumes stops after epoch 1 and resumes to 2, its model equal to the uninterrupted
// run's bit for bit; a run the plan restarts runs under tools/launch with its last rank killed
// after its first step of epoch 2 (--inject-fault=crash-in-epoch), and must end, on the same
// ranks, as the uninterrupted run, bit for bit; on fewer (the job started with a replica more,
// its hostfile shrunk before the restart), as the first epoch's checkpoint resumed by hand on
// the fewer ranks, bit for bit, and as its reference resumed from that checkpoint (float32:
// 1e-5), having printed what the support table says starts fresh.
//
// Tolerances: float32 runs 1e-5 (absolute, and relative to the element). A run with a half-
// precision value somewhere (--amp, --param-dtype, --compression=fp16|bf16) is compared with
// the reference's float32 run: its distance from it, ||run - f32|| / ||f32|| per tensor, may be at
// most twice the half-precision reference's own plus 1%. Gradients summed in another order
// round otherwise in half precision (one ulp of bf16 is 2^-8 = 0.4% of the value) and training
// carries the difference on (on ResNet-20 with BatchNorm, 8 steps move a tensor 10-25% of its
// norm away from float32's, in the reference as in the run); what a strategy must not do is add
// error of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "tensor/check.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/tools/train_runner.h"
#include "tools/train/composition_plan.h"

namespace tessera {
namespace testing {
namespace {

using train::CompositionPlan;
using train::PlannedRun;

const CompositionPlan& plan() {
  static const CompositionPlan p = train::composition_plan();
  return p;
}

// The runs' files (models, checkpoints: about 500 MB for the plan): under Bazel's TEST_TMPDIR,
// which Bazel removes; run by hand, under /tmp, removed at exit.
std::string temp_dir() {
  static const std::string dir = [] {
    const char* bazel = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(bazel != nullptr ? bazel : "/tmp") + "/tessera_composition_XXXXXX";
    TS_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp ", tmpl, ": ", std::strerror(errno));
    static const std::string made = tmpl;
    std::atexit([] { std::filesystem::remove_all(made); });
    return tmpl;
  }();
  return dir;
}

std::string launch_binary;  // tools/launch (main's third argument)

CommandResult train(const std::string& flags, int ranks) {
  return ranks == 1 ? run_train_single(flags) : run_train(flags, ranks);
}

// The trained model of `flags` on `ranks` (2 epochs), saved to a file; runs each once.
std::string trained_model(const std::string& flags, int ranks, std::string* error) {
  static std::map<std::string, std::string> done;
  const std::string key = std::to_string(ranks) + " " + flags;
  if (done.count(key) != 0) return done[key];
  const std::string file = temp_dir() + "/model-" + std::to_string(done.size()) + ".safetensors";
  const CommandResult r = train(flags + " --epochs=2 --save-model=" + file, ranks);
  if (r.exit_code != 0) {
    *error = "exit " + std::to_string(r.exit_code) + " on " + std::to_string(ranks) +
             " ranks: " + flags + "\n" + r.output;
    return "";
  }
  return done[key] = file;
}

// The oldest committed checkpoint of a run's --checkpoint-dir (its first epoch's).
std::string first_checkpoint(const std::string& dir) {
  const CommandResult ls = run_command("ls -d " + dir + "/step-* | sort | head -1");
  std::string path = ls.output;
  while (!path.empty() && std::isspace(static_cast<unsigned char>(path.back()))) path.pop_back();
  return path;
}

// "" when every tensor of `expected` is in `got` with its shape and dtype, and values equal
// bit for bit (`bitwise`) or within atol + rtol |expected| element by element; else the first
// that is not.
std::string compare(const std::string& got_file, const std::string& expected_file, double atol,
                    double rtol, bool bitwise) {
  const StateDict got = load_safetensors(got_file).tensors;
  const StateDict expected = load_safetensors(expected_file).tensors;
  if (got.size() != expected.size()) {
    return "the models hold " + std::to_string(got.size()) + " and " +
           std::to_string(expected.size()) + " tensors";
  }
  for (const auto& [name, e] : expected) {
    if (!got.contains(name)) return "no tensor '" + name + "'";
    const Tensor g = got.at(name);
    if (g.shape() != e.shape() || g.dtype() != e.dtype()) return "'" + name + "' differs in shape or dtype";
    const Tensor gf = g.to(kF64).contiguous(), ef = e.to(kF64).contiguous();
    const double* gp = gf.data<double>();
    const double* ep = ef.data<double>();
    for (int64_t k = 0; k < ef.numel(); ++k) {
      const bool equal = bitwise ? gp[k] == ep[k]
                                 : std::abs(gp[k] - ep[k]) <= atol + rtol * std::abs(ep[k]);
      if (!equal) {
        std::ostringstream out;
        out.precision(9);
        out << "'" << name << "'[" << k << "] is " << gp[k] << ", expected " << ep[k];
        return out.str();
      }
    }
  }
  return "";
}

// ||a - b|| / ||b|| of each tensor of b (floating point; a holds the same names, any dtype).
std::map<std::string, double> relative_distances(const std::string& a_file, const std::string& b_file) {
  const StateDict a = load_safetensors(a_file).tensors;
  const StateDict b = load_safetensors(b_file).tensors;
  std::map<std::string, double> out;
  for (const auto& [name, t] : b) {
    if (!a.contains(name) || !is_floating(t.dtype())) continue;
    const Tensor af = a.at(name).to(kF64).contiguous(), bf = t.to(kF64).contiguous();
    double diff = 0, norm = 0;
    for (int64_t k = 0; k < bf.numel(); ++k) {
      const double x = af.data<double>()[k], y = bf.data<double>()[k];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    out[name] = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  }
  return out;
}

// "strategy=zero1 amp=bf16 ...": the values that are not the axes' first.
std::string described(const PlannedRun& run) {
  std::string s;
  for (const auto& [axis, value] : run.values) {
    if (axis == "strategy" || value != train::support_axis(axis).values[0]) {
      s += (s.empty() ? "" : " ") + axis + "=" + value;
    }
  }
  return s;
}

class Composition : public ::testing::TestWithParam<size_t> {};

TEST_P(Composition, RunEqualsItsReferenceAndResumesExactly) {
  const PlannedRun& run = plan().runs[GetParam()];
  SCOPED_TRACE(described(run));
  std::string error;
  // The checkpoint axis: the run writes checkpoints of that format after every epoch.
  const bool checkpoints = train::value_in(run.values, "checkpoint") != "none";
  const std::string dir = temp_dir() + "/run-" + std::to_string(GetParam());
  const std::string flags = run.flags + (checkpoints ? " --checkpoint-dir=" + dir + "/all" : "");
  const std::string model = trained_model(flags, run.ranks, &error);
  ASSERT_FALSE(model.empty()) << "the support table allows this run, which failed: " << error;

  if (run.reference_ranks > 0) {
    const std::string reference = trained_model(run.reference_flags, run.reference_ranks, &error);
    ASSERT_FALSE(reference.empty()) << "its reference failed: " << error;
    if (!run.half_precision) {
      EXPECT_EQ(compare(model, reference, 1e-5, 1e-5, false), "")
          << "against " << run.reference_ranks << " ranks: " << run.reference_flags;
    } else {
      // Half precision: the run may be no further from the reference trained in float32 than
      // twice the reference's own distance from it (each is float32's training plus its
      // roundings; summed in another order they differ, but a strategy must add no error of its
      // own), plus 1% of the tensor.
      const std::string truth = trained_model(run.reference_f32_flags, run.reference_ranks, &error);
      ASSERT_FALSE(truth.empty()) << "its float32 reference failed: " << error;
      const auto ours = relative_distances(model, truth);
      const auto theirs = relative_distances(reference, truth);
      for (const auto& [name, d] : theirs) {
        ASSERT_EQ(ours.count(name), 1u) << name;
        EXPECT_LE(ours.at(name), 2 * d + 1e-2)
            << "'" << name << "' is " << ours.at(name) << " of its norm from the float32 run, its "
            << "reference " << d << " (" << run.reference_ranks << " ranks: " << run.reference_flags << ")";
      }
    }
  }

  if (train::value_in(run.values, "resume") == "yes") {
    const CommandResult first =
        train(run.flags + " --epochs=1 --checkpoint-dir=" + dir + "/first", run.ranks);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string resumed_file = dir + "/resumed.safetensors";
    const CommandResult resumed =
        train(flags + " --epochs=2 --resume=" + dir + "/first --save-model=" + resumed_file,
              run.ranks);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("after epoch 1"), std::string::npos) << resumed.output;
    EXPECT_EQ(compare(resumed_file, model, 0, 0, true), "")
        << "resumed after epoch 1 against the uninterrupted run";
  }
}

// tools/launch restarting the run after its last rank is killed in epoch 2: on the same
// ranks, or on fewer (the job starts on first_ranks; the hostfile shrinks to `ranks` before the
// restart). Returns the launcher's output; the trained model is written to `model_file`.
CommandResult launched(const PlannedRun& run, const std::string& dir, const std::string& model_file) {
  const bool fewer = train::value_in(run.values, "restart") == "fewer-ranks";
  const std::string hosts = dir + "/hosts";
  run_command("mkdir -p " + dir + " && echo 'localhost slots=" + std::to_string(run.first_ranks) +
              "' > " + hosts);
  const std::string launcher =
      launch_binary + " --max-restarts=1 --min-ranks=" + std::to_string(run.ranks) +
      (fewer ? " --before-restart='echo localhost slots=" + std::to_string(run.ranks) + " > " +
                   hosts + "'"
             : "");
  // As tools/mpi_run.sh runs the other jobs: shared memory on one machine, oversubscribed,
  // waiting ranks yielding their core (the hostfile's slots tell Open MPI each rank has one).
  const std::string env =
      "OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none "
      "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_odls_base_sigkill_timeout=0 "
      "OMPI_MCA_mpi_yield_when_idle=1 ";
  return run_command(env + launcher + " -- mpirun --oversubscribe --allow-run-as-root --bind-to none -np " +
                     std::to_string(run.first_ranks) + " --hostfile " + hosts + " " +
                     train_binaries().train + " " + run.flags + " --epochs=2 --checkpoint-dir=" +
                     dir + "/ck --save-model=" + model_file + " --inject-fault=crash-in-epoch:" +
                     std::to_string(run.first_ranks - 1) + ":2");
}

TEST_P(Composition, RestartByTheLauncher) {
  const PlannedRun& run = plan().runs[GetParam()];
  const std::string restart = train::value_in(run.values, "restart");
  if (restart == "none") GTEST_SKIP() << "the plan does not restart this run";
  SCOPED_TRACE(described(run));
  const std::string dir = temp_dir() + "/restart-" + std::to_string(GetParam());
  const std::string model = dir + "/launched.safetensors";
  const CommandResult r = launched(run, dir, model);
  ASSERT_EQ(r.exit_code, 0) << "the support table allows this restart, which failed:\n" << r.output;
  EXPECT_NE(r.output.find("--inject-fault: crashing at step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launch: attempt 2 on " + std::to_string(run.ranks) + " rank"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("after epoch 1"), std::string::npos) << r.output;
  // What starts fresh is said, and nothing else is.
  const auto fresh = train::resets_for(run.values);
  for (const train::Reset& reset : train::support_resets()) {
    const bool expected = std::find(fresh.begin(), fresh.end(), &reset) != fresh.end();
    EXPECT_EQ(r.output.find(reset.said) != std::string::npos, expected)
        << "'" << reset.said << "' " << (expected ? "not " : "") << "printed:\n" << r.output;
  }

  std::string error;
  if (restart == "same-ranks") {
    const bool checkpoints = train::value_in(run.values, "checkpoint") != "none";
    ASSERT_TRUE(checkpoints);  // the table refuses a restart without
    const std::string uninterrupted = trained_model(
        run.flags + " --checkpoint-dir=" + temp_dir() + "/run-" + std::to_string(GetParam()) + "/all",
        run.ranks, &error);
    ASSERT_FALSE(uninterrupted.empty()) << error;
    EXPECT_EQ(compare(model, uninterrupted, 0, 0, true), "")
        << "restarted on the same ranks against the uninterrupted run";
    return;
  }
  // Fewer ranks: the first epoch's checkpoint (written on first_ranks), resumed by hand on
  // `ranks`, and by the reference.
  const std::string first = first_checkpoint(dir + "/ck");
  ASSERT_FALSE(first.empty()) << "no checkpoint in " << dir << "/ck";
  const std::string by_hand = dir + "/by-hand.safetensors";
  const CommandResult resumed = train(run.flags + " --epochs=2 --checkpoint-dir=" + dir +
                                          "/by-hand --resume=" + first + " --save-model=" + by_hand,
                                      run.ranks);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(compare(model, by_hand, 0, 0, true), "")
      << "restarted on fewer ranks against " << first << " resumed on " << run.ranks << " ranks";
  if (run.reference_ranks == 0 || run.half_precision) return;
  const std::string reference = dir + "/reference.safetensors";
  const CommandResult ref = train(run.reference_flags + " --epochs=2 --resume=" + first +
                                      " --save-model=" + reference,
                                  run.reference_ranks);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  EXPECT_EQ(compare(model, reference, 1e-5, 1e-5, false), "")
      << "against its reference resumed from " << first << " on " << run.reference_ranks
      << " ranks: " << run.reference_flags;
}

INSTANTIATE_TEST_SUITE_P(Plan, Composition, ::testing::Range<size_t>(0, plan().runs.size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = std::to_string(info.param) + "_" +
                                              described(plan().runs[info.param]);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The plan itself: every pair of values that can meet is covered, and the pairs left out are
// exactly those a refusal of the table names (a rule outside the table refusing a run the
// table allows would leave its pairs out, and fail here).
TEST(CompositionPlan, CoversEveryPairTheTableAllows) {
  for (const std::string& pair : plan().pairs_not_coverable) {
    std::istringstream in(pair);
    std::string first, second;
    in >> first >> second;
    const train::Assignment values = {
        {first.substr(0, first.find('=')), first.substr(first.find('=') + 1)},
        {second.substr(0, second.find('=')), second.substr(second.find('=') + 1)}};
    // Under every strategy, refused (by a rule naming only these two axes, or with the
    // strategy: topk's and the sharded format's) or one of them does not apply (an axis of the
    // pipeline's under another strategy, error feedback without a compressor, the GPT's
    // weight-decay groups on another model), where an axis that applies only beside some
    // values of another (the weight-decay groups: a transformer) is given the first of them.
    train::Assignment completed = values;
    for (const auto& [axis, value] : values) {
      if (value == train::support_axis(axis).values[0]) continue;
      for (const train::Condition& c : train::support_axis(axis).applies_when) {
        if (train::value_in(completed, c.axis).empty()) completed.emplace_back(c.axis, c.values[0]);
      }
    }
    bool excused = true;
    for (const std::string& s : train::strategy_axis().values) {
      train::Assignment with = completed;
      if (train::value_in(with, "strategy").empty()) with.emplace_back("strategy", s);
      const bool applying = train::applies(train::support_axis(values[0].first), with) &&
                            train::applies(train::support_axis(values[1].first), with);
      excused = excused && (!applying || train::refusal_for(with) != nullptr);
    }
    EXPECT_TRUE(excused) << pair << " is allowed by the table but in no run";
  }
  EXPECT_GT(plan().runs.size(), 20u);
  std::printf("the plan: %zu runs cover %lld pairs of values; %zu pairs cannot meet\n",
              plan().runs.size(), static_cast<long long>(plan().pairs_covered),
              plan().pairs_not_coverable.size());
}

}  // namespace
}  // namespace testing
}  // namespace tessera

// MPI_RUN TRAIN LAUNCH.
int main(int argc, char** argv) {
  if (argc >= 4) tessera::testing::launch_binary = argv[3];
  return tessera::testing::train_test_main(argc, argv);
}
