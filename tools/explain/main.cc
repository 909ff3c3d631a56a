// explain: teaching views and predictions, printed without training anything.
//
//   bazel run //tools:explain -- pipeline --stages=4 --micro-batches=8 --schedule=1f1b
//   bazel run //tools:explain -- pipeline --stages=4 --micro-batches=8 --schedule=zb-h1 --backward-ratio=2
//   bazel run //tools:explain -- memory --model=resnet50 --ranks=64 --precision=mixed --optimizer=adam
//   mpirun -np 2 bazel-bin/tools/explain memory --measure --model=mlp   (measured beside predicted)
//   bazel run //tools:explain -- comm --model=mlp --ranks=4
//   bazel run //tools:explain -- scaling --model=resnet50 --strategy=ddp --latency-us=5 --bandwidth-gbps=100
//   bazel run //tools:explain -- ddp --trace=/tmp/ddp.json        (train --strategy=ddp --trace=...)
//   bazel run //tools:explain -- zero3 --trace=/tmp/zero3.json    (train --strategy=zero3 --trace=...)
//   bazel run //tools:explain -- step --trace=/tmp/tp.json        (any strategy's trace)
//   bazel run //tools:explain -- curves --metrics=/tmp/a.jsonl,/tmp/b.jsonl --plot=/tmp/curves.svg
//   bazel run //tools:explain -- report /tmp/run --html=/tmp/run.html   (a run's directory)
//
// Each subcommand lives in its own file (commands.h); every one has --help, a readable table,
// --json (one JSON object per line) and --plot=FILE.svg. The models behind them are cost/'s.
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tools/explain/commands.h"

namespace {

const char* const kUsage =
    "usage: explain <subcommand> [--flags] (explain <subcommand> --help for its flags)\n"
    "  ring       the ring all-reduce step by step: which chunk each rank sends and receives\n"
    "  pipeline   a schedule's grid, peak in flight and bubble (GPipe, 1F1B, interleaved, ZB-H1/H2)\n"
    "  memory     model-state bytes per rank: DDP, ZeRO-1/2/3, a pipeline stage, a tensor-parallel rank\n"
    "             (--measure: a real step of DDP, ZeRO-1/2/3, a pipeline, tensor parallelism: measured)\n"
    "  comm       bytes each rank sends per step, per strategy and collective\n"
    "  scaling    predicted step time, images/s and scaling efficiency from 1 to 4096 ranks\n"
    "  profile    a model's per-layer times measured here, as the stored profile scaling uses\n"
    "  ddp        a traced DDP step: backward per layer, each bucket's all-reduce, overlap\n"
    "  zero3      a traced ZeRO-3 step: each unit's all-gather, free and reduce-scatter in order\n"
    "  step       any strategy's traced step: its events, time per kind, communication hidden\n"
    "  curves     training curves of train --metrics files: loss, accuracy, loss scale, images/s\n"
    "  report     one self-contained HTML page of a run: curves, step timeline, memory, bytes, flags\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::explain;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    // explain report RUN ...: the run's directory may come first, as --run=RUN.
    std::vector<std::string> args(argv, argv + argc);
    if (command == "report" && argc > 2 && std::string(argv[2]).rfind("--", 0) != 0) {
      args[2] = "--run=" + args[2];
    }
    std::vector<char*> pointers;
    for (std::string& a : args) pointers.push_back(a.data());
    Flags flags(argc, pointers.data(), 2);
    if (command == "pipeline") return pipeline_command(flags);
    if (command == "memory") return memory_command(flags);
    if (command == "comm") return comm_command(flags);
    if (command == "scaling") return scaling_command(flags);
    if (command == "ddp") return ddp_command(flags);
    if (command == "zero3") return zero3_command(flags);
    if (command == "step") return step_command(flags);
    if (command == "ring") return ring_command(flags);
    if (command == "curves") return curves_command(flags);
    if (command == "profile") return profile_command(flags);
    if (command == "report") return report_command(flags);
    std::fprintf(stderr, "explain: unknown subcommand '%s'\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "explain %s: %s\n", command.c_str(), e.message().c_str());
    return 1;
  }
}
