// Stage-to-stage messages (pipeline/p2p.h) between ranks 0 and 1: tensors arrive intact through
// pre-posted, reused buffers whatever their sizes do (first messages, growth, a smaller last
// batch); a message that is not the expected one is an error naming both; the byte ledger and
// network emulation see every message. Each test uses a group of its own, so a test that ends
// in an error cannot leave messages for the next.
#include <gtest/gtest.h>

#include <vector>

#include "dist/environment.h"
#include "pipeline/p2p.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace pipeline {
namespace {

using testing::expect_error;

// Ranks 0 and 1 of the world (others sit the test out with nullptr).
std::shared_ptr<dist::ProcessGroup> pair_group() { return dist::new_group({0, 1}); }

Tensor numbered(const Shape& shape, DType dtype, int seed) {
  return add(mul(arange(numel(shape), kF64), 0.5), seed).to(dtype).reshape(shape);
}

// Rank 0 sends `shapes` as activations (micro-batch i); rank 1 receives and checks them.
void send_and_check(Mailbox& mailbox, int rank, const std::vector<Shape>& shapes, DType dtype,
                    int seed) {
  const int n = static_cast<int>(shapes.size());
  if (rank == 0) {
    std::vector<std::shared_ptr<dist::Work>> sends;
    for (int i = 0; i < n; ++i) {
      for (auto& w : mailbox.send_tensor(numbered(shapes[i], dtype, seed + i), 1,
                                         MessageKind::kActivation, i, 0)) {
        sends.push_back(w);
      }
    }
    for (auto& w : sends) w->wait();
  } else {
    mailbox.expect(0, MessageKind::kActivation, n);
    for (int i = 0; i < n; ++i) {
      const Tensor got = mailbox.recv_tensor(0, MessageKind::kActivation, i, 0);
      ASSERT_EQ(got.shape(), shapes[i]) << "message " << i;
      ASSERT_EQ(got.dtype(), dtype);
      EXPECT_EQ(max_abs_diff(got.to(kF64), numbered(shapes[i], dtype, seed + i).to(kF64)), 0)
          << "message " << i;
    }
  }
}

TEST(P2P, TensorsArriveIntactAsTheirSizesGrowAndShrink) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank();
  // A first list (every message larger than anything before: sent on their own tag), a list of
  // equal micro-batches (into the posted room), a smaller last batch, a larger one, then equal.
  send_and_check(mailbox, rank, {{4, 8}, {4, 8}, {4, 8}}, kF32, 0);
  send_and_check(mailbox, rank, {{4, 8}, {4, 8}, {4, 8}, {4, 8}}, kF32, 10);
  send_and_check(mailbox, rank, {{3, 8}, {3, 8}, {2, 8}}, kF32, 20);
  send_and_check(mailbox, rank, {{16, 8}, {16, 8}, {16, 8}}, kF32, 30);
  send_and_check(mailbox, rank, {{16, 8}, {5, 2, 4}, {}, {0, 8}}, kF32, 40);
  send_and_check(mailbox, rank, {{7, 3}, {7, 3}}, kF16, 50);
  send_and_check(mailbox, rank, {{7, 3}, {7, 3}}, kI64, 60);
}

TEST(P2P, ReceivesWithoutAnnouncementAndBothKindsBothWays) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank(), peer = 1 - rank;
  // Activations 0 -> 1 and gradients 1 -> 0, interleaved as 1F1B's are, never announced.
  for (int i = 0; i < 6; ++i) {
    if (rank == 0) {
      auto sends = mailbox.send_tensor(numbered({2, 5}, kF32, i), peer, MessageKind::kActivation, i, 0);
      const Tensor g = mailbox.recv_tensor(peer, MessageKind::kGradient, i, 1);
      EXPECT_EQ(max_abs_diff(g, numbered({2, 5}, kF32, 100 + i)), 0);
      for (auto& w : sends) w->wait();
    } else {
      const Tensor x = mailbox.recv_tensor(peer, MessageKind::kActivation, i, 0);
      EXPECT_EQ(max_abs_diff(x, numbered({2, 5}, kF32, i)), 0);
      for (auto& w : mailbox.send_tensor(numbered({2, 5}, kF32, 100 + i), peer, MessageKind::kGradient, i, 1)) {
        w->wait();
      }
    }
  }
}

