// Kareus's partitioned overlap (docs/kareus.md): one Transformer layer's forward and backward as
// a sequence of partitions, each one communication kernel of one nanobatch beside the compute
// kernels of the other nanobatch that do not depend on it.
//
// A microbatch is split into two nanobatches. Within a partition the communication kernel (of
// nanobatch A) may overlap any contiguous run of the compute kernels (of nanobatch B); the
// sequential execution (compute, then the communication alone) stays a candidate. Consecutive
// collectives are fused into one kernel (context parallelism's KV all-gather with the tensor
// parallel all-reduce); consecutive short memory-bound kernels are grouped into one (residual
// add and norm; RoPE with the QKV split; the gated activation).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"

namespace perseus::kareus {

// What one kernel does on one GPU for one nanobatch: tensor-core FLOPs and HBM bytes. Attention
// kernels reach a share of the peak of their own (FlashAttention's, below a GEMM's).
struct Kernel {
  std::string name;
  double flops = 0.0;
  double bytes = 0.0;
  bool attention = false;
  // Memory-bound at the top clock (its bytes take longer than its FLOPs on the roofline).
  bool memory_bound(const planner::GpuSpec& gpu) const;
};

// A collective of one nanobatch: the bytes each GPU sends over its links (bus bytes: ring
// all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n).
struct Collective {
  std::string name;
  double bus_bytes = 0.0;
};

struct Partition {
  std::string name;              // e.g. "attention-allreduce"
  bool forward = true;
  std::vector<Kernel> compute;   // nanobatch B's kernels, in order
  Collective comm;               // nanobatch A's collective (fused when several)
  int per_microbatch = 0;        // how many of it a stage's forward (or backward) runs: 2 nanobatches x its layers
};

struct Workload {
  planner::ModelSpec model;
  planner::GpuSpec gpu;
  int tensor_parallel = 1;
  int context_parallel = 1;
  int pipeline_parallel = 1;
  int microbatch_size = 1;  // sequences; the two nanobatches take half each
  int seq_len = 0;          // tokens per sequence (0: the model's)
  int microbatches = 1;     // per pipeline and iteration
  int layers_per_stage() const;
};

// Checks a workload: a Transformer model, TP and CP dividing the heads (and KV heads), PP
// dividing the layers, an even microbatch size (two nanobatches), CP dividing the sequence,
// the TP x CP group within a node. InputError naming the parameter otherwise.
void validate(const Workload& workload);

// One layer's partitions, forward first then backward (the backward's in the order they run:
// MLP before attention). Each partition's kernels are per GPU and per nanobatch.
std::vector<Partition> layer_partitions(const Workload& workload);

}  // namespace perseus::kareus
