// Where the GPUs of geo-distributed training sit (docs/geo.md, "Placement"): D data-parallel
// pipelines of S stages over the datacenters, stage-major as Atlas arranges them (the replicas
// of a stage side by side, so its all-reduce stays inside a DC where the counts allow), and the
// pipelines grouped into DP-cells of C that share their WAN bandwidth in time (Atlas).
#pragma once

#include <string>
#include <vector>

#include "perseus/geo/wan.hpp"

namespace perseus::geo {

struct Placement {
  int pipelines = 1;
  int stages = 1;
  int cell_size = 1;                 // C pipelines per DP-cell (Atlas); 1: every pipeline alone
  std::vector<int> dc;               // DC of GPU (pipeline, stage), index pipeline * stages + stage
  std::vector<int> used_per_dc;      // GPUs in use in each DC
  int gpu(int pipeline, int stage) const { return pipeline * stages + stage; }
  int dc_of(int pipeline, int stage) const { return dc[static_cast<std::size_t>(gpu(pipeline, stage))]; }
  int num_gpus() const { return pipelines * stages; }
  int cell_of(int pipeline) const { return pipeline / cell_size; }
  int num_cells() const { return (pipelines + cell_size - 1) / cell_size; }
  bool crosses_wan(int pipeline, int stage) const { return dc_of(pipeline, stage) != dc_of(pipeline, stage + 1); }
};

// `pipelines` pipelines (0: as many as the GPUs hold, floor(total / stages)), GPUs taken
// stage-major from the DCs in order. Throws InputError when there are more stages than GPUs, or
// fewer GPUs than pipelines x stages, or cell_size < 1.
Placement place_stage_major(const NetworkSpec& network, int stages, int pipelines, int cell_size);

// Every pipeline with `stages_per_dc[i]` consecutive stages in DC i (Atlas's Algorithm 1), `pipelines` of them.
// Throws InputError when a DC has fewer GPUs than pipelines x its stages.
Placement place_by_partitions(const NetworkSpec& network, const std::vector<int>& stages_per_dc, int pipelines,
                              int cell_size);

}  // namespace perseus::geo
