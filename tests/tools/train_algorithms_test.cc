// The train tool's algorithms beyond synchronous all-reduce, under mpirun: gossip (D-PSGD)
// sends one model per neighbour and learns; local SGD with H = 1 is DDP and H = 8 sends an
// eighth; a straggler slows DDP but leaves its result; asynchronous SGD with bound 0 is DDP,
// keeps its staleness within the bound under a straggler, applies every push once, with shared
// batches trains on each batch once, and refuses
// what it cannot do with exit code 2 on every rank; hierarchical DDP trains as flat DDP.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::kShortMlp;
using tessera::testing::last_json_line;

tessera::testing::CommandResult run(const std::string& flags, int ranks = 2) {
  return tessera::testing::run_train(flags, ranks);
}

// --strategy=gossip on 2 ranks: each step sends the model once to the one neighbour (psi f32, the
// ring's 2/3 weight), nothing is all-reduced while training (not even the NaN check, which each
// rank makes alone), the ranks'
// models differ (a positive consensus distance) and the average model learns.
TEST(TrainAlgorithms, DecentralizedSgdSendsOneModelPerNeighbourAndLearns) {
  for (const char* graph : {"ring", "exponential"}) {
    const auto r = run(kShortMlp + "--strategy=gossip --gossip-topology=" + std::string(graph));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    const std::string d = json_field(s, "decentralized");
    ASSERT_FALSE(d.empty()) << s;
    const double psi = json_number(s, "parameters");
    EXPECT_EQ(json_number(d, "elements_sent_per_step"), psi) << d;
    EXPECT_EQ(json_number(s, "comm_bytes_per_step"), psi * 4) << s;
    // 2 ranks: the ring weighs the neighbour 2/3 (lambda_2 1/3); the exponential graph 1/2.
    EXPECT_NEAR(json_number(d, "lambda_2"), std::string(graph) == "ring" ? 1.0 / 3 : 0.0, 1e-6) << d;
    EXPECT_GT(json_number(d, "consensus_distance"), 0) << d;
    EXPECT_GT(json_number(s, "test_accuracy"), 0.6) << s;
    // No per-step formula fits local SGD (DDP's bytes in warm-up, a model average per round):
    // the JSON gives none rather than DDP's.
    EXPECT_EQ(json_field(s, "comm_bytes_per_step_theory"), "") << s;
  }
}

