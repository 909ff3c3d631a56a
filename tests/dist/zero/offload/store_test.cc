// The offload stores in one process: segments written and read back byte for byte through the
// disk tier's I/O pool (O_DIRECT on this file system) and the host tier, the bytes counted, the
// job directory and its files removed at destruction, a killed run's directory found and removed
// at the next start while a live one's is kept, and the errors (not a directory, too little free
// space, an I/O failure carried back from the I/O thread) naming the values.
#include "dist/zero/offload/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace offload {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / ("offload_store_" + name);
  fs::remove_all(dir);
  return dir.string();
}

// Writes `count` segments of different sizes, then reads them back in another order, all
// requests in flight at once; every byte must come back.
void round_trip(OffloadStore& store) {
  const std::vector<int64_t> numels = {1024, 3000, 1, 70000};
  std::vector<Segment> segments;
  for (int64_t n : numels) segments.push_back(store.reserve(n * 4));
  store.commit();
  Generator g(3);
  std::vector<Tensor> values;
  std::vector<StagingBuffer> out, in;
  std::vector<IoRequest> requests;
  for (size_t i = 0; i < numels.size(); ++i) {
    values.push_back(randn({numels[i]}, kF32, &g));
    out.emplace_back(numels[i] * 4, false);
    in.emplace_back(numels[i] * 4, false);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(out.back().data()) % kBlockBytes, 0u);
    out.back().view(kF32, numels[i]).copy_(values.back());
    requests.push_back(store.write(segments[i], out[i]));
  }
  for (const IoRequest& r : requests) r.wait();
  requests.clear();
  for (size_t i = numels.size(); i-- > 0;) requests.push_back(store.read(segments[i], in[i]));
  for (const IoRequest& r : requests) r.wait();
  int64_t bytes = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    EXPECT_TRUE(allclose(in[i].view(kF32, numels[i]), values[i], 0, 0)) << "segment " << i;
    bytes += round_up_to_block(numels[i] * 4);
  }
  EXPECT_EQ(store.reserved_bytes(), bytes);
  EXPECT_EQ(store.bytes_written(), bytes);
  EXPECT_EQ(store.bytes_read(), bytes);
}

TEST(DiskStore, RoundTripsSegmentsAndRemovesItsFilesAtDestruction) {
  const std::string dir = scratch("round_trip");
  std::string job, file;
  {
    DiskStore store(dir, 3, "test");
    job = store.directory().path();
    file = store.file();
    round_trip(store);
    EXPECT_TRUE(store.direct()) << "ext4 takes O_DIRECT";
    EXPECT_TRUE(fs::exists(file));
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(file)), store.reserved_bytes());
    EXPECT_TRUE(fs::exists(job + ".lock"));
  }
  EXPECT_FALSE(fs::exists(job));
  EXPECT_FALSE(fs::exists(job + ".lock"));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(HostStore, RoundTripsSegments) {
  HostStore store;
  round_trip(store);
}

// A child process makes its job directory, writes a file and dies by SIGKILL (no destructor
// runs). The next start in that directory removes it; a live job's directory stays.
TEST(JobDirectory, RemovesAKilledRunsFilesAtTheNextStartAndKeepsLiveOnes) {
  const std::string dir = scratch("stale");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    JobDirectory killed(dir, "child");
    std::ofstream(killed.path() + "/optimizer_state.bin") << "state";
    const std::string path = killed.path() + "\n";
    if (write(pipe_fds[1], path.data(), path.size()) < 0) _exit(2);
    pause();  // until killed
    _exit(1);
  }
  close(pipe_fds[1]);
  char buffer[4096] = {0};
  ASSERT_GT(read(pipe_fds[0], buffer, sizeof(buffer) - 1), 0);
  const std::string stale = std::string(buffer).substr(0, std::string(buffer).find('\n'));
  JobDirectory live(dir, "live");  // the child still runs: its directory is not stale
  EXPECT_TRUE(live.removed_stale().empty());
  EXPECT_TRUE(fs::exists(stale + "/optimizer_state.bin"));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(pipe_fds[0]);
  JobDirectory next(dir, "next");
  ASSERT_EQ(next.removed_stale().size(), 1u);
  EXPECT_EQ(next.removed_stale()[0], stale);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale + ".lock"));
  EXPECT_TRUE(fs::exists(live.path()));
  EXPECT_NE(live.path(), next.path());
}

TEST(JobDirectory, ErrorsNameTheDirectoryAndTheBytes) {
  const std::string dir = scratch("errors");
  fs::create_directories(dir);
  const std::string file = dir + "/a_file";
  std::ofstream(file) << "x";
  expect_error([&] { DiskStore store(file, 1, "ZeroRedundancyOptimizer"); },
               "offload directory '" + file + "' is not a directory and cannot be created");
  expect_error([&] { DiskStore store(file + "/below", 1, "ZeroRedundancyOptimizer"); },
               "is not a directory and cannot be created");
  const int64_t petabyte = int64_t{1} << 50;
  expect_error([&] { check_free_space(dir, petabyte, "who"); },
               "but the state offloaded to it needs " + std::to_string(petabyte) + " bytes");
  // The store checks its reserved bytes at commit(), before anything is written.
  DiskStore store(dir, 1, "who");
  store.reserve(petabyte);
  expect_error([&] { store.commit(); }, "who: the offload directory");
}

TEST(IoPool, CarriesAnIoErrorBackToTheWaitingThread) {
  IoPool pool(2);
  StagingBuffer buffer(4096, false);
  const IoRequest r = pool.read(-1, "/no/such/file", buffer.data(), 4096, 8192);
  expect_error([&] { r.wait(); },
               "reading 4096 bytes at offset 8192 of '/no/such/file' failed after 0: Bad file descriptor");
}

TEST(Offload, ValidatesItsOptions) {
  expect_error([] { Offload().optimizer(OffloadTier::kDisk).validate("who"); },
               "who: the disk tier holds the optimizer state but no directory was given");
  expect_error([] { Offload().piece_numel(1000).validate("who"); },
               "piece_numel must be a positive multiple of 1024 (whole 4 KiB blocks of f32), got 1000");
  expect_error([] { Offload().io_threads(0).validate("who"); }, "io_threads must be at least 1, got 0");
  expect_error([] { Offload().params(OffloadTier::kDisk).optimizer(OffloadTier::kHost).validate("who"); },
               "who: the disk tier holds the parameters but no directory was given");
  expect_error([] { Offload().gradients(OffloadTier::kHost).validate("who"); },
               "who: parameters (device) and gradients (host) are offloaded but the optimizer state "
               "stays on the device");
  const Offload all = Offload().all(OffloadTier::kHost);
  EXPECT_TRUE(all.shards() && all.any());
  EXPECT_EQ(all.params(), OffloadTier::kHost);
  EXPECT_EQ(all.gradients(), OffloadTier::kHost);
  EXPECT_EQ(all.optimizer(), OffloadTier::kHost);
  EXPECT_FALSE(Offload().optimizer(OffloadTier::kDisk).shards());
  EXPECT_EQ(parse_offload_tier("disk"), OffloadTier::kDisk);
  expect_error([] { parse_offload_tier("nvme"); }, "offload tier 'nvme' is not one of device, host, disk");
}

}  // namespace
}  // namespace offload
}  // namespace dist
}  // namespace tessera
