// What offloading the optimizer state costs, per tier, and whether the disk tier hides its I/O
// (issue 52): one rank's shard of E elements (f32; Adam, so 2 E state elements), stepped by
// zero::GroupedShardOptimizer with its state on the device (in memory), in host memory and on
// disk, the median step time of each; and in the same run the disk's own bandwidth through the
// same store (DiskStore: O_DIRECT, 4 KiB-aligned blocks of one piece, the I/O pool), writes then
// reads of the state's bytes. The disk step is then set beside the bound its design aims at:
// max(the in-memory step, bytes read / read bandwidth + bytes written / write bandwidth).
//
//   bazel-bin/tools/bench/offload_bench [--elements=16777216] [--piece=1048576] [--dir=/tmp]
//                                       [--steps=5] [--io-threads=2] [--clock=cpu]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "dist/zero/offload/store.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tools/bench/bench_clock.h"
#include "tools/bench/median.h"

namespace tessera {
namespace {

struct Options {
  int64_t elements = int64_t{1} << 24;
  int64_t piece = int64_t{1} << 20;
  std::string dir = "/tmp";
  int steps = 5;
  int io_threads = 2;
};

struct Bandwidth {
  double write_gbps = 0, read_gbps = 0;  // GB/s (1e9 bytes)
};

// The state's bytes written and read back through a DiskStore of the same piece size.
Bandwidth measure_disk(const Options& o) {
  using namespace dist::offload;
  DiskStore store(o.dir, o.io_threads, "offload_bench");
  std::vector<Segment> segments;
  for (int64_t at = 0; at < 2 * o.elements; at += o.piece) {
    segments.push_back(store.reserve(std::min(o.piece, 2 * o.elements - at) * 4));
  }
  store.commit();
  std::vector<StagingBuffer> buffers;
  for (int i = 0; i < 4; ++i) buffers.emplace_back(o.piece * 4, false);
  for (StagingBuffer& b : buffers) b.view(kF32, o.piece).fill_(1.0);
  // Four transfers in flight, as the swapper keeps up to four (two reads, two writes).
  const auto run = [&](bool write) {
    std::vector<IoRequest> inflight(buffers.size());
    const double t0 = bench::now_ms();
    for (size_t s = 0; s < segments.size(); ++s) {
      IoRequest& slot = inflight[s % inflight.size()];
      slot.wait();
      const StagingBuffer& b = buffers[s % buffers.size()];
      slot = write ? store.write(segments[s], b) : store.read(segments[s], b);
    }
    for (const IoRequest& r : inflight) r.wait();
    return static_cast<double>(store.reserved_bytes()) / ((bench::now_ms() - t0) * 1e6);
  };
  Bandwidth b;
  b.write_gbps = run(true);
  b.read_gbps = run(false);
  return b;
}

struct TierResult {
  double step_ms = 0;
  int64_t read_bytes = 0, written_bytes = 0;  // per step
};

TierResult measure_tier(const Options& o, const dist::Offload& offload) {
  Generator g(1);
  Variable p(randn({o.elements}, kF32, &g), true);
  p.set_name("w");
  dist::zero::FlatShard shard;
  shard.params = {p};
  shard.layout = dist::zero::flat_layout({o.elements});
  shard.range = {0, o.elements};
  shard.shard = Variable(p.data().clone(), true);
  dist::zero::GroupedShardOptimizer opt(
      {shard}, {optim::ParamGroup({p})},
      dist::zero::grouped_factory<optim::Adam>(optim::AdamOptions(1e-3)), offload);
  shard.shard.set_grad(randn({o.elements}, kF32, &g));
  opt.step();  // the state is made (and, offloaded, written once)
  std::vector<double> times;
  for (int s = 0; s < o.steps; ++s) {
    const double t0 = bench::now_ms();
    opt.step();
    times.push_back(bench::now_ms() - t0);
  }
  TierResult r;
  r.step_ms = bench::median(times);
  if (const auto* swapper = opt.swapper()) {
    r.read_bytes = swapper->last_step_read();
    r.written_bytes = swapper->last_step_written();
  }
  return r;
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (bench::parse_clock_flag(argv[i])) continue;
    if (a.rfind("--elements=", 0) == 0) o.elements = std::stoll(a.substr(11));
    else if (a.rfind("--piece=", 0) == 0) o.piece = std::stoll(a.substr(8));
    else if (a.rfind("--dir=", 0) == 0) o.dir = a.substr(6);
    else if (a.rfind("--steps=", 0) == 0) o.steps = std::stoi(a.substr(8));
    else if (a.rfind("--io-threads=", 0) == 0) o.io_threads = std::stoi(a.substr(13));
    else {
      std::fprintf(stderr, "offload_bench: unknown flag %s (--elements --piece --dir --steps "
                   "--io-threads --clock=cpu)\n", argv[i]);
      return 2;
    }
  }
  const Bandwidth bw = measure_disk(o);
  std::printf("shard %lld f32 elements (Adam state %.1f MB), pieces of %lld elements, %s, %d I/O threads\n",
              static_cast<long long>(o.elements), 8.0 * o.elements / 1e6,
              static_cast<long long>(o.piece), o.dir.c_str(), o.io_threads);
  std::printf("disk through the store: write %.2f GB/s, read %.2f GB/s\n", bw.write_gbps, bw.read_gbps);
  const auto base = dist::Offload().piece_numel(o.piece).io_threads(o.io_threads);
  const TierResult device = measure_tier(o, dist::Offload(base));
  const TierResult host = measure_tier(o, dist::Offload(base).optimizer(dist::OffloadTier::kHost));
  const TierResult disk =
      measure_tier(o, dist::Offload(base).optimizer(dist::OffloadTier::kDisk).dir(o.dir));
  std::printf("%-8s %10s %8s %14s %14s\n", "tier", "step ms", "x device", "read MB/step", "written MB/step");
  for (const auto& [name, r] : {std::pair<const char*, TierResult>{"device", device},
                                {"host", host}, {"disk", disk}}) {
    std::printf("%-8s %10.1f %8.2f %14.1f %14.1f\n", name, r.step_ms, r.step_ms / device.step_ms,
                r.read_bytes / 1e6, r.written_bytes / 1e6);
  }
  const double io_ms = disk.read_bytes / (bw.read_gbps * 1e6) + disk.written_bytes / (bw.write_gbps * 1e6);
  const double bound = std::max(device.step_ms, io_ms);
  std::printf("disk step against max(device step %.1f ms, I/O at the measured bandwidth %.1f ms) = "
              "%.1f ms: %.2fx\n", device.step_ms, io_ms, bound, disk.step_ms / bound);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::run(argc, argv); }
