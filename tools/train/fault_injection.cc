#include "tools/train/fault_injection.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tensor/check.h"

namespace tessera {
namespace train {

namespace {

constexpr const char* kForms =
    "crash:RANK:STEP, stall:RANK:STEP, crash-in-epoch:RANK:EPOCH or "
    "crash-in-save:RANK:STEP:mid-shard|before-index|mid-index";

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t colon; (colon = text.find(':', begin)) != std::string::npos; begin = colon + 1) {
    parts.push_back(text.substr(begin, colon - begin));
  }
  parts.push_back(text.substr(begin));
  return parts;
}

[[noreturn]] void die(int rank, const std::string& what) {
  std::fprintf(stderr, "[rank %d] --inject-fault: crashing %s\n", rank, what.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::abort();  // not reached
}

}  // namespace

FaultInjection FaultInjection::parse(const std::string& text) {
  const std::vector<std::string> parts = split(text);
  const std::string& kind = parts[0];
  TS_CHECK(kind == "crash" || kind == "stall" || kind == "crash-in-epoch" || kind == "crash-in-save",
           "inject-fault '", text, "': the kind is crash, stall, crash-in-epoch or crash-in-save, "
           "got '", kind, "' (expected ", kForms, ")");
  const size_t fields = kind == "crash-in-save" ? 4 : 3;
  TS_CHECK(parts.size() == fields, "inject-fault '", text, "': expected ", kForms);
  const std::string &rank = parts[1], &step = parts[2];
  char* end = nullptr;
  const long r = std::strtol(rank.c_str(), &end, 10);
  TS_CHECK(!rank.empty() && *end == '\0' && r >= 0 && r < (1 << 24), "inject-fault '", text,
           "': rank '", rank, "' is not a rank");
  const long long s = std::strtoll(step.c_str(), &end, 10);
  const char* unit = kind == "crash-in-epoch" ? "epoch" : "step";
  TS_CHECK(!step.empty() && *end == '\0' && s >= 1, "inject-fault '", text, "': ", unit, " '",
           step, "' is not ", kind == "crash-in-epoch" ? "an" : "a", " ", unit, " >= 1");
  FaultInjection f;
  f.kind_ = kind == "crash"            ? Kind::kCrash
            : kind == "stall"          ? Kind::kStall
            : kind == "crash-in-epoch" ? Kind::kCrashInEpoch
                                       : Kind::kCrashInSave;
  f.rank_ = static_cast<int>(r);
  f.step_ = s;
  if (f.kind_ == Kind::kCrashInSave) {
    f.phase_ = parts[3];
    TS_CHECK(f.phase_ == "mid-shard" || f.phase_ == "before-index" || f.phase_ == "mid-index",
             "inject-fault '", text, "': the phase is mid-shard, before-index or mid-index, got '",
             f.phase_, "'");
  }
  return f;
}

void FaultInjection::after_step(int my_rank, int64_t step, int64_t epoch, int64_t batch) const {
  if (kind_ == Kind::kCrashInSave || my_rank != rank_) return;
  if (kind_ == Kind::kCrashInEpoch) {
    if (epoch == step_ && batch == 1) {
      die(my_rank, "at step " + std::to_string(step) + ", the first of epoch " + std::to_string(epoch));
    }
    return;
  }
  if (step != step_) return;
  if (kind_ == Kind::kCrash) die(my_rank, "at step " + std::to_string(step));
  std::fprintf(stderr, "[rank %d] --inject-fault: stalling at step %lld\n", my_rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(3600));
}

void FaultInjection::at_save_phase(int my_rank, const std::string& phase) const {
  if (kind_ != Kind::kCrashInSave || my_rank != rank_ || phase != phase_) return;
  die(my_rank, "in a checkpoint save (" + phase + ")");
}

}  // namespace train
}  // namespace tessera
