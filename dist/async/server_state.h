// The parameter servers' optimizer state in the unsplit model's format, so that a checkpoint of
// asynchronous SGD carries the optimizer as one process, DDP, ZeRO and a pipeline write it, and
// any of them (or asynchronous SGD on another number of servers) resumes from it, and the other
// way round.
//
// Each server's optimizer steps one parameter, its shard of the flat parameters: its state is
// "state.0.step" (the updates it applied: W per iteration, one per push) and "state.0.NAME"
// tensors of the shard's elements (momentum, Adam's moments). Laid end to end in server order
// they make the flat vector, which the parameters' shapes cut into the unsplit model's state,
// numbered as its optimizer numbers them (the parameters' order):
//
//   w0 [2, 3], b0 [3]: 9 elements over S = 2 servers (5 and 4)
//   servers:      server 0 [ w0 w0 w0 w0 w0 ]   server 1 [ w0 b0 b0 b0 ]
//   end to end:   [ w0 w0 w0 w0 w0 w0 | b0 b0 b0 ]
//   full state:   state.0.exp_avg [2, 3]   state.1.exp_avg [3]   state.I.step: the servers' count
//
// and a server's part of a full state is its elements cut back out (every parameter must then
// share one step count, as a shard steps as one).
//
// Parameter groups (GPT-2's AdamW: the Linear weights decayed, the biases, LayerNorms and
// embeddings not): a server's shard is cut where the group changes and each piece stepped under
// its group's options (dist/zero/grouped_shard_optimizer.h), and its state is still
// "state.0.NAME" over the shard's elements. An unsplit optimizer over the groups numbers its
// parameters group by group (its parameters()), not in the flat vector's order; `numbering`
// gives that order, and the unsplit state's I follows it:
//
//   flat (registration) order:   wte  ln.w  ln.b  fc.w  fc.b       (d: decay group 0, nd: 1)
//                                 nd   nd    nd    d     nd
//   numbering (the groups'):     fc.w | wte ln.w ln.b fc.b   ->  state.0 is fc.w's, state.1 wte's
//
// The learning rate and the other options
// ("param_groups.G.NAME") are the caller's: a server's optimizer runs at lr / W per push, the
// unsplit model's at the schedule's lr. No communication here (ParameterServer::
// gather_optimizer_states brings the servers' states to server 0).
#pragma once

#include <vector>

#include "autograd/variable.h"
#include "dist/async/layout.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

// The servers' states (server order, each its optimizer's state_dict) as the unsplit model's
// "state.I.NAME", over `params` (the whole model's, in the flat vector's order; only their
// shapes are read), I a parameter's place in `numbering` (the unsplit optimizer's parameters(),
// the same parameters in its groups' order; empty: `params`' own order). Empty when no server
// has stepped. Throws, naming them, when the servers' step counts differ or `numbering` is not
// an order of `params`.
StateDict unsplit_optimizer_state(const std::vector<StateDict>& servers,
                                  const ParameterServerLayout& layout,
                                  const std::vector<Variable>& params,
                                  const std::vector<Variable>& numbering = {});

// The inverse, for server `server`: its "state.0.NAME" out of a full state, "param_groups.*"
// entries kept as they are. Throws, naming the keys, on a parameter index past `params`, a
// state's shape unlike its parameter's, a NAME some parameters have and others not, or step
// counts that differ between parameters.
// `numbering` as above: how `full` numbers the parameters.
StateDict shard_optimizer_state(const StateDict& full, const ParameterServerLayout& layout,
                                int server, const std::vector<Variable>& params,
                                const std::vector<Variable>& numbering = {});

}  // namespace dist
}  // namespace tessera
