// Schedules: pure functions (K stages, M micro-batches, stage s [, v chunks]) -> the ordered
// list of actions stage s performs for one batch.
//
// A batch is cut into M micro-batches; stage s runs F i (forward of micro-batch i) and B i
// (its backward), receives activations from s-1 and gradients from s+1, and sends the other
// way. K = 4, M = 8, one cell per time slot (F and B drawn the same length):
//
// GPipe (Huang et al. 2019): all forwards, then all backwards. M micro-batches in flight.
//
//   stage 0  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  B0 B1 B2 B3 B4 B5 B6 B7
//   stage 1  .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  B0 B1 B2 B3 B4 B5 B6 B7 .
//   stage 2  .  .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  B0 B1 B2 B3 B4 B5 B6 B7 .  .
//   stage 3  .  .  .  F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7 .  .  .
//
// 1F1B / PipeDream-Flush (Narayanan et al. 2021): K-s-1 warm-up forwards, then one forward
// one backward, then the cool-down backwards. The same bubble as GPipe, but at most
// min(K-s, M) micro-batches in flight, so stage 0 holds K activations instead of M.
//
//   stage 0  F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 B2 F6 B3 F7 B4 .  B5 .  B6 .  B7
//   stage 1  .  F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 .  B6 .  B7 .
//   stage 2  .  .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 .  B7 .  .
//   stage 3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 .  .  .
//
// Both take 2(M+K-1) slots of which 2M are busy: the bubble is (K-1)/(M+K-1) = 3/11 here.
//
// Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): the model is cut into v*K chunks and
// rank s holds chunks s, s+K, s+2K, ... (virtual stages), so a micro-batch visits every rank v
// times and each visit is 1/v as long: the bubble shrinks from (K-1)/(M+K-1) to
// (K-1)/(vM+K-1). Forwards go in groups of K micro-batches per chunk (chunk 0 on mbs 0..K-1,
// chunk 1 on the same mbs, ..., then chunk 0 on mbs K..2K-1), which is why it requires M to
// be a multiple of K; backwards walk the chunks in reverse. Rank s warms up with
// (K-s-1)*2 + (v-1)*K forwards (all v*M when M == K). It needs K >= 2. K = 2, M = 4, v = 2
// (F<mb>.<chunk>; each cell is 1/v of a GPipe cell):
//
//   stage 0  F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 .    B2.1 .    B3.1 B2.0 B3.0
//   stage 1  .    F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 .
//
// Communication. Every F on a stage other than the first is preceded by RecvActivation and
// every F on a stage other than the last followed by SendActivation; the same for B with
// gradients in the other direction. Two transports (see validator.h): *buffered* sends return
// at once (MPI_Isend, what the executor uses) and *blocking* sends wait for their receive.
// Under blocking sends the two ends of a link must agree on the order of the messages crossing
// it. In 1F1B's steady state the natural "send activation i, then receive gradient j" on stage
// s meets "send gradient j, then receive activation i" on stage s+1: a deadlock. So stage s
// receives gradient j *before* sending activation i (Megatron-LM does the two at once,
// send_forward_recv_backward); the activation leaves the moment stage s+1 asks for it:
//
//   stage s    ... RA i  F i  RG j  SA i  B j  SG j ...
//   stage s+1  ... B j  SG j  RA i  F i ...
//
// On the executor's buffered transport that wait is needless, so Pipe plays eager_sends() of
// the list, which moves every send right after its computation.
//
// Zero-bubble schedules (ZB-H1, ZB-H2; Qi et al. 2024) split each backward in two: B i, the
// gradient with respect to the stage's input (what the previous stage waits for), and W i, the
// gradient with respect to the stage's weights (which nobody waits for), and put the W passes
// where the other schedules idle. pipeline/zero_bubble.h draws them beside 1F1B. In a list
// that has W actions, B means the input gradient only, and every B i is followed later, on the
// same stage, by exactly one W i; in GPipe, 1F1B and interleaved lists (no W) B is the whole
// backward. W has no messages.
//
// GPipe and 1F1B are sound under both transports. Interleaved 1F1B sends right after each
// computation and receives right before: ranks exchange activations in both directions at
// once (rank K-1 feeds rank 0 the next chunk), which Megatron-LM does with batched
// isend/irecv; it is sound under buffered sends, the executor's transport. Under blocking
// sends it deadlocks: in the warm-up every rank sends to its successor around the ring at once.
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace pipeline {

enum class ActionKind {
  kForward,
  kBackward,
  kSendActivation,  // to the next (virtual) stage
  kRecvActivation,  // from the previous one
  kSendGradient,    // to the previous one
  kRecvGradient,    // from the next one
  kWeight,          // W: the weight gradient of a backward split in two (zero-bubble lists)
};

struct Action {
  ActionKind kind;
  int microbatch;
  int chunk = 0;  // the model chunk on this rank (interleaved); 0 otherwise

  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
  bool operator!=(const Action& o) const { return !(*this == o); }
};

// Short forms for tables: F(3), B(3), W(3), SA(3), RA(3), SG(3), RG(3); chunk as a second
// argument.
inline Action F(int mb, int chunk = 0) { return {ActionKind::kForward, mb, chunk}; }
inline Action B(int mb, int chunk = 0) { return {ActionKind::kBackward, mb, chunk}; }
inline Action W(int mb, int chunk = 0) { return {ActionKind::kWeight, mb, chunk}; }
inline Action SA(int mb, int chunk = 0) { return {ActionKind::kSendActivation, mb, chunk}; }
inline Action RA(int mb, int chunk = 0) { return {ActionKind::kRecvActivation, mb, chunk}; }
inline Action SG(int mb, int chunk = 0) { return {ActionKind::kSendGradient, mb, chunk}; }
inline Action RG(int mb, int chunk = 0) { return {ActionKind::kRecvGradient, mb, chunk}; }

// "F3", "W3", "RG0", "F3.1" (chunk 1 when the schedule has more than one chunk).
std::string to_string(const Action& a, bool show_chunk = false);
std::string to_string(const std::vector<Action>& actions, bool show_chunk = false);
bool is_compute(ActionKind kind);  // F, B and W
// Whether the list splits its backwards into B and W (has any W action).
bool splits_backward(const std::vector<Action>& actions);

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved, kZBH1, kZBH2 };
// "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2"; anything else is an error listing these.
ScheduleKind parse_schedule(const std::string& name);
const char* schedule_name(ScheduleKind kind);