TEST(P2P, BuffersAreReusedAcrossListsAndNeverWhileHeld) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank();
  const int M = 6;
  const std::vector<Shape> shapes(M, Shape{32, 64});
  int64_t after_first = 0;
  for (int step = 0; step < 4; ++step) {
    if (rank == 0) {
      send_and_check(mailbox, rank, shapes, kF32, step);
      continue;
    }
    // Rank 1 holds every input until the end of the list, as a GPipe stage does.
    mailbox.expect(0, MessageKind::kActivation, M);
    std::vector<Tensor> held;
    const int64_t before = memory_stats(Device::cpu()).current_bytes;
    for (int i = 0; i < M; ++i) held.push_back(mailbox.recv_tensor(0, MessageKind::kActivation, i, 0));
    for (int i = 0; i < M; ++i) {
      EXPECT_EQ(max_abs_diff(held[i], numbered(shapes[i], kF32, step + i)), 0) << "step " << step;
    }
    if (step == 1) after_first = mailbox.buffer_bytes();
    if (step >= 2) {
      // Received into buffers allocated by earlier lists: nothing new.
      EXPECT_EQ(mailbox.buffer_bytes(), after_first) << "step " << step;
      EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, before) << "step " << step;
    }
  }
  if (rank == 1) {
    // M held at once plus the receives posted ahead: at most M + kPrePosted buffers of one
    // header and one 32 x 64 payload.
    EXPECT_LE(after_first, (M + Mailbox::kPrePosted) * (128 + 32 * 64 * 4));
  }
}

TEST(P2P, AMessageThatIsNotTheExpectedOneIsAnErrorNamingBoth) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank();
  if (rank == 0) {
    for (auto& w : mailbox.send_tensor(ones({2, 3}), 1, MessageKind::kActivation, 1, 0)) w->wait();
  } else {
    mailbox.expect(0, MessageKind::kActivation, 1);
    expect_error([&] { mailbox.recv_tensor(0, MessageKind::kActivation, 0, 0); },
                 "expected the activation of micro-batch 0 from virtual stage 0 (rank 0), got "
                 "micro-batch 1 from virtual stage 0: the two ranks run different schedules");
  }
}

TEST(P2P, AGradientOfTheWrongShapeOrDtypeIsAnErrorNamingBoth) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank();
  if (rank == 1) {
    for (auto& w : mailbox.send_tensor(ones({2, 3}, kF16), 0, MessageKind::kGradient, 4, 1)) w->wait();
  } else {
    const ExpectedTensor expected{{2, 3}, kF32};
    expect_error([&] { mailbox.recv_tensor(1, MessageKind::kGradient, 4, 1, Device::cpu(), &expected); },
                 "expected the gradient of micro-batch 4 from virtual stage 1 (rank 1) as f32 [2, 3], "
                 "got f16 [2, 3]");
  }
}

TEST(P2P, TheLedgerAndNetworkEmulationSeeEveryMessage) {
  auto group = pair_group();
  if (!group) return;
  Mailbox mailbox(group);
  const int rank = group->rank();
  const std::vector<Shape> shapes(4, Shape{8, 16});
  send_and_check(mailbox, rank, shapes, kF32, 0);  // the first messages take their own tag
  group->ledger().reset();
  dist::NetworkEmulation slow;
  slow.latency_us = 200;
  group->set_network_emulation(slow);
  send_and_check(mailbox, rank, shapes, kF32, 1);
  group->set_network_emulation(dist::NetworkEmulation{});
  const dist::LedgerEntry sent = group->ledger().entry(dist::CollectiveKind::kSendRecv);
  if (rank == 0) {
    // A header and a payload per tensor, each its own message, each held for the latency.
    EXPECT_EQ(sent.calls, 2 * 4);
    EXPECT_EQ(sent.bytes, 4 * (128 + 8 * 16 * 4));
    EXPECT_NEAR(sent.emulated_seconds, 2 * 4 * 200e-6, 1e-9);
  } else {
    EXPECT_EQ(sent.calls, 0);
  }
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
