// Per-layer costs of a model from the standard closed forms: forward FLOPs, parameters,
// stashed activations and communication volumes, for one microbatch on one GPU of a
// tensor-parallel group.
//
// Sources: Narayanan et al., SC'21 (Megatron-LM PTD-P), Section 5.1: a Transformer layer's
// forward is 24*B*s*h^2 + 4*B*s^2*h FLOPs and the logits 2*B*s*h*V; backward costs twice the
// forward. Korthikanti et al., MLSys'23 ("Reducing Activation Recomputation"), Section 4:
// a layer stashes s*b*h*(34 + 5*a*s/h) bytes, s*b*h*(10 + 24/t + 5*a*s/(h*t)) with tensor
// parallelism t, s*b*h*(34 + 5*a*s/h)/t with sequence parallelism. Megatron-LM's f/g operators
// all-reduce 2*s*b*h bytes twice in a layer's forward and twice in its backward.
#pragma once

#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"

namespace perseus::planner {

enum class LayerKind {
  kEmbedding,
  kTransformer,      // decoder-only or encoder layer
  kCrossDecoder,     // T5 decoder layer: self-attention, cross-attention, MLP
  kLmHead,           // final norm, logits, loss (BERT: masked-LM and NSP heads)
  kConvStem,
  kConvBlock,        // ResNet bottleneck block
  kClassifier,       // pooling and the fully connected layer
};
std::string_view to_string(LayerKind kind);

struct Workload {
  int microbatch_size = 1;
  int tensor_parallel = 1;
  int seq_len = 0;                  // 0: the model's
  bool sequence_parallel = false;   // norms and dropout split across the tensor-parallel group
  bool flash_attention = false;     // no s^2 attention matrices are stashed
};

// One layer on one GPU of a tensor-parallel group of `tensor_parallel` GPUs, one microbatch.
struct LayerCost {
  std::string name;
  LayerKind kind = LayerKind::kTransformer;
  double forward_flops = 0.0;        // backward is 2x (weight and input gradients)
  double parameters = 0.0;           // held by this GPU
  double unique_parameters = 0.0;    // the model's parameters in this layer, all GPUs together
  bool holds_tied_copy = false;      // an LM head holding a copy of the input embedding
  double tied_copy_parameters = 0.0; // of `parameters`, the copy (shared when on the embedding's GPU)
  double activation_bytes = 0.0;     // stashed for the backward pass
  double checkpoint_bytes = 0.0;     // stashed instead when the layer is recomputed (its input)
  double memory_traffic_bytes = 0.0; // bandwidth-bound traffic of the forward
  double tp_comm_bytes = 0.0;        // sent per GPU by tensor-parallel collectives, forward
  double output_bytes = 0.0;         // handed to the next layer (pipeline P2P), whole tensor
  // The narrowest per-GPU dimension of its matrix multiplies other than the tokens (a
  // Transformer's attention width / t): their efficiency falls as it shrinks. 0: no matrices.
  double gemm_width = 0.0;
  // Inside the checkpointed region: run again before the backward under full recomputation
  // (Transformer and ResNet blocks; not the embedding or the head, as Megatron-LM recomputes).
  bool recomputed = false;
};

// The model as a list of layers: embedding, blocks, head. Throws InputError when the
// tensor-parallel degree does not divide the attention heads or the FFN width, or is used
// with a convolutional network.
std::vector<LayerCost> model_layers(const ModelSpec& model, const Workload& workload);

// Sum of unique parameters: the model's size.
double total_parameters(const std::vector<LayerCost>& layers);

// The tensor-parallel degrees a model admits (divisors of heads and FFN width; 1 for CNNs).
bool tensor_parallel_divides(const ModelSpec& model, int tensor_parallel, std::string* why = nullptr);

}  // namespace perseus::planner
