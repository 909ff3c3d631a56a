// Tied parameters: one parameter used by layers on different pipeline stages.
//
// Weight tying (Press & Wolf 2017) makes GPT-2's output projection its token embedding: the
// first layer looks rows of wte up, the last multiplies by wte^T. Cut into stages, the two uses
// land on different ranks. Megatron-LM's answer, built here: every stage that uses the
// parameter keeps a copy of it (each rank already holds the whole model, so the copy is that
// rank's own Variable of the same name), the copies start equal (the owner's value is sent to
// the others), and after each batch's backward the copies' gradients are summed, so every copy
// takes the same optimizer step and they stay equal:
//
//   layers:  embed (registers wte) | h0 | h1 | ln_f | lm_head (reads wte)
//   K = 2:   stage 0: embed h0                 stage 1: h1 ln_f lm_head
//            wte, its owner                    wte, a copy (in Pipe::parameters(), stepped)
//
//   after the batch's last B (zero-bubble schedules: its last W) and the data-parallel average:
//            g0 ─────────── send ───────────>
//               <────────── send ──────────── g1
//            g0 + g1                           g0 + g1     added in stage order: the same bits
//
// Megatron-LM names the ranks holding the embedding and the output layer the embedding group
// and all-reduces over it; here the holders exchange point to point over the pipeline group (no
// group to create, nothing sent by the stages between), each adding the gradients in stage
// order. The gradient of the whole model's wte is the sum of its two uses', which is what each
// copy then holds: the pipeline trains as the unpipelined model does.
//
// Which parameters are tied. A parameter registered by layers on different stages (PyTorch's
// tying: both modules register the same Variable), or registered by one and tied by another
// (nn::Module::register_tied_parameter: models::GPT's lm_head ties the embedding's weight), is
// found in the module tree. A layer that reads a parameter without either cannot be seen there,
// so its use is declared, as DeepSpeed's TiedLayerSpec declares one:
// PipeOptions().tie("embed.wte.weight", {"lm_head"}). A use neither found nor declared gives
// another stage's parameter a gradient on this one, which Pipe::train_step refuses on every rank
// after the batch, before any optimizer step.
//
// A rank holding every use (one stage; or, with v chunks per rank, both ends on one rank) has the
// parameter once and exchanges nothing. The whole model's checkpoint holds it once, under its
// owner's name, and loading it into the model sets every copy (each rank's model holds it).
#pragma once

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

// Declared by the user: `layers` (the model's own layers, by name) read `parameter` (its name in
// the whole model) without registering it.
struct TiedUse {
  std::string parameter;
  std::vector<std::string> layers;
};

struct TiedParameter {
  std::string name;          // in the whole model: its owner's name ("embed.wte.weight")
  Variable variable;         // this rank's (the model's own Variable, the same on every rank)
  int owner = 0;             // the pipeline rank of the first layer that registers it
  std::vector<int> holders;  // the pipeline ranks holding a layer that uses it, increasing
  bool held_by(int rank) const;
};

// The parameters of `model` used on more than one rank when it is cut by `balance` into parts,
// part p on rank p % stages; in the model's parameter order. The same on every rank; no
// communication. Throws, naming the names, for a declared parameter or layer the model lacks.
std::vector<TiedParameter> find_tied_parameters(const nn::Sequential& model,
                                                const std::vector<int>& balance, int stages,
                                                const std::vector<TiedUse>& declared);

// Point to point over `pipeline`, every rank calling it with the same list: each copy takes its
// owner's value (Megatron-LM's broadcast of the embedding to the last stage at start-up).
void copy_owner_values(const std::vector<TiedParameter>& tied, dist::ProcessGroup& pipeline);

// Point to point over `pipeline`, every rank calling it with the same list: `gradients` holds,
// for each parameter of `tied` this rank holds (in order), its whole gradient on this rank;
// each is replaced by the sum over the parameter's holders, added in holder order (so every
// holder gets the same bits).
void sum_over_holders(const std::vector<TiedParameter>& tied, std::vector<Tensor>& gradients,
                      dist::ProcessGroup& pipeline);

}  // namespace pipeline
}  // namespace tessera
