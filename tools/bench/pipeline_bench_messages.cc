#include "tools/bench/pipeline_bench_messages.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "dist/mpi_check.h"
#include "pipeline/p2p.h"
#include "pipeline/trace_stats.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace bench {
namespace {

constexpr int kHeaderBytes = 128;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One ping-pong: `trips` round trips started by rank 0. Returns rank 0's one-way time.
using PingPong = std::function<void(int trips)>;

double time_one_way(MPI_Comm comm, const PingPong& ping_pong, int trips) {
  MPI_CHECK(MPI_Barrier(comm));
  const auto start = std::chrono::steady_clock::now();
  ping_pong(trips);
  return seconds_since(start) / (2.0 * trips);
}

// MPI_Send / MPI_Recv of the payload alone.
PingPong mpi_ping_pong(MPI_Comm comm, int rank, std::vector<char>& out, std::vector<char>& in) {
  return [comm, rank, &out, &in](int trips) {
    const int n = static_cast<int>(out.size()), peer = 1 - rank;
    for (int i = 0; i < trips; ++i) {
      if (rank == 0) {
        MPI_CHECK(MPI_Send(out.data(), n, MPI_BYTE, peer, 1, comm));
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_BYTE, peer, 1, comm, MPI_STATUS_IGNORE));
      } else {
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_BYTE, peer, 1, comm, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(out.data(), n, MPI_BYTE, peer, 1, comm));
      }
    }
  };
}

// The header and the payload as one message: a derived datatype gathers both (the receiver
// takes header and payload into one buffer).
PingPong mpi_one_message(MPI_Comm comm, int rank, MPI_Datatype header_and_payload,
                         std::vector<char>& in) {
  return [comm, rank, header_and_payload, &in](int trips) {
    const int n = static_cast<int>(in.size()), peer = 1 - rank;
    for (int i = 0; i < trips; ++i) {
      if (rank == 0) {
        MPI_CHECK(MPI_Send(MPI_BOTTOM, 1, header_and_payload, peer, 2, comm));
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_BYTE, peer, 2, comm, MPI_STATUS_IGNORE));
      } else {
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_BYTE, peer, 2, comm, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(MPI_BOTTOM, 1, header_and_payload, peer, 2, comm));
      }
    }
  };
}

// The header and the payload as two messages; each rank posts its next two receives as soon as
// it has taken the last ones.
PingPong mpi_two_messages(MPI_Comm comm, int rank, std::vector<char>& header,
                          std::vector<char>& out, std::vector<char>& header_in,
                          std::vector<char>& in) {
  return [=, &header, &out, &header_in, &in](int trips) {
    const int n = static_cast<int>(out.size()), peer = 1 - rank;
    MPI_Request posted[2];
    auto post = [&] {
      MPI_CHECK(MPI_Irecv(header_in.data(), kHeaderBytes, MPI_BYTE, peer, 3, comm, &posted[0]));
      MPI_CHECK(MPI_Irecv(in.data(), n, MPI_BYTE, peer, 4, comm, &posted[1]));
    };
    auto send = [&] {
      MPI_Request sends[2];
      MPI_CHECK(MPI_Isend(header.data(), kHeaderBytes, MPI_BYTE, peer, 3, comm, &sends[0]));
      MPI_CHECK(MPI_Isend(out.data(), n, MPI_BYTE, peer, 4, comm, &sends[1]));
      MPI_CHECK(MPI_Waitall(2, sends, MPI_STATUSES_IGNORE));
    };
    auto receive = [&](bool more) {
      MPI_CHECK(MPI_Waitall(2, posted, MPI_STATUSES_IGNORE));
      if (more) post();
    };
    post();
    for (int i = 0; i < trips; ++i) {
      if (rank == 0) {
        send();
        receive(i + 1 < trips);
      } else {
        receive(i + 1 < trips);
        send();
      }
    }
  };
}