// --strategy=local-sgd: with H = 1 and plain SGD the averaged models are DDP's (SGD's update is
// linear in the gradient), to the last digit; with H = 8 (and DiLoCo's outer Nesterov) the
// bytes per step fall to about 1/8 of DDP's and the average model still learns.
TEST(TrainAlgorithms, LocalSgdWithPeriodOneIsDdpAndPeriodEightSendsAnEighth) {
  const std::string sgd = "--optimizer=sgd --momentum=0 ";
  const auto ddp = run(kShortMlp + sgd + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto h1 = run(kShortMlp + sgd + "--strategy=local-sgd --sync-period=1");
  ASSERT_EQ(h1.exit_code, 0) << h1.output;
  const std::string a = last_json_line(ddp.output), b = last_json_line(h1.output);
  EXPECT_EQ(json_number(a, "train_loss"), json_number(b, "train_loss")) << b;
  EXPECT_EQ(json_number(a, "test_accuracy"), json_number(b, "test_accuracy")) << b;
  for (const char* outer : {"none", "nesterov"}) {
    const auto h8 = run(kShortMlp + "--strategy=local-sgd --sync-period=8 --outer-optimizer=" + outer);
    ASSERT_EQ(h8.exit_code, 0) << h8.output;
    const std::string s = last_json_line(h8.output);
    EXPECT_LT(json_number(s, "comm_bytes_per_step"), json_number(a, "comm_bytes_per_step") / 7) << s;
    EXPECT_GT(json_number(json_field(s, "local_sgd"), "consensus_distance"), 0) << s;
    EXPECT_GT(json_number(s, "test_accuracy"), 0.6) << s;
  }
}

// --straggler=1:2: rank 1 sleeps as long again as each of its steps took. DDP is synchronous, so
// the result is unchanged to the last digit; the JSON says who slept and how long; a rank the
// world does not have is refused on every rank.
TEST(TrainAlgorithms, AStragglerSlowsTheRunButNotDdpsResult) {
  const auto plain = run(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto slow = run(kShortMlp + "--strategy=ddp --straggler=1:2");
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  const std::string a = last_json_line(plain.output), b = last_json_line(slow.output);
  EXPECT_EQ(json_number(a, "train_loss"), json_number(b, "train_loss")) << b;
  const std::string st = json_field(b, "straggler");
  ASSERT_FALSE(st.empty()) << b;
  EXPECT_EQ(json_number(st, "rank"), 1) << st;
  EXPECT_GT(json_number(st, "slept_seconds"), 0) << st;
  const auto wrong = run(kShortMlp + "--strategy=ddp --straggler=5:2");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("names rank 5, but there are 2 ranks"), std::string::npos) << wrong.output;
}

// --strategy=async --staleness-bound=0 on 3 ranks (1 server, 2 workers) with plain SGD is
// synchronous SGD: DDP on 2 ranks, up to the order of the two lr/2 updates (f32 rounding). The
// server applied 2 pushes per step; no push waited for more than the other worker's of the same
// iteration; nobody ran ahead.
TEST(TrainAlgorithms, AsyncWithBoundZeroIsDdp) {
  const std::string sgd = "--optimizer=sgd --momentum=0 --schedule=constant ";
  const auto ddp = run(kShortMlp + sgd + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto async = run(kShortMlp + sgd + "--strategy=async --staleness-bound=0", 3);
  ASSERT_EQ(async.exit_code, 0) << async.output;
  const std::string a = last_json_line(ddp.output), b = last_json_line(async.output);
  EXPECT_NEAR(json_number(a, "train_loss"), json_number(b, "train_loss"), 1e-5) << b;
  EXPECT_NEAR(json_number(a, "test_accuracy"), json_number(b, "test_accuracy"), 2e-3) << b;
  const std::string st = json_field(b, "staleness"), ps = json_field(b, "parameter_server");
  ASSERT_FALSE(st.empty()) << b;
  EXPECT_EQ(json_number(st, "lag_max"), 0) << st;
  EXPECT_LE(json_number(st, "max"), 1) << st;
  EXPECT_EQ(json_number(st, "max_allowed"), 1) << st;
  EXPECT_EQ(json_number(ps, "updates_applied"), 2 * 15) << ps;  // 1000 images per worker
  EXPECT_EQ(json_field(ps, "server_ranks"), "[0]") << ps;
  // Rank 0, the server, sends each worker the model each step.
  EXPECT_EQ(json_number(b, "comm_bytes_per_step"), json_number(b, "comm_bytes_per_step_theory"));
  EXPECT_EQ(json_number(b, "comm_bytes_per_step"), 2 * 4 * json_number(b, "parameters")) << b;
}

// Two servers and a straggler at 3x on 5 ranks, bound 1: every worker's lag stays <= 1 and each
// push follows at most (W - 1)(2B + 1) = 6 others; each server applies every push once; the
// average model learns.
TEST(TrainAlgorithms, AsyncUnderAStragglerStaysWithinTheBound) {
  const auto r = run(kShortMlp + "--strategy=async --servers=2 --staleness-bound=1 "
                     "--straggler=2:3", 5);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string s = last_json_line(r.output);
  const std::string st = json_field(s, "staleness"), ps = json_field(s, "parameter_server");
  EXPECT_LE(json_number(st, "lag_max"), 1) << st;
  EXPECT_EQ(json_number(st, "bound"), 1) << st;
  EXPECT_EQ(json_number(st, "max_allowed"), 6) << st;
  EXPECT_LE(json_number(st, "max"), 6) << st;
  // 2 servers x 3 workers x 10 steps (667 images per worker)
  EXPECT_EQ(json_number(ps, "updates_applied"), 2 * 3 * 10) << ps;
  EXPECT_EQ(json_field(ps, "server_ranks"), "[0, 1]") << ps;
  EXPECT_GT(json_number(s, "test_accuracy"), 0.6) << s;
}

// --batch-assignment=shared on 3 ranks (1 server, 2 workers, worker 0 a straggler at 4x): the
// epoch's 31 batches of 64 (2000 images, the whole set on every rank) are each trained on once,
// split between the workers by who asks first; the server applied 31 pushes; the model learns.
TEST(TrainAlgorithms, AsyncWithSharedBatchesTrainsEachBatchOnce) {
  const auto r = run(kShortMlp + "--strategy=async --batch-assignment=shared --straggler=1:4", 3);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string s = last_json_line(r.output);
  const std::string ps = json_field(s, "parameter_server");
  EXPECT_EQ(json_field(ps, "batch_assignment"), "\"shared\"") << ps;
  EXPECT_EQ(json_number(ps, "updates_applied"), 31) << ps;
  const std::string taken = json_field(ps, "batches_per_worker");
  int a = -1, b = -1;
  ASSERT_EQ(std::sscanf(taken.c_str(), "[%d, %d]", &a, &b), 2) << ps;
  EXPECT_EQ(a + b, 31) << ps;
  EXPECT_GT(json_number(s, "test_accuracy"), 0.6) << s;
  // No --staleness-bound: no bound, said as JSON's null.
  const std::string st = json_field(s, "staleness");
  EXPECT_EQ(json_field(st, "bound"), "null") << st;
  EXPECT_EQ(json_field(st, "max_allowed"), "null") << st;
}

// --collectives=hierarchical on 4 ranks as 2 nodes of 2: the same training as the flat ring (the
// sums differ only in their order), inside each node DDP's n bytes per step (reduce-scatter and
// all-gather over 2), across nodes n/2 (an all-reduce of half the buffer over 2 nodes).
TEST(TrainAlgorithms, HierarchicalDdpTrainsAsFlatDdpWithHalfTheBytesAcrossNodes) {
  const auto flat = run(kShortMlp + "--strategy=ddp", 4);
  ASSERT_EQ(flat.exit_code, 0) << flat.output;
  const auto hier = run(kShortMlp + "--strategy=ddp --collectives=hierarchical --ranks-per-node=2", 4);
  ASSERT_EQ(hier.exit_code, 0) << hier.output;
  const std::string a = last_json_line(flat.output), b = last_json_line(hier.output);
  EXPECT_NEAR(json_number(a, "train_loss"), json_number(b, "train_loss"), 1e-5) << b;
  const std::string c = json_field(b, "collectives");
  ASSERT_FALSE(c.empty()) << b;
  const double bytes = 4 * json_number(b, "parameters");
  EXPECT_EQ(json_number(c, "intra_node_bytes_per_step"), bytes) << c;
  EXPECT_EQ(json_number(c, "inter_node_bytes_per_step"), bytes / 2) << c;
  const auto bad = run(kShortMlp + "--strategy=ddp --tensor-parallel=2 --collectives=hierarchical", 4);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--collectives=hierarchical with --tensor-parallel=2: the hierarchical "
                            "collectives reduce over the world's nodes"),
            std::string::npos) << bad.output;
  const auto uneven = run(kShortMlp + "--strategy=ddp --collectives=hierarchical --ranks-per-node=3", 4);
  EXPECT_EQ(uneven.exit_code, 2) << uneven.output;
  EXPECT_NE(uneven.output.find("--ranks-per-node=3 does not divide the 4 ranks"), std::string::npos)
      << uneven.output;
}

