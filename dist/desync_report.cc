#include "dist/desync_report.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/collective_timeout.h"

namespace tessera {
namespace dist {

namespace {

constexpr int kQueryTag = 1, kAnswerTag = 2;

MPI_Comm channel = MPI_COMM_NULL;
std::mutex answering;  // one thread answers at a time
// Answers for a rank that is in none of tessera's waits (computing, stalled in its own code, or
// ending: dist::finalize), every kAnswerPeriod.
std::thread answerer;
std::atomic<bool> answerer_stop{false};
constexpr auto kAnswerPeriod = std::chrono::milliseconds(20);
// Answers in flight: their buffers live until the process ends (a few per timeout at most).
std::deque<std::string>& answers_sent() {
  static auto* sent = new std::deque<std::string>;
  return *sent;
}

}  // namespace

void start_desync_channel() {
  if (channel != MPI_COMM_NULL) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &channel);
  int size = 1;
  MPI_Comm_size(channel, &size);
  if (size < 2) return;
  answerer_stop = false;
  answerer = std::thread([] {
    while (!answerer_stop.load()) {
      answer_desync_queries();
      std::this_thread::sleep_for(kAnswerPeriod);
    }
  });
}

void stop_desync_channel() {
  if (answerer.joinable()) {
    answerer_stop = true;
    answerer.join();
  }
  std::lock_guard<std::mutex> lock(answering);
  if (channel == MPI_COMM_NULL) return;
  MPI_Comm_free(&channel);
  channel = MPI_COMM_NULL;
}

void answer_desync_queries() {
  if (channel == MPI_COMM_NULL) return;
  std::unique_lock<std::mutex> lock(answering, std::try_to_lock);
  if (!lock.owns_lock() || channel == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, channel, &arrived, &status) != MPI_SUCCESS ||
        !arrived) {
      return;
    }
    int asker = 0;
    MPI_Recv(&asker, 1, MPI_INT, status.MPI_SOURCE, kQueryTag, channel, MPI_STATUS_IGNORE);
    answers_sent().push_back(describe_waits());
    const std::string& answer = answers_sent().back();
    MPI_Request request;
    MPI_Isend(answer.data(), static_cast<int>(answer.size()), MPI_CHAR, status.MPI_SOURCE,
              kAnswerTag, channel, &request);
    MPI_Request_free(&request);
  }
}

std::string desync_report(double answer_seconds) {
  if (channel == MPI_COMM_NULL) return "";
  int me = 0, size = 1;
  MPI_Comm_rank(channel, &me);
  MPI_Comm_size(channel, &size);
  if (size < 2) return "";
  const std::string mine = describe_waits();  // as of the timeout, before the answers' window
  static int query_from;  // the queries' payload: this rank (lives on: sends are not awaited)
  query_from = me;
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    MPI_Request request;
    MPI_Isend(&query_from, 1, MPI_INT, r, kQueryTag, channel, &request);
    MPI_Request_free(&request);  // a dead or stalled rank never receives it
  }
  std::map<int, std::string> answers;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(answer_seconds));
  while (static_cast<int>(answers.size()) < size - 1 && std::chrono::steady_clock::now() < deadline) {
    answer_desync_queries();  // another rank may be timing out and asking too
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, channel, &arrived, &status);
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string answer(static_cast<size_t>(length), '\0');
    MPI_Recv(answer.data(), length, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, channel,
             MPI_STATUS_IGNORE);
    answers[status.MPI_SOURCE] = answer;
  }
  char window[32];
  std::snprintf(window, sizeof window, "%g", answer_seconds);
  std::string report = std::string("\ndesync report (each rank's answer within ") + window + " s):";
  for (int r = 0; r < size; ++r) {
    report += "\n  rank " + std::to_string(r) + ": ";
    if (r == me) {
      report += mine + " (this rank)";
    } else if (answers.count(r) != 0) {
      report += answers[r];
    } else {
      report += "no answer: dead, frozen whole, or past dist::finalize";
    }
  }
  return report;
}

}  // namespace dist
}  // namespace tessera
