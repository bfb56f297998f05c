#include "perseus/geo/workload.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "perseus/planner/layers.hpp"

namespace perseus::geo {

namespace {
constexpr double kBytesPerResidentParameter = 16.0;  // fp16 weight and gradient, fp32 master, Adam m and v
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

Workload make_workload(const WorkloadSpec& spec, const NetworkSpec& network) {
  if (spec.stages < 1) throw InputError(fmt::format("--stages must be at least 1, got {}", spec.stages));
  if (spec.microbatches < 1)
    throw InputError(fmt::format("--microbatches must be at least 1, got {}", spec.microbatches));
  if (spec.microbatch_size < 1)
    throw InputError(fmt::format("--microbatch-size must be at least 1, got {}", spec.microbatch_size));
  if (spec.layers < 0) throw InputError(fmt::format("--layers must be positive, got {}", spec.layers));
  for (auto [value, name] : {std::pair{spec.forward_ms, "--forward-ms"}, {spec.comm_ratio, "--comm-ratio"},
                             {spec.memory_gb, "--memory-gb"}})
    if (!(value >= 0.0) || !std::isfinite(value)) throw InputError(fmt::format("{} must be positive, got {}", name, value));

  Workload w;
  w.spec = spec;
  w.model = &planner::find_model(spec.model);
  w.gpu = &planner::find_gpu(spec.gpu);
  if (!w.model->is_transformer())
    throw InputError(fmt::format("--model {}: geo-distributed training needs a Transformer", spec.model));
  planner::ModelSpec model = *w.model;
  if (spec.layers > 0) model.transformer.layers = spec.layers;
  const int blocks = model.transformer.layers + model.transformer.decoder_layers;
  if (spec.stages > blocks)
    throw InputError(fmt::format("--stages {}: {} has {} Transformer layers, so at most {} stages (--layers sets more)",
                                 spec.stages, model.name, blocks, blocks));

  planner::Workload shape;
  shape.microbatch_size = spec.microbatch_size;
  shape.flash_attention = true;
  const std::vector<planner::LayerCost> layers = planner::model_layers(model, shape);
  // Blocks split evenly, one more on each of the last (blocks mod stages) stages; the embedding
  // on the first stage, the head on the last.
  std::vector<int> bounds{0};
  const int base = blocks / spec.stages, extra = blocks % spec.stages;
  for (int s = 1; s < spec.stages; ++s) bounds.push_back(1 + s * base + std::max(0, s - (spec.stages - extra)));
  bounds.push_back(static_cast<int>(layers.size()));

  const planner::EnergyModel energy(*w.gpu, w.gpu->energy);
  const double collective = planner::collective_bandwidth(*w.gpu, 1);
  w.memory_bytes = spec.memory_gb > 0.0 ? spec.memory_gb * kGiB : w.gpu->memory_bytes;
  w.p_blocking_w = w.gpu->p_blocking_w;
  const auto& t = model.transformer;
  w.activation_bytes = 2.0 * spec.microbatch_size * t.seq_len * t.hidden;
  w.gradient_bytes = w.activation_bytes;

  for (int s = 0; s < spec.stages; ++s) {
    StageWork stage;
    stage.first_layer = bounds[s];
    stage.end_layer = bounds[s + 1];
    const std::span<const planner::LayerCost> mine(layers.data() + stage.first_layer,
                                                   static_cast<std::size_t>(stage.end_layer - stage.first_layer));
    stage.forward_work = planner::operation_work(mine, InstructionKind::kForward);
    stage.backward_work = planner::operation_work(mine, InstructionKind::kBackward);
    const int top = w.gpu->max_mhz;
    const auto fwd = energy.estimate(stage.forward_work, InstructionKind::kForward, top, collective);
    const auto bwd = energy.estimate(stage.backward_work, InstructionKind::kBackward, top, collective);
    stage.forward_s = fwd.time_s, stage.forward_j = fwd.energy_j;
    stage.backward_s = bwd.time_s, stage.backward_j = bwd.energy_j;
    for (const planner::LayerCost& layer : mine) {
      stage.parameters += layer.parameters;
      stage.stash_bytes += spec.recompute ? layer.checkpoint_bytes : layer.activation_bytes;
      stage.working_bytes += layer.activation_bytes;
    }
    if (spec.forward_ms > 0.0) {
      // Set times at the model's power: energies scale with them.
      const double forward_s = spec.forward_ms * 1e-3;
      stage.forward_j *= forward_s / stage.forward_s, stage.forward_s = forward_s;
      stage.backward_j *= 2.0 * forward_s / stage.backward_s, stage.backward_s = 2.0 * forward_s;
    }
    stage.recompute_s = stage.forward_s, stage.recompute_j = stage.forward_j;
    stage.resident_bytes = kBytesPerResidentParameter * stage.parameters;
    const double free_bytes = w.memory_bytes - stage.resident_bytes - (spec.recompute ? stage.working_bytes : 0.0);
    if (free_bytes < stage.stash_bytes)
      throw InputError(fmt::format(
          "{} does not fit: stage {} (layers {}..{}) needs {:.1f} GiB of weights and optimizer state and {:.2f} GiB per "
          "microbatch, the GPU has {:.1f} GiB (add stages, or --memory-gb)",
          model.name, s, stage.first_layer, stage.end_layer - 1, stage.resident_bytes / kGiB,
          (stage.stash_bytes + (spec.recompute ? stage.working_bytes : 0.0)) / kGiB, w.memory_bytes / kGiB));
    stage.max_in_flight = static_cast<int>(std::min(1e6, std::floor(free_bytes / stage.stash_bytes)));
    w.stages.push_back(stage);
  }
  if (spec.comm_ratio > 0.0) {
    // The transfer of a WAN hop takes comm_ratio x the (first stage's) forward at the pair bandwidth.
    w.activation_bytes = spec.comm_ratio * w.stages.front().forward_s * network.wan_pair_bandwidth();
    w.gradient_bytes = w.activation_bytes;
  }
  return w;
}

}  // namespace perseus::geo