// Mailbox::send_tensor / recv_tensor as the executor calls them: an activation to rank 1, its
// gradient back; each batch announces its receives first (as an action list does).
PingPong tessera_ping_pong(pipeline::Mailbox& mailbox, int rank, const Tensor& out) {
  return [&mailbox, rank, out](int trips) {
    using pipeline::MessageKind;
    const MessageKind in_kind = rank == 0 ? MessageKind::kGradient : MessageKind::kActivation;
    const MessageKind out_kind = rank == 0 ? MessageKind::kActivation : MessageKind::kGradient;
    mailbox.expect(1 - rank, in_kind, trips);
    for (int i = 0; i < trips; ++i) {
      if (rank == 0) {
        auto sends = mailbox.send_tensor(out, 1, out_kind, i, 0);
        mailbox.recv_tensor(1, in_kind, i, 1);
        for (auto& w : sends) w->wait();
      } else {
        mailbox.recv_tensor(0, in_kind, i, 0);
        auto sends = mailbox.send_tensor(out, 0, out_kind, i, 1);
        for (auto& w : sends) w->wait();
      }
    }
  };
}

// A receive of a message that has already arrived while the receiver was busy (as a stage is,
// computing, when its next input comes): rank 1 sends, rank 0 spins for `busy` seconds without
// calling MPI, then times the receive call alone; a one-byte acknowledgement starts the next.
// Returns rank 0's receive times.
using Receive = std::function<void(int i)>;
using Send = std::function<void(int i)>;

std::vector<double> time_arrived_receives(MPI_Comm comm, int rank, const Send& send,
                                          const Receive& receive, int trips, double busy) {
  std::vector<double> took;
  char ack = 0;
  MPI_CHECK(MPI_Barrier(comm));
  for (int i = 0; i < trips; ++i) {
    if (rank == 1) {
      send(i);
      MPI_CHECK(MPI_Recv(&ack, 1, MPI_BYTE, 0, 9, comm, MPI_STATUS_IGNORE));
    } else {
      const auto spin = std::chrono::steady_clock::now();
      while (seconds_since(spin) < busy) {
      }
      const auto start = std::chrono::steady_clock::now();
      receive(i);
      took.push_back(seconds_since(start));
      MPI_CHECK(MPI_Send(&ack, 1, MPI_BYTE, 1, 9, comm));
    }
  }
  return took;
}

std::string cell(std::vector<double> one_way) {
  std::sort(one_way.begin(), one_way.end());
  char text[64];
  std::snprintf(text, sizeof(text), "%7.1f (%.1f-%.1f)", pipeline::median(one_way) * 1e6,
                one_way.front() * 1e6, one_way.back() * 1e6);
  return text;
}

}  // namespace