// One stage's actions for one batch. stages = K >= 1, microbatches = M >= 1, 0 <= stage < K.
std::vector<Action> gpipe(int stages, int microbatches, int stage);
std::vector<Action> one_f_one_b(int stages, int microbatches, int stage);
// chunks = v >= 1 model chunks per rank; requires M % K == 0 (M >= K).
std::vector<Action> interleaved_1f1b(int stages, int microbatches, int stage, int chunks);
// zb_h1() and zb_h2() (any K >= 1, M >= 1) are declared in pipeline/zero_bubble.h.
// Evaluation: forwards only, in the order of the kind's forwards: micro-batch order for every
// kind with one chunk (GPipe, 1F1B, ZB-H1, ZB-H2: 1F1B's forwards); for v > 1 chunks
// Megatron-LM's groups of K, so M % K == 0 is required then.
std::vector<Action> forward_only(int stages, int microbatches, int stage, int chunks = 1);
// Dispatch by kind; `chunks` must be 1 unless kind is kInterleaved.
std::vector<Action> make_schedule(ScheduleKind kind, int stages, int microbatches, int stage,
                                  int chunks = 1);
// Every stage's list: schedules[s] for s = 0..K-1.
std::vector<std::vector<Action>> make_schedules(ScheduleKind kind, int stages, int microbatches,
                                                int chunks = 1);

// For a buffered transport (the executor's): every send moved up to right after the
// computation that produces it, so no message waits on an unrelated receive (1F1B's "RG j, SA
// i" becomes "SA i, RG j"). Each link's messages keep their order, and under buffered sends a
// send that happens earlier can only let its receiver go earlier, so a list sound under
// buffered sends stays sound. A gradient send's producer is B, never W: in a zero-bubble list
// SG i goes right after B i, ahead of any W.
std::vector<Action> eager_sends(const std::vector<Action>& actions);

// The theory: the fraction of a stage's time idle in the bubble, (K-1)/(vM+K-1).
double bubble_fraction(int stages, int microbatches, int chunks = 1);

}  // namespace pipeline
}  // namespace tessera
