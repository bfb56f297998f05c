// Time and energy of one pipeline instruction versus the GPU's SM clock, synthetic profiles
// built from it, and its calibration against measured profiles.
//
// The model, for an instruction doing `flops` tensor-core FLOPs, `memory_bytes` of
// bandwidth-bound traffic and `collective_bytes` of tensor-parallel collectives per GPU:
//
//   time(f)   = flops * (1 + w_half / w) / (eta * peak) * f_max / f_e   compute-bound: scales with the clock;
//                                                                  matrices of per-GPU width w reach
//                                                                  eta * w / (w + w_half) of the peak
//             + kappa * memory_bytes / bandwidth                  bandwidth-bound: does not
//             + collective_bytes / (scale * bus_bandwidth)        collectives: do not
//   power     = P_static + g(f_e) * (P_compute * share_compute + P_memory * (1 - share_compute))
//   g(f)      = (f / f_max) * max(v_floor, f / f_max)^2            CMOS dynamic power C*V^2*f with a
//                                                                  voltage floor: superlinear above it
//   f_e       = f, or the clock at which power equals P_limit when f would exceed it
//               (the flat top of measured profiles: the GPU throttles under its power limit)
//
// eta and kappa are separate for forward and backward. The parameters of each GPU are fitted
// by Levenberg-Marquardt (Eigen) on relative time and energy errors of measured profiles.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/layers.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus::planner {

// What one instruction does on one GPU.
struct OperationWork {
  double flops = 0.0;
  double flops_per_width = 0.0;  // sum of each layer's flops / gemm_width: the narrow-matrix penalty
  double memory_bytes = 0.0;
  double collective_bytes = 0.0;
};

// Work of an instruction over layers [begin, end): forward sums the layers; backward doubles
// the FLOPs (input and weight gradients) and repeats the collectives; recompute is the forward
// of the layers inside the checkpointed region only (`LayerCost::recomputed`).
OperationWork operation_work(std::span<const LayerCost> layers, InstructionKind kind);

struct OperationEstimate {
  int frequency_mhz = 0;        // the clock asked for
  double effective_mhz = 0.0;   // the clock it runs at (lower when power-limited)
  double time_s = 0.0;
  double energy_j = 0.0;
  double compute_s = 0.0;       // the part that scales with the clock
  double fixed_s = 0.0;         // bandwidth-bound and collective time
};

// g(f): the share of the top clock's dynamic power drawn at `mhz`, CMOS C*V^2*f with the
// voltage floor: f/f_max * max(v_floor, f/f_max)^2.
double dynamic_power_factor(double mhz, double max_mhz, double voltage_floor);

// The highest clock in [lo, hi] at which `power(clock)` stays within `limit`, for a power that
// rises with the clock (bisection, 60 steps); `lo` when even it exceeds the limit. Where a GPU
// throttles to under its power limit.
double highest_clock_within(double lo, double hi, double limit, const std::function<double(double)>& power);

class EnergyModel {
 public:
  EnergyModel(const GpuSpec& gpu, const EnergyModelParams& params);

  // `collective_bandwidth`: bus bandwidth of the tensor-parallel group's collectives, B/s.
  OperationEstimate estimate(const OperationWork& work, InstructionKind kind, double frequency_mhz,
                             double collective_bandwidth) const;
  // Time only, at the top clock: for partitioning and configuration search.
  double time_at_max(const OperationWork& work, InstructionKind kind, double collective_bandwidth) const;

  const GpuSpec& gpu() const { return gpu_; }
  const EnergyModelParams& params() const { return params_; }

 private:
  struct Split {
    double compute_at_max_s, fixed_s, memory_share_s;
  };
  Split split(const OperationWork& work, InstructionKind kind, double collective_bandwidth) const;
  double power(const Split& split, double mhz) const;

  GpuSpec gpu_;
  EnergyModelParams params_;
};

// Bus bandwidth of a tensor-parallel group of `tensor_parallel` GPUs: the node's link when
// the group fits in a node, the network otherwise.
double collective_bandwidth(const GpuSpec& gpu, int tensor_parallel, double scale = 1.0);
// Whether every tensor-parallel group of `tensor_parallel` ranks stays inside a node of
// `gpus_per_node` in Megatron-LM's rank order (tensor fastest): when its size divides the node's.
constexpr bool tensor_group_within_node(int tensor_parallel, int gpus_per_node) {
  return tensor_parallel <= gpus_per_node && gpus_per_node % tensor_parallel == 0;
}

struct SynthesisOptions {
  std::vector<int> frequencies;  // empty: the GPU's default profile range, top clock first
  double collective_bandwidth = 0.0;  // 0: collective_bandwidth(gpu, t, params.collective_scale)
  // Also a `recompute` row per stage: the forward of its checkpointed layers only (a stage
  // without any, e.g. the head alone, gets none and the core falls back to its forward).
  bool recompute = false;
};

// A profile in the standard format: for every stage (layers [boundaries[s], boundaries[s+1]))
// its forward and backward at every frequency. Throws InputError for bad boundaries.
Profile synthesize_profile(const EnergyModel& model, std::span<const LayerCost> layers,
                           std::span<const int> boundaries, int tensor_parallel,
                           const SynthesisOptions& options, std::string source_name);

// `stage,instruction,frequency,time,energy`, top clock first, stage by stage.
std::string profile_to_csv(const Profile& profile);

// Relative errors of `predicted` against `measured` over their common
// (stage, instruction, frequency) rows.
struct ErrorStats {
  double median = 0.0;
  double p90 = 0.0;
  double max = 0.0;
  double mean_signed = 0.0;
  std::size_t count = 0;
};
struct ProfileComparison {
  ErrorStats time;
  ErrorStats energy;
};
// Throws InputError when the profiles share no row.
ProfileComparison compare_profiles(const Profile& measured, const Profile& predicted);

// A measured profile with the configuration it was measured in.
struct ReferenceCase {
  std::string name;
  const ModelSpec* model = nullptr;
  const GpuSpec* gpu = nullptr;
  Workload workload;
  std::vector<int> boundaries;  // layer boundaries of its stages
  Profile measured;
};

// The bundled profiles of the Perseus paper's large-scale emulation, `<model>+<gpu>.csv`:
// tensor parallelism 8, microbatch size 1, sequence length 2048; Transformer layers split
// ceil(L/S) per stage with the remainder on the last stage (96 = 8 x 12 for GPT-3 175B;
// 70 = 7 x 9 + 7 for Bloom 176B), the embedding on the first and the LM head on the last.
ReferenceCase reference_case(const std::filesystem::path& profile_csv);
// Layer boundaries of that split for any model and stage count.
std::vector<int> reference_boundaries(const ModelSpec& model, std::size_t num_layers, int stages);

// A reference case's measured profile against the one `params` predict for its configuration.
ProfileComparison compare_with_reference(const ReferenceCase& reference, const EnergyModelParams& params);

struct CalibrationOptions {
  bool fit_collective_scale = false;  // also fit the collectives' bandwidth
  std::vector<double> voltage_floor_starts = {0.6, 0.75, 0.9};
};
struct CalibrationResult {
  EnergyModelParams params;
  double rms_relative_error = 0.0;     // over every time and energy residual
  std::vector<ProfileComparison> per_case;  // in the order of the cases
  int starts = 0;
};
// Fits the GPU's parameters to all cases at once (they must share the GPU). Throws InputError
// for no cases or a case on another GPU, SolveError when no start converges.
CalibrationResult calibrate(const std::vector<ReferenceCase>& cases, const CalibrationOptions& options = {});

}  // namespace perseus::planner