void run_message_bench(const std::shared_ptr<dist::ProcessGroup>& world,
                       const MessageBenchOptions& options) {
  TS_CHECK(world->size() == 2, "pipeline_bench --messages: needs 2 ranks, got ", world->size());
  const int rank = world->rank();
  MPI_Comm comm;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  if (rank == 0) {
    std::printf("pipeline_bench --messages: one-way time of a message between 2 ranks, us: median of "
                "%d batches (fastest-slowest batch)\n", options.batches);
    std::printf("%9s | %-24s | %-24s | %-24s | %-24s | %s\n", "bytes", "MPI", "MPI 1 msg (gathered)",
                "MPI 2 msgs (pre-posted)", "send/recv_tensor", "send/recv / MPI");
  }
  pipeline::Mailbox mailbox(world);
  struct Arrived {
    int64_t bytes;
    std::vector<double> mpi, tessera;
  };
  std::vector<Arrived> arrived;
  for (const int64_t bytes : options.sizes) {
    TS_CHECK(bytes >= 1024 && bytes % 1024 == 0, "pipeline_bench --messages: a size of ", bytes,
             " bytes is not a positive multiple of 1024");
    const int n = static_cast<int>(bytes);
    std::vector<char> header(kHeaderBytes, 1), header_in(kHeaderBytes), out(n, 2), in(n),
        gathered_in(n + kHeaderBytes);
    MPI_Datatype header_and_payload;
    {
      int lengths[2] = {kHeaderBytes, n};
      MPI_Aint at[2];
      MPI_CHECK(MPI_Get_address(header.data(), &at[0]));
      MPI_CHECK(MPI_Get_address(out.data(), &at[1]));
      MPI_CHECK(MPI_Type_create_hindexed(2, lengths, at, MPI_BYTE, &header_and_payload));
      MPI_CHECK(MPI_Type_commit(&header_and_payload));
    }
    Generator g(static_cast<uint64_t>(bytes));
    const Tensor tensor = randn({bytes / 1024, 256}, kF32, &g);
    const std::vector<PingPong> ping_pongs = {
        mpi_ping_pong(comm, rank, out, in),
        mpi_one_message(comm, rank, header_and_payload, gathered_in),
        mpi_two_messages(comm, rank, header, out, header_in, in),
        tessera_ping_pong(mailbox, rank, tensor),
    };
    // About 20 ms a batch.
    const double guess = 3e-6 + static_cast<double>(bytes) / 1e10;
    const int trips = std::max(5, std::min(2000, static_cast<int>(2e-2 / (2 * guess))));
    std::vector<std::vector<double>> one_way(ping_pongs.size());
    for (int b = 0; b < options.batches + 1; ++b) {
      for (size_t k = 0; k < ping_pongs.size(); ++k) {
        const double t = time_one_way(comm, ping_pongs[k], trips);
        if (b > 0) one_way[k].push_back(t);  // the first batch warms up
      }
    }
    MPI_CHECK(MPI_Type_free(&header_and_payload));
    if (rank == 0) {
      std::printf("%9lld | %-24s | %-24s | %-24s | %-24s | %.2f\n", static_cast<long long>(bytes),
                  cell(one_way[0]).c_str(), cell(one_way[1]).c_str(), cell(one_way[2]).c_str(),
                  cell(one_way[3]).c_str(),
                  pipeline::median(one_way[3]) / pipeline::median(one_way[0]));
      std::fflush(stdout);
    }
    // The receive of an arrived message: MPI_Recv against recv_tensor.
    const double busy = 2e-5 + 4 * pipeline::median(one_way[0]);
    const int arrivals = std::max(20, std::min(500, static_cast<int>(0.3 / (busy + 2 * guess))));
    MPI_Request request;
    const std::vector<double> mpi_receive = time_arrived_receives(
        comm, rank,
        [&](int) {
          MPI_CHECK(MPI_Isend(out.data(), n, MPI_BYTE, 0, 5, comm, &request));
          MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        },
        [&](int) { MPI_CHECK(MPI_Recv(in.data(), n, MPI_BYTE, 1, 5, comm, MPI_STATUS_IGNORE)); },
        arrivals, busy);
    const std::vector<double> tessera_receive = time_arrived_receives(
        comm, rank,
        [&](int i) {
          for (auto& w : mailbox.send_tensor(tensor, 0, pipeline::MessageKind::kActivation, i, 0)) {
            w->wait();
          }
        },
        [&](int i) {
          if (i == 0) mailbox.expect(1, pipeline::MessageKind::kActivation, arrivals);
          mailbox.recv_tensor(1, pipeline::MessageKind::kActivation, i, 0);
        },
        arrivals, busy);
    if (rank == 0) arrived.push_back({bytes, mpi_receive, tessera_receive});
  }
  if (rank == 0) {
    std::printf("\nthe receive call alone, of a message that arrived while the receiver computed, "
                "us: median (fastest-slowest)\n");
    std::printf("%9s | %-24s | %-24s | %s\n", "bytes", "MPI_Recv", "recv_tensor",
                "recv_tensor / MPI_Recv");
    for (const auto& a : arrived) {
      std::printf("%9lld | %-24s | %-24s | %.2f\n", static_cast<long long>(a.bytes),
                  cell(a.mpi).c_str(), cell(a.tessera).c_str(),
                  pipeline::median(a.tessera) / pipeline::median(a.mpi));
    }
  }
  MPI_CHECK(MPI_Comm_free(&comm));
}

}  // namespace bench
}  // namespace tessera