// ZeRO-2 and ZeRO-3 with --collectives=hierarchical on 4 ranks as 2 nodes of 2 (and ZeRO-2
// under bf16 autocast): the same training as over the flat world; across nodes half of what crosses inside them (each level's
// ring over 2: (2-1)/2 of the buffer inside, of half the buffer across). ZeRO-2 per step: a
// reduce-scatter and an all-gather of the 203,530 f32 parameters, n bytes inside and n/2 across.
TEST(TrainAlgorithms, HierarchicalZeroTrainsAsFlatZero) {
  for (const std::string strategy : {"zero2", "zero3", "zero2 --amp=bf16"}) {
    const auto flat = run(kShortMlp + "--strategy=" + strategy, 4);
    ASSERT_EQ(flat.exit_code, 0) << flat.output;
    const auto hier = run(kShortMlp + "--strategy=" + strategy +
                          " --collectives=hierarchical --ranks-per-node=2", 4);
    ASSERT_EQ(hier.exit_code, 0) << hier.output;
    const std::string a = last_json_line(flat.output), b = last_json_line(hier.output);
    EXPECT_NEAR(json_number(a, "train_loss"), json_number(b, "train_loss"), 1e-5) << b;
    const std::string c = json_field(b, "collectives");
    ASSERT_FALSE(c.empty()) << b;
    const double intra = json_number(c, "intra_node_bytes_per_step");
    const double inter = json_number(c, "inter_node_bytes_per_step");
    EXPECT_NEAR(inter, intra / 2, 8) << c;
    if (strategy == "zero2") {
      EXPECT_EQ(intra, 4 * json_number(b, "parameters")) << c;
    }
  }
}

TEST(TrainAlgorithms, AsyncRefusesWhatItCannotDo) {
  const struct {
    std::string flags;
    int ranks;
    std::string message;
  } cases[] = {
      {"--strategy=async --servers=3", 3, "--servers=3 on 3 ranks leaves no worker"},
      {"--strategy=async --straggler=0:2", 3, "names a parameter server"},
      {"--strategy=async --amp=fp16", 3, "not loss scaling or half parameters"},
      {"--strategy=ddp --staleness-bound=2", 2, "--staleness-bound needs --strategy=async"},
      {"--strategy=async --checkpoint-format=sharded --checkpoint-dir=/tmp/x", 3,
       "the sharded format writes ZeRO's shards"},
      {"--strategy=async --staleness-bound=-3", 3, "--staleness-bound expects an integer >= 0"},
      {"--strategy=async --batch-assignment=shared --staleness-bound=1", 3,
       "use --staleness-bound=none"},
      {"--strategy=ddp --batch-assignment=shared", 2, "--batch-assignment needs --strategy=async"},
  };
  for (const auto& c : cases) {
    const auto r = run(kShortMlp + c.flags, c.ranks);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << "\n" << r.output;
  }
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
