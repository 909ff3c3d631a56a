#include "pipeline/zero_bubble.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

void check_arguments(const char* name, int stages, int microbatches, int stage) {
  TS_CHECK(stages >= 1, name, ": the number of stages K must be at least 1, got ", stages);
  TS_CHECK(microbatches >= 1, name, ": the number of micro-batches M must be at least 1, got ",
           microbatches);
  TS_CHECK(stage >= 0 && stage < stages, name, ": stage ", stage, " is not in [0, ", stages, ")");
}

// Stage s's forwards and backwards in 1F1B's pattern: `warmup` forwards, then one forward and
// one backward while forwards are left, then the remaining backwards; each computation with its
// messages. receive_gradient_first orders a steady step "RA i F i RG j SA i B j SG j", 1F1B's
// order that is sound under blocking sends (schedule.h); otherwise every receive is right
// before its computation and every send right after it.
std::vector<Action> one_f_one_b_pattern(int K, int M, int s, int warmup,
                                        bool receive_gradient_first) {
  const bool first = s == 0, last = s == K - 1;
  std::vector<Action> out;
  auto forward = [&](int i, bool send) {
    if (!first) out.push_back(RA(i));
    out.push_back(F(i));
    if (send && !last) out.push_back(SA(i));
  };
  auto backward = [&](int j, bool receive) {
    if (receive && !last) out.push_back(RG(j));
    out.push_back(B(j));
    if (!first) out.push_back(SG(j));
  };
  for (int i = 0; i < warmup; ++i) forward(i, true);
  for (int j = 0; j < M - warmup; ++j) {
    if (receive_gradient_first) {
      forward(warmup + j, false);
      if (!last) out.push_back(RG(j));
      if (!last) out.push_back(SA(warmup + j));
      backward(j, false);
    } else {
      forward(warmup + j, true);
      backward(j, true);
    }
  }
  for (int j = std::max(M - warmup, 0); j < M; ++j) backward(j, true);
  return out;
}

// The list with W passes added: W i follows the (lag+i)-th backward, i.e. W j-lag right after
// B j (and after its gradient send, which stage s-1 waits for), and the W passes still pending
// after the last B close the list, oldest first.
std::vector<Action> with_weight_passes(const std::vector<Action>& list, int lag) {
  std::vector<Action> out;
  int backwards = 0, weights = 0;
  for (size_t n = 0; n < list.size(); ++n) {
    out.push_back(list[n]);
    if (list[n].kind != ActionKind::kBackward) continue;
    if (n + 1 < list.size() && list[n + 1] == SG(list[n].microbatch)) out.push_back(list[++n]);
    if (backwards++ >= lag) out.push_back(W(weights++));
  }
  while (weights < backwards) out.push_back(W(weights++));
  return out;
}

// ZB-H2's warm-up and W lag (zero_bubble.h derives them).
int zb_h2_warmup(int K, int M, int s) { return std::min(2 * (K - 1 - s), M); }

int zb_h2_lag(int K, int M, int s) {
  const int short_by = std::max(0, 2 * K - 1 - M);  // micro-batches short of 2K-1
  return std::max(0, 2 * s - short_by);
}

}  // namespace

std::vector<Action> zb_h1(int stages, int microbatches, int stage) {
  check_arguments("zb_h1", stages, microbatches, stage);
  const int warmup = std::min(stages - 1 - stage, microbatches);
  return with_weight_passes(
      one_f_one_b_pattern(stages, microbatches, stage, warmup, /*receive_gradient_first=*/true),
      /*lag=*/stage);
}

std::vector<Action> zb_h2(int stages, int microbatches, int stage) {
  check_arguments("zb_h2", stages, microbatches, stage);
  return with_weight_passes(one_f_one_b_pattern(stages, microbatches, stage,
                                                zb_h2_warmup(stages, microbatches, stage),
                                                /*receive_gradient_first=*/false),
                            zb_h2_lag(stages, microbatches, stage));
}

}  // namespace pipeline
}  // namespace tessera
