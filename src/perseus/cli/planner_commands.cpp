// The planner's commands: `perseus models`, `gpus`, `profile synth`, `profile compare`,
// `calibrate`, `partition`, `configure`, `schedules` and `plan`. Each parses flags, calls
// perseus/planner and presents the result (human text, or JSON with --json).
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/energy_model.hpp"
#include "perseus/planner/layers.hpp"
#include "perseus/planner/parallel_config.hpp"
#include "perseus/planner/partition.hpp"
#include "perseus/planner/planner.hpp"
#include "perseus/planner/published_runs.hpp"
#include "perseus/planner/schedules.hpp"

namespace perseus::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace perseus::planner;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void print_json(const json& value) { std::cout << value.dump(2) << "\n"; }

// Writes `content` to `path` ('-': stdout), refusing to replace a file unless `force`.
void write_output(const std::string& path, const std::string& content, bool force) {
  if (path == "-") {
    std::cout << content;
    return;
  }
  if (fs::exists(path) && !force) throw InputError(path + " exists; pass --force to replace it");
  write_file_atomically(path, content);
}

json params_json(const EnergyModelParams& p) {
  return {{"gemm_efficiency_forward", p.gemm_efficiency_forward},
          {"gemm_efficiency_backward", p.gemm_efficiency_backward},
          {"memory_factor_forward", p.memory_factor_forward},
          {"memory_factor_backward", p.memory_factor_backward},
          {"gemm_half_width", p.gemm_half_width},
          {"collective_scale", p.collective_scale},
          {"static_power_w", p.static_power_w},
          {"compute_power_w", p.compute_power_w},
          {"memory_power_w", p.memory_power_w},
          {"voltage_floor", p.voltage_floor},
          {"power_limit_w", p.power_limit_w}};
}

json errors_json(const ProfileComparison& c) {
  auto stats = [](const ErrorStats& s) {
    return json{{"median", s.median}, {"p90", s.p90}, {"max", s.max}, {"mean_signed", s.mean_signed}, {"rows", s.count}};
  };
  return {{"time", stats(c.time)}, {"energy", stats(c.energy)}};
}

json config_json(const ConfigEstimate& e) {
  const ParallelConfig& c = e.config;
  return {{"tensor", c.tensor},
          {"pipeline", c.pipeline},
          {"data", c.data},
          {"microbatch_size", c.microbatch_size},
          {"microbatches", c.microbatches},
          {"chunks", c.chunks},
          {"recompute", c.recompute},
          {"schedule", to_string(c.schedule)},
          {"fits", e.fits},
          {"memory_gib", e.memory.total_bytes / kGiB},
          {"memory",
           {{"stage", e.memory.stage},
            {"weights_gib", e.memory.weights_bytes / kGiB},
            {"gradients_gib", e.memory.gradients_bytes / kGiB},
            {"optimizer_gib", e.memory.optimizer_bytes / kGiB},
            {"activations_gib", e.memory.activations_bytes / kGiB},
            {"workspace_gib", e.memory.workspace_bytes / kGiB},
            {"activation_stashes", e.memory.activation_stashes},
            {"weight_versions", e.memory.weight_versions}}},
          {"iteration_time_s", e.iteration_time_s},
          {"pipeline_s", e.pipeline_s},
          {"data_parallel_s", e.data_parallel_s},
          {"bubble_fraction", e.bubble_fraction},
          {"bubble_share", e.bubble_share()},
          {"tensor_comm_bytes", e.tensor_bytes},
          {"pipeline_comm_bytes", e.pipeline_bytes},
          {"data_comm_bytes", e.data_bytes},
          {"tensor_within_node", e.tensor_within_node},
          {"pipeline_across_nodes", e.pipeline_across_nodes},
          {"pipeline_hops_across_nodes", e.pipeline_hops_across},
          {"samples_per_second", e.samples_per_second},
          {"model_flops_utilization", e.model_flops_utilization},
          {"imbalance_ratio", e.imbalance_ratio},
          {"rejected", e.rejected}};
}

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}: expected comma-separated integers, got '{}'", flag, item));
    }
  }
  return out;
}

// ------------------------------------------------------------------------------ catalogues

void run_models(bool as_json) {
  json out = json::array();
  for (const ModelSpec& m : model_catalogue()) {
    const auto layers = model_layers(m, Workload{});
    const double params = total_parameters(layers);
    json row{{"name", m.name},
             {"family", to_string(m.family)},
             {"description", m.description},
             {"source", m.source},
             {"parameters", params},
             {"layers", layers.size()},
             {"default_global_batch", m.default_global_batch}};
    if (m.is_transformer()) {
      const TransformerShape& t = m.transformer;
      row["transformer"] = {{"layers", t.layers},       {"decoder_layers", t.decoder_layers}, {"hidden", t.hidden},
                            {"heads", t.heads},         {"kv_heads", t.kv_heads},             {"head_dim", t.head_dim},
                            {"ffn_hidden", t.ffn_hidden}, {"vocab", t.vocab},                 {"seq_len", t.seq_len}};
    } else {
      row["convnet"] = {{"depth", m.convnet.depth}, {"width_factor", m.convnet.width_factor},
                        {"image_size", m.convnet.image_size}};
    }
    out.push_back(row);
  }
  if (as_json) return print_json(out);
  fmt::print("{:<18} {:>10} {:>7}  {}\n", "model", "params", "layers", "source");
  for (const json& row : out) {
    fmt::print("{:<18} {:>9.2f}B {:>7}  {}\n", row["name"].get<std::string>(), row["parameters"].get<double>() / 1e9,
               row["layers"].get<std::size_t>(), row["source"].get<std::string>());
  }
}

void run_gpus(bool as_json) {
  json out = json::array();
  for (const GpuSpec& g : gpu_catalogue()) {
    out.push_back({{"name", g.name},
                   {"description", g.description},
                   {"peak_tflops", g.peak_flops / 1e12},
                   {"memory_gib", g.memory_bytes / kGiB},
                   {"memory_bandwidth_gbps", g.memory_bandwidth / 1e9},
                   {"frequencies_mhz", {{"min", g.min_mhz}, {"max", g.max_mhz}, {"step", g.step_mhz}}},
                   {"tdp_w", g.tdp_w},
                   {"idle_power_w", g.idle_power_w},
                   {"p_blocking_w", g.p_blocking_w},
                   {"intra_node_link", g.intra_node_link},
                   {"calibrated", g.calibrated},
                   {"calibration", g.calibration},
                   {"energy_model", params_json(g.energy)}});
    if (g.published_fit) {
      out.back()["published_runs_fit"] = {{"gemm_efficiency", g.published_fit->gemm_efficiency},
                                          {"gemm_half_width", g.published_fit->gemm_half_width},
                                          {"memory_factor", g.published_fit->memory_factor},
                                          {"collective_scale", g.published_fit->collective_scale},
                                          {"source", g.published_fit_source}};
    }
  }
  if (as_json) return print_json(out);
  fmt::print("{:<10} {:>7} {:>6} {:>13} {:>6} {:>9}  {}\n", "gpu", "TFLOP/s", "GiB", "MHz", "TDP W", "p_block W",
             "energy model");
  for (const GpuSpec& g : gpu_catalogue()) {
    fmt::print("{:<10} {:>7.1f} {:>6.0f} {:>6}-{:<6} {:>6.0f} {:>9.2f}  {}{}\n", g.name, g.peak_flops / 1e12,
               g.memory_bytes / kGiB, g.min_mhz, g.max_mhz, g.tdp_w, g.p_blocking_w,
               g.calibrated ? "calibrated on measured profiles" : g.calibration,
               g.published_fit ? "; the planner's times fitted to published runs" : "");
  }
}

// ---------------------------------------------------------------------------- profile synth

struct SynthArgs {
  std::string model, gpu, out = "-", method = "min-imbalance", boundaries;
  int stages = 0, microbatch_size = 1, tensor = 1, seq_len = 0, min_mhz = 0;
  bool sequence_parallel = false, force = false, json = false;
};

void run_synth(const SynthArgs& a) {
  const ModelSpec& model = find_model(a.model);
  const GpuSpec& gpu = find_gpu(a.gpu);
  const Workload workload{a.microbatch_size, a.tensor, a.seq_len, a.sequence_parallel, false};
  const std::vector<LayerCost> layers = model_layers(model, workload);
  const EnergyModel energy(gpu, gpu.energy);
  Partition partition;
  if (!a.boundaries.empty()) {
    std::vector<int> b = parse_int_list(a.boundaries, "--boundaries");
    b.insert(b.begin(), 0);
    b.push_back(static_cast<int>(layers.size()));
    partition = evaluate_partition(layer_forward_times(energy, layers, a.tensor), std::move(b));
  } else {
    if (a.stages < 1) throw InputError("profile synth: give --stages (or --boundaries)");
    partition = partition_layers(energy, layers, a.tensor, a.stages, parse_partition_method(a.method));
  }
  SynthesisOptions options;
  if (a.min_mhz > 0) {
    if (a.min_mhz > gpu.max_mhz) {
      throw InputError(fmt::format("--min-frequency {} is above {}'s top clock {} MHz", a.min_mhz, gpu.name, gpu.max_mhz));
    }
    options.frequencies = supported_frequencies(gpu, a.min_mhz);
  }
  const Profile profile = synthesize_profile(energy, layers, partition.boundaries, a.tensor, options,
                                             fmt::format("synthetic {} on {}", model.name, gpu.name));
  write_output(a.out, profile_to_csv(profile), a.force);
  json summary{{"model", model.name},
               {"gpu", gpu.name},
               {"stages", partition.num_stages()},
               {"boundaries", partition.boundaries},
               {"imbalance_ratio", partition.imbalance_ratio},
               {"microbatch_size", a.microbatch_size},
               {"tensor_parallel", a.tensor},
               {"p_blocking_w", gpu.p_blocking_w},
               {"calibrated", gpu.calibrated},
               {"out", a.out}};
  if (a.out == "-") return;  // stdout carries the CSV
  if (a.json) return print_json(summary);
  fmt::print("wrote {}: {} on {}, {} stages (boundaries {}), forward imbalance {:.3f}; use --p-blocking {} with "
             "perseus optimize\n",
             a.out, model.name, gpu.name, partition.num_stages(), fmt::join(partition.boundaries, ","),
             partition.imbalance_ratio, gpu.p_blocking_w);
  if (!gpu.calibrated) fmt::print("note: {}'s energy model is {}\n", gpu.name, gpu.calibration);
}

// --------------------------------------------------------------------------- profile compare

void run_compare(const std::string& measured, const std::string& predicted, bool as_json) {
  const ProfileComparison c = compare_profiles(Profile::read_csv(measured), Profile::read_csv(predicted));
  if (as_json) return print_json(errors_json(c));
  fmt::print("{} rows in common; relative error of {} against {}:\n", c.time.count, predicted, measured);
  for (auto [name, e] : {std::pair{"time  ", &c.time}, std::pair{"energy", &c.energy}}) {
    fmt::print("  {}  median {:.2f}%  p90 {:.2f}%  max {:.2f}%  mean (signed) {:+.2f}%\n", name, 100 * e->median,
               100 * e->p90, 100 * e->max, 100 * e->mean_signed);
  }
}

// -------------------------------------------------------------------------------- calibrate

void run_calibrate(const std::vector<std::string>& profiles, const std::vector<std::string>& held_out_profiles,
                   bool fit_collective, bool as_json) {
  std::vector<ReferenceCase> cases, held_out;
  for (const std::string& path : profiles) cases.push_back(reference_case(path));
  for (const std::string& path : held_out_profiles) {
    held_out.push_back(reference_case(path));
    if (held_out.back().gpu != cases.front().gpu) {
      throw InputError(fmt::format("calibrate --held-out {}: measured on {}, the fit is for {}", path,
                                   held_out.back().gpu->name, cases.front().gpu->name));
    }
  }
  fmt::print(stderr, "perseus: fitting the energy model of {} on {} profiles...\n", cases.front().gpu->name,
             cases.size());
  CalibrationOptions options;
  options.fit_collective_scale = fit_collective;
  const CalibrationResult r = calibrate(cases, options);
  json out{{"gpu", cases.front().gpu->name}, {"params", params_json(r.params)}, {"rms_relative_error", r.rms_relative_error}};
  for (std::size_t i = 0; i < cases.size(); ++i) out["profiles"][cases[i].name] = errors_json(r.per_case[i]);
  std::vector<ProfileComparison> held_out_errors;
  for (const ReferenceCase& c : held_out) {
    held_out_errors.push_back(compare_with_reference(c, r.params));
    out["held_out"][c.name] = errors_json(held_out_errors.back());
  }
  if (as_json) return print_json(out);
  fmt::print("energy model of {} (rms relative error {:.2f}% over {} starts):\n", cases.front().gpu->name,
             100 * r.rms_relative_error, r.starts);
  for (const auto& [key, value] : out["params"].items()) fmt::print("  {:<26} {:.10g}\n", key, value.get<double>());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ProfileComparison& c = r.per_case[i];
    fmt::print("  {:<22} time median {:.2f}% p90 {:.2f}% max {:.2f}% | energy median {:.2f}% p90 {:.2f}% max {:.2f}%\n",
               cases[i].name, 100 * c.time.median, 100 * c.time.p90, 100 * c.time.max, 100 * c.energy.median,
               100 * c.energy.p90, 100 * c.energy.max);
  }
  for (std::size_t i = 0; i < held_out.size(); ++i) {
    const ProfileComparison& c = held_out_errors[i];
    fmt::print("  held out: {:<12} time median {:.2f}% p90 {:.2f}% max {:.2f}% | energy median {:.2f}% p90 {:.2f}% max {:.2f}%\n",
               held_out[i].name, 100 * c.time.median, 100 * c.time.p90, 100 * c.time.max, 100 * c.energy.median,
               100 * c.energy.p90, 100 * c.energy.max);
  }
}

// The time model fitted to published end-to-end runs (published_runs.hpp), from the GPU's
// shipped fit, with each run's error in and out of the fit.
void run_calibrate_published(const std::string& path, const std::string& gpu_name, bool as_json) {
  const std::vector<PublishedRun> runs = read_published_runs(path);
  const GpuSpec& gpu = find_gpu(gpu_name);
  const PublishedRunsFit start = gpu.published_fit.value_or(PublishedRunsFit{0.7, 100.0, 1.0, 1.0});
  fmt::print(stderr, "perseus: fitting {}'s time model to {} published runs, and each run left out...\n", gpu.name,
             runs.size());
  const PublishedFit r = fit_published_runs(runs, gpu, start, true);
  json out{{"gpu", gpu.name},
           {"fit",
            {{"gemm_efficiency", r.fit.gemm_efficiency},
             {"gemm_half_width", r.fit.gemm_half_width},
             {"memory_factor", r.fit.memory_factor},
             {"collective_scale", r.fit.collective_scale}}},
           {"rms_log_error", r.rms_log_error},
           {"runs", json::array()}};
  const EnergyModelParams params = with_published_fit(gpu.energy, r.fit);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const PublishedRun& run = runs[i];
    const PublishedRunEstimate e = estimate_published_run(run, gpu, params);
    const PublishedRunEstimate pick = estimate_published_run(run, gpu, params, true);
    out["runs"].push_back({{"source", run.source},
                           {"parameters_b", run.parameters_b},
                           {"gpus", run.gpus},
                           {"global_batch", run.global_batch},
                           {"configuration", describe(e.estimate.config)},
                           {"published_tflops_per_gpu", run.tflops_per_gpu},
                           {"estimated_tflops_per_gpu", e.tflops_per_gpu},
                           {"ratio", r.ratios[i]},
                           {"held_out_ratio", r.held_out_ratios[i]},
                           {"pick", describe(pick.estimate.config)},
                           {"pick_over_shape", pick.tflops_per_gpu / e.tflops_per_gpu}});
  }
  if (as_json) return print_json(out);
  fmt::print("time model of {} fitted to {} published runs (rms log error {:.2f}%, {} evaluations):\n", gpu.name,
             runs.size(), 100 * r.rms_log_error, r.evaluations);
  for (const auto& [key, value] : out["fit"].items()) fmt::print("  {:<18} {:.6g}\n", key, value.get<double>());
  fmt::print("  {:<12} {:>8} {:>6} {:>6}  {:<36} {:>9} {:>9} {:>7} {:>9}\n", "source", "params", "GPUs", "batch",
             "estimated as", "published", "estimate", "ratio", "held out");
  for (const json& run : out["runs"]) {
    fmt::print("  {:<12.12} {:>7.1f}B {:>6} {:>6}  {:<36} {:>9.0f} {:>9.0f} {:>7.3f} {:>9.3f}\n",
               run["source"].get<std::string>(), run["parameters_b"].get<double>(), run["gpus"].get<int>(),
               run["global_batch"].get<int>(), run["configuration"].get<std::string>(),
               run["published_tflops_per_gpu"].get<double>(), run["estimated_tflops_per_gpu"].get<double>(),
               run["ratio"].get<double>(), run["held_out_ratio"].get<double>());
  }
}

// -------------------------------------------------------------------------------- partition

struct PartitionArgs {
  std::string model, gpu = "a100-sxm", method = "min-imbalance", weights;
  int stages = 0, microbatch_size = 1, tensor = 1, gpus_per_node = 0, nodes = 1;
  bool json = false;
};

std::vector<double> read_weights(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<double> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const auto comma = line.find_last_of(',');
    const std::string field = comma == std::string::npos ? line : line.substr(comma + 1);
    try {
      std::size_t used = 0;
      out.push_back(std::stod(field, &used));
    } catch (const std::exception&) {
      if (out.empty() && number == 1) continue;  // a header
      throw InputError(fmt::format("{}:{}: expected a layer weight, got '{}'", path, number, field));
    }
  }
  return out;
}

void run_partition(const PartitionArgs& a) {
  // The method first, so that a misspelt one is named before any option it would need.
  std::optional<PartitionMethod> balanced;  // none: PipeDream's planner
  if (a.method != "pipedream") {
    try {
      balanced = parse_partition_method(a.method);
    } catch (const InputError&) {
      throw InputError("unknown partition method '" + a.method +
                       "'; known methods: min-imbalance, min-max, uniform, pipedream");
    }
  }
  if (!balanced) {
    if (a.model.empty()) throw InputError("partition --method pipedream: give --model (it weighs layers by the model's time, activations and weights)");
    if (a.stages > 0) {
      throw InputError("partition --method pipedream: --stages does not apply: PipeDream chooses the stages and their "
                       "replicas for the workers of --gpus-per-node x --nodes");
    }
    if (!a.weights.empty()) throw InputError("partition --method pipedream: --weights does not apply: give --model");
    const ModelSpec& model = find_model(a.model);
    const GpuSpec& gpu = find_gpu(a.gpu);
    const std::vector<LayerCost> layers = model_layers(model, Workload{a.microbatch_size, a.tensor, 0, false, false});
    // The planner's time model, as `plan` partitions with.
    const EnergyModel energy(gpu, planning_params(gpu, TimeModel::kPublishedRuns));
    const double bw = collective_bandwidth(gpu, a.tensor, energy.params().collective_scale);
    std::vector<PipeDreamLayer> pd;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const auto one = std::span<const LayerCost>(layers).subspan(l, 1);
      pd.push_back({energy.time_at_max(operation_work(one, InstructionKind::kForward), InstructionKind::kForward, bw) +
                        energy.time_at_max(operation_work(one, InstructionKind::kBackward), InstructionKind::kBackward, bw),
                    layers[l].output_bytes, 4.0 * layers[l].parameters});
    }
    const int per_node = a.gpus_per_node > 0 ? a.gpus_per_node : gpu.gpus_per_node;
    std::vector<TopologyLevel> topology{{per_node, gpu.p2p_bandwidth, "node"}};
    if (a.nodes > 1) topology.push_back({a.nodes, gpu.inter_node_bandwidth, "cluster"});
    const PipeDreamPlan plan = pipedream_partition(pd, topology);
    json out{{"model", model.name}, {"workers", plan.workers}, {"slowest_stage_s", plan.slowest_stage_s},
             {"in_flight", plan.in_flight}, {"stages", json::array()}};
    for (const PipeDreamStage& s : plan.stages) {
      out["stages"].push_back({{"first_layer", s.first_layer}, {"end_layer", s.end_layer},
                               {"first", layers[s.first_layer].name}, {"last", layers[s.end_layer - 1].name},
                               {"replicas", s.replicas}, {"compute_s", s.compute_s}});
    }
    if (a.json) return print_json(out);
    fmt::print("PipeDream partition of {} over {} workers ({} per node, {} node(s)): {} stages, bottleneck {:.4f} s per "
               "microbatch, {} microbatches in flight (NOAM)\n",
               model.name, plan.workers, per_node, a.nodes, plan.stages.size(), plan.slowest_stage_s, plan.in_flight);
    for (const PipeDreamStage& s : plan.stages) {
      fmt::print("  layers {:>3}-{:<3} ({} .. {}) x{} replicas, compute {:.4f} s\n", s.first_layer, s.end_layer - 1,
                 layers[s.first_layer].name, layers[s.end_layer - 1].name, s.replicas, s.compute_s);
    }
    return;
  }
  if (a.stages < 1) throw InputError("partition: give --stages");
  std::vector<double> weights;
  std::vector<std::string> names;
  std::string what;
  if (!a.weights.empty()) {
    weights = read_weights(a.weights);
    for (std::size_t l = 0; l < weights.size(); ++l) names.push_back("layer" + std::to_string(l));
    what = a.weights;
  } else {
    if (a.model.empty()) throw InputError("partition: give --model (or --weights FILE)");
    const ModelSpec& model = find_model(a.model);
    const GpuSpec& gpu = find_gpu(a.gpu);
    const std::vector<LayerCost> layers = model_layers(model, Workload{a.microbatch_size, a.tensor, 0, false, false});
    weights = layer_forward_times(EnergyModel(gpu, planning_params(gpu, TimeModel::kPublishedRuns)), layers, a.tensor);
    for (const LayerCost& l : layers) names.push_back(l.name);
    what = fmt::format("{} on {} (forward time at the top clock)", model.name, gpu.name);
  }
  const PartitionMethod method = *balanced;
  Partition p;
  switch (method) {
    case PartitionMethod::kMinImbalance: p = min_imbalance_partition(weights, a.stages); break;
    case PartitionMethod::kMinMax: p = min_max_partition(weights, a.stages); break;
    case PartitionMethod::kUniform: p = uniform_partition(weights, a.stages); break;
  }
  json out{{"input", what},           {"method", to_string(method)},    {"stages", p.num_stages()},
           {"boundaries", p.boundaries}, {"stage_weights", p.stage_weights}, {"imbalance_ratio", p.imbalance_ratio},
           {"max_weight", p.max_weight},  {"min_weight", p.min_weight}};
  if (a.json) return print_json(out);
  fmt::print("{} partition of {} layers of {} into {} stages: imbalance ratio {:.4f} (longest {:.6g}, shortest {:.6g})\n",
             to_string(method), weights.size(), what, p.num_stages(), p.imbalance_ratio, p.max_weight, p.min_weight);
  for (int s = 0; s < p.num_stages(); ++s) {
    fmt::print("  stage {:>2}: layers {:>3}-{:<3} ({} .. {})  weight {:.6g}\n", s, p.boundaries[s], p.boundaries[s + 1] - 1,
               names[p.boundaries[s]], names[p.boundaries[s + 1] - 1], p.stage_weights[s]);
  }
}

// -------------------------------------------------------------------------------- configure

// --model, or a GPT given by its shape (resolve_model): configure's and plan's.
void add_model_options(CLI::App* cmd, std::string& model, ModelShape& shape) {
  cmd->add_option("--model", model, "Model (perseus models); or give --layers, --hidden and --heads for a GPT of that shape");
  cmd->add_option("--layers", shape.layers, "Transformer layers (a catalogue model's, or a GPT's with --hidden --heads)")
      ->check(kPositive);
  cmd->add_option("--hidden", shape.hidden, "Hidden size of a GPT given by its shape (no --model)")->check(kPositive);
  cmd->add_option("--heads", shape.heads, "Attention heads of a GPT given by its shape (no --model)")->check(kPositive);
  cmd->add_option("--seq-len", shape.seq_len, "Sequence length (a GPT given by its shape: 2048)")->check(kPositive);
  cmd->add_option("--vocab", shape.vocab, "Vocabulary (a GPT given by its shape: 51200, Megatron-LM's)")->check(kPositive);
}

struct ConfigureArgs {
  ModelShape shape;
  std::string model, gpu, schedule = "1f1b", time_model = "published";
  int gpus = 0, global_batch = 0, top = 10, tensor = 0, pipeline = 0, data = 0, microbatch_size = 0;
  double memory_headroom = -1.0;
  bool no_recompute = false, sequence_parallel = false, megatron_split = false, all = false, json = false,
       quiet = false;
};


void run_configure(const ConfigureArgs& a) {
  const ModelSpec model = resolve_model(a.model, a.shape);
  const GpuSpec& gpu = find_gpu(a.gpu);
  ClusterSpec cluster{&gpu, a.gpus, 0, 0.0};
  SweepOptions options;
  options.global_batch = a.global_batch;
  options.schedules = {parse_schedule_kind(a.schedule)};
  if (a.no_recompute) options.recompute = {false};
  options.sequence_parallel = a.sequence_parallel;
  options.megatron_layer_split = a.megatron_split;
  options.tensor = a.tensor;
  options.pipeline = a.pipeline;
  options.data = a.data;
  if (a.microbatch_size > 0) options.microbatch_sizes = {a.microbatch_size};
  if (a.memory_headroom >= 0.0) options.memory.headroom = a.memory_headroom;
  options.time_model = parse_time_model(a.time_model);
  if (!a.quiet) {
    fmt::print(stderr, "perseus: sweeping configurations of {} on {} {} GPUs\n", model.name, a.gpus, gpu.name);
  }
  const std::vector<ConfigEstimate> all = sweep_configurations(model, cluster, options);
  const std::size_t fit = std::count_if(all.begin(), all.end(), [](const ConfigEstimate& e) { return e.fits; });
  json out{{"model", model.name}, {"gpu", gpu.name}, {"gpus", a.gpus}, {"time_model", to_string(options.time_model)},
           {"global_batch", a.global_batch > 0 ? a.global_batch : model.default_global_batch},
           {"valid", all.size()}, {"fit", fit}, {"configurations", json::array()}};
  std::size_t shown = 0;
  for (const ConfigEstimate& e : all) {
    if (!a.all && (!e.fits || shown >= static_cast<std::size_t>(a.top))) break;
    out["configurations"].push_back(config_json(e));
    ++shown;
  }
  // Nothing fits: an error (exit status 2) that says what would, after the table with --all or --json.
  const bool constrained = a.tensor || a.pipeline || a.data || a.microbatch_size || a.no_recompute;
  const std::string no_fit = fit == 0 ? explain_no_fit(model, cluster, options, all, constrained) : "";
  if (!no_fit.empty()) out["error"] = no_fit;
  if (a.json) {
    print_json(out);
    if (!no_fit.empty()) throw InputError(no_fit);
    return;
  }
  fmt::print("{} on {} {} GPUs, global batch {}: {} valid configurations, {} fit in {}\n", model.name, a.gpus,
             gpu.name, out["global_batch"].get<int>(), all.size(), fit, options.memory.usable_text(gpu.memory_bytes));
  if (fit == 0 && !a.all) throw InputError(no_fit);
  fmt::print("{:<44} {:>9} {:>7} {:>6} {:>9} {:>8}  {}\n", "configuration", "iter s", "bubble", "MFU", "mem GiB",
             "DP s", "placement");
  std::size_t i = 0;
  for (const ConfigEstimate& e : all) {
    if (i++ >= shown) break;
    fmt::print("{:<44} {:>9.3f} {:>6.1f}% {:>5.0f}% {:>9.1f} {:>8.3f}  TP {}, PP {}\n", describe(e.config),
               e.iteration_time_s, 100.0 * e.bubble_share(), 100.0 * e.model_flops_utilization,
               e.memory.total_bytes / kGiB, e.data_parallel_s,
               e.config.tensor == 1 ? "none" : (e.tensor_within_node ? "in node" : "across nodes"),
               pipeline_placement(e));
  }
  if (!no_fit.empty()) throw InputError(no_fit);
}

// -------------------------------------------------------------------------------- schedules

void run_schedules(int stages, int microbatches, int chunks, bool as_json) {
  json out = json::array();
  std::vector<std::string> skipped;
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B,
                            ScheduleKind::k1F1BEarlyRecompute, ScheduleKind::kInterleaved1F1BRecompute,
                            ScheduleKind::kPipeDream, ScheduleKind::kPipeDream2BW}) {
    const int v = is_interleaved(kind) ? chunks : 1;
    json row{{"schedule", to_string(kind)}, {"chunks", v}};
    if (is_interleaved(kind) && (v < 2 || microbatches % stages != 0)) {
      // Said, not dropped: the row names why this shape has no interleaved schedule.
      const std::string why =
          v < 2 ? "needs --chunks >= 2"
                : fmt::format("needs M a multiple of S ({} is not a multiple of {})", microbatches, stages);
      row["skipped"] = why;
      out.push_back(row);
      continue;
    }
    const auto footprint = memory_footprint(kind, stages, microbatches, v);
    row["bubble_fraction"] = bubble_fraction(kind, stages, microbatches, v);
    row["bubble_share"] = bubble_share(kind, stages, microbatches, v);
    row["iteration_time_units"] = iteration_time_closed_form(kind, stages, microbatches, v, 1.0, 2.0);
    row["update_semantics"] = update_semantics(kind);
    row["stages"] = json::array();
    for (const StageFootprint& f : footprint) {
      row["stages"].push_back({{"activation_stashes", f.activation_stashes},
                               {"full_activations", f.full_activations},
                               {"weight_versions", f.weight_versions}});
    }
    out.push_back(row);
  }
  if (as_json) return print_json(out);
  fmt::print("S={} stages, M={} microbatches, v={} chunks (interleaved); time with t_f=1, t_b=2; stage 0's footprint; "
             "bubble: idle share of the iteration (bubble/ideal in --json as bubble_fraction)\n",
             stages, microbatches, chunks);
  fmt::print("{:<27} {:>7} {:>8} {:>16} {:>9}  {}\n", "schedule", "bubble", "time", "stashes (full)", "weights",
             "updates");
  for (const json& row : out) {
    if (row.contains("skipped")) {
      fmt::print("{:<27} {}\n", row["schedule"].get<std::string>(), "-- " + row["skipped"].get<std::string>());
      continue;
    }
    const json& s0 = row["stages"][0];
    fmt::print("{:<27} {:>6.1f}% {:>8.1f} {:>10} ({:>3}) {:>9}  {}\n", row["schedule"].get<std::string>(),
               100.0 * row["bubble_share"].get<double>(), row["iteration_time_units"].get<double>(),
               s0["activation_stashes"].get<int>(), s0["full_activations"].get<int>(), s0["weight_versions"].get<int>(),
               row["update_semantics"].get<std::string>());
  }
}

// ------------------------------------------------------------------------------------- plan

struct PlanArgs {
  PlanRequest request;
  std::string partition = "min-imbalance", out, straggler_list = "1.05,1.1,1.2,1.5", time_model = "published";
  bool force = false, json = false, quiet = false, no_solve = false;
  std::size_t max_plans = 0;
};

json plan_json(const PlanReport& r) {
  json out{{"model", r.model->name},
           {"gpu", r.gpu->name},
           {"time_model", to_string(r.time_model)},
           {"gpus", r.cluster.num_gpus},
           {"global_batch", r.global_batch},
           {"configuration", config_json(r.chosen)},
           {"configurations_valid", r.configurations_valid},
           {"configurations_fit", r.configurations_fit},
           {"runners_up", json::array()},
           {"partition",
            {{"method", to_string(r.partition_method)},
             {"boundaries", r.partition.boundaries},
             {"stage_forward_s", r.partition.stage_weights},
             {"imbalance_ratio", r.partition.imbalance_ratio},
             {"uniform_imbalance_ratio", r.uniform_partition.imbalance_ratio}}},
           {"unit_time_s", r.unit_time},
           {"p_blocking_w", r.p_blocking},
           {"reasons", r.reasons},
           {"warnings", r.warnings}};
  for (const ConfigEstimate& e : r.runners_up) out["runners_up"].push_back(config_json(e));
  if (r.solved) {
    const int tensor = r.chosen.config.tensor, data = r.chosen.config.data;
    json f{{"points", r.frontier.points.size()},
           {"crawl_steps", r.crawl.steps.size()},
           {"t_min_s", r.frontier.t_min_point().measured.time_s},
           {"t_star_s", r.frontier.t_star_point().measured.time_s},
           {"all_max_time_s", r.frontier.all_max.time_s},
           {"all_max_energy_j", r.frontier.all_max.energy_j},
           {"t_min_energy_j", r.frontier.t_min_point().measured.energy_j},
           {"savings_at_t_min_j", r.savings_at_t_min_j},
           {"savings_at_t_min_fraction", r.savings_at_t_min_fraction},
           {"t_min_relaxation_solved", r.frontier.t_min_relaxation_solved},
           {"cluster_savings_at_t_min_j", r.savings_at_t_min_j * tensor * data},
           {"energy_scope", "per pipeline of one GPU per stage; cluster figures multiply by t*d"},
           {"stragglers", json::array()}};
    for (const StragglerSaving& s : r.stragglers) {
      f["stragglers"].push_back({{"slowdown", s.slowdown},
                                 {"straggler_time_s", s.straggler_time_s},
                                 {"plan_time_s", s.plan_time_s},
                                 {"baseline_energy_j", s.baseline_energy_j},
                                 {"perseus_energy_j", s.perseus_energy_j},
                                 {"savings_fraction", s.savings_fraction},
                                 {"cluster_savings_j", (s.baseline_energy_j - s.perseus_energy_j) * tensor * (data - 1)}});
    }
    if (r.frontier.t_min_lower_bound_j) f["t_min_lower_bound_j"] = *r.frontier.t_min_lower_bound_j;
    out["frontier"] = f;
  }
  return out;
}

void run_plan(PlanArgs& a) {
  PlanRequest& request = a.request;
  request.partition = parse_partition_method(a.partition);
  request.time_model = parse_time_model(a.time_model);
  request.straggler_slowdowns.clear();
  std::stringstream in(a.straggler_list);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      request.straggler_slowdowns.push_back(std::stod(item));
    } catch (const std::exception&) {
      throw InputError("--stragglers: expected comma-separated slowdowns such as 1.1,1.2, got '" + item + "'");
    }
  }
  request.solve = !a.no_solve;
  if (!a.out.empty()) check_output_directory(a.out, a.force);  // before the sweep and the solve
  if (!a.quiet) request.progress = [](const std::string& message) { fmt::print(stderr, "perseus: {}\n", message); };
  const PlanReport r = plan_training(request);
  const json summary = plan_json(r);

  if (!a.out.empty()) {
    // One rename puts the whole directory in place: the frontier (when solved) and its plans,
    // the synthetic profile and the plan's summary.
    std::vector<std::pair<std::string, std::string>> files = {{"profile.csv", profile_to_csv(r.profile)},
                                                               {"plan.json", summary.dump(2) + "\n"}};
    if (r.solved) {
      RunInfo info{"(synthetic) " + r.profile.source(), r.schedule, 0.0, r.warnings};
      OutputOptions output;
      output.force = a.force;
      output.max_plans = a.max_plans;
      output.extra_files = std::move(files);
      write_frontier_directory(a.out, *r.problem, r.crawl, r.frontier, info, output);
    } else {
      write_directory_atomically(a.out, a.force, files);
    }
  }
  if (a.json) return print_json(summary);

  const ParallelConfig& c = r.chosen.config;
  fmt::print("{} on {} {} GPUs, global batch {}\n", r.model->name, r.cluster.num_gpus, r.gpu->name, r.global_batch);
  fmt::print("Configuration: {}  (estimated {:.3f} s an iteration, {:.1f} GiB per GPU)\n", describe(c),
             r.chosen.iteration_time_s, r.chosen.memory.total_bytes / kGiB);
  fmt::print("Partition ({}): boundaries {}, forward imbalance {:.3f}\n", to_string(r.partition_method),
             fmt::join(r.partition.boundaries, ","), r.partition.imbalance_ratio);
  fmt::print("Why:\n");
  for (const std::string& reason : r.reasons) fmt::print("  - {}\n", reason);
  for (const std::string& warning : r.warnings) fmt::print("  warning: {}\n", warning);
  if (!r.solved) return;
  const double tmin = r.frontier.t_min_point().measured.time_s;
  fmt::print("Frontier: {} plans from T_min {:.4f} s to T* {:.4f} s ({} crawl steps, unit {:g} s)\n",
             r.frontier.points.size(), tmin, r.frontier.t_star_point().measured.time_s, r.crawl.steps.size(),
             r.unit_time);
  // Two iteration times a user sees side by side: say why they differ.
  const double off = tmin / r.chosen.pipeline_s - 1.0;
  fmt::print("  T_min is the schedule's critical path on the synthetic profile, {:.1f}% {} the estimate's pipeline "
             "time ({:.3f} s), which runs the fill and drain at the slowest stage's pace and adds the transfers "
             "between stages; the gradient all-reduce ({:.3f} s) comes after either\n",
             100.0 * std::abs(off), off <= 0.0 ? "below" : "above", r.chosen.pipeline_s, r.chosen.data_parallel_s);
  fmt::print("Energy per iteration, one pipeline of {} GPUs (one per stage; x{} for all tensor ranks and pipelines):\n",
             c.pipeline, c.tensor * c.data);
  fmt::print("  at T_min: {:.1f} J instead of {:.1f} J all-max: saves {:.1f} J ({:.2f}%) with no slowdown\n",
             r.frontier.t_min_point().measured.energy_j, r.frontier.all_max.energy_j, r.savings_at_t_min_j,
             100.0 * r.savings_at_t_min_fraction);
  if (!r.stragglers.empty()) {
    fmt::print("  with a straggler pipeline (the others run the plan for T_opt = min(T*, T')):\n");
    for (const StragglerSaving& s : r.stragglers) {
      fmt::print("    slowdown {:.2f}: T' = {:.3f} s, plan {:.3f} s, {:.1f} J instead of {:.1f} J: saves {:.2f}%\n",
                 s.slowdown, s.straggler_time_s, s.plan_time_s, s.perseus_energy_j, s.baseline_energy_j,
                 100.0 * s.savings_fraction);
    }
  }
  if (!a.out.empty()) fmt::print("Wrote {} (frontier, plans, profile.csv, plan.json)\n", a.out);
}

}  // namespace

void add_planner_commands(CLI::App& app) {
  static bool models_json = false, gpus_json = false;
  CLI::App* models = app.add_subcommand("models", "List the model catalogue (hyperparameters as published)");
  models->add_flag("--json", models_json, "Print as JSON");
  models->callback([] { run_models(models_json); });
  CLI::App* gpus = app.add_subcommand("gpus", "List the GPU catalogue and each GPU's energy model");
  gpus->add_flag("--json", gpus_json, "Print as JSON");
  gpus->callback([] { run_gpus(gpus_json); });

  CLI::App* profile = app.add_subcommand("profile", "Synthetic profiles and their comparison with measured ones");
  profile->require_subcommand(1);
  static SynthArgs synth;
  CLI::App* s = profile->add_subcommand("synth", "Write a synthetic profile CSV (stage,instruction,frequency,time,energy)");
  s->add_option("--model", synth.model, "Model (perseus models)")->required();
  s->add_option("--gpu", synth.gpu, "GPU (perseus gpus)")->required();
  s->add_option("--stages", synth.stages, "Pipeline stages");
  s->add_option("--microbatch-size", synth.microbatch_size, "Sequences (images) per microbatch")->capture_default_str();
  s->add_option("--tensor-parallel", synth.tensor, "Tensor-parallel degree (the profile is one rank's)")
      ->capture_default_str();
  s->add_option("--seq-len", synth.seq_len, "Sequence length (default: the model's)");
  s->add_flag("--sequence-parallel", synth.sequence_parallel, "Megatron sequence parallelism");
  s->add_option("--partition", synth.method, "min-imbalance, min-max or uniform")->capture_default_str();
  s->add_option("--boundaries", synth.boundaries, "Inner stage boundaries as layer indices, e.g. 13,25,37");
  s->add_option("--min-frequency", synth.min_mhz, "Lowest clock in MHz (default: the GPU's profiling floor)");
  s->add_option("--out", synth.out, "Output CSV ('-': stdout)")->capture_default_str();
  s->add_flag("--force", synth.force, "Replace an existing file");
  s->add_flag("--json", synth.json, "Print the summary as JSON");
  s->callback([] { run_synth(synth); });

  static std::string measured, predicted;
  static bool compare_json = false;
  CLI::App* cmp = profile->add_subcommand("compare", "Relative time and energy errors of one profile against another");
  cmp->add_option("--measured", measured, "Measured profile CSV")->required()->check(CLI::ExistingFile);
  cmp->add_option("--predicted", predicted, "Synthetic profile CSV")->required()->check(CLI::ExistingFile);
  cmp->add_flag("--json", compare_json, "Print as JSON");
  cmp->callback([] { run_compare(measured, predicted, compare_json); });

  static std::vector<std::string> calibration_profiles;
  static std::string published_runs, published_gpu = "a100-sxm";
  static bool fit_collective = false, calibrate_json = false;
  CLI::App* cal = app.add_subcommand(
      "calibrate", "Fit a GPU's energy model to measured profiles named <model>+<gpu>.csv (TP 8, microbatch 1), or its "
                   "time model to published end-to-end runs (--published)");
  cal->footer("Examples:\n  perseus calibrate --profile data/profiles/gpt3-175b+a100-sxm.csv --profile "
              "data/profiles/bloom-176b+a100-sxm.csv\n  perseus calibrate --published data/published/ptdp.csv");
  CLI::Option* profile_option =
      cal->add_option("--profile", calibration_profiles, "Measured profile CSV (repeat for several models)")
          ->check(CLI::ExistingFile);
  CLI::Option* published_option =
      cal->add_option("--published", published_runs,
                      "Published runs CSV (data/published/ptdp.csv): fit the planner's time model (matrix efficiency "
                      "by width, bandwidth-bound passes, collective efficiency) to their throughput, each run also "
                      "left out")
          ->check(CLI::ExistingFile)
          ->excludes(profile_option);
  cal->add_option("--gpu", published_gpu, "--published: the GPU the runs ran on")->capture_default_str();
  cal->add_flag("--fit-collective", fit_collective, "Also fit the tensor-parallel collectives' bandwidth");
  cal->add_flag("--json", calibrate_json, "Print as JSON");
  static std::vector<std::string> held_out_profiles;
  cal->add_option("--held-out", held_out_profiles,
                  "Measured profiles of the same GPU the fit does not see: their errors under the fitted model")
      ->check(CLI::ExistingFile);
  cal->callback([published_option] {
    if (published_option->count() > 0) return run_calibrate_published(published_runs, published_gpu, calibrate_json);
    if (calibration_profiles.empty()) throw InputError("calibrate: give --profile (measured profiles) or --published");
    run_calibrate(calibration_profiles, held_out_profiles, fit_collective, calibrate_json);
  });

  static PartitionArgs part;
  CLI::App* p = app.add_subcommand("partition", "Split a model's layers into pipeline stages");
  p->add_option("--model", part.model, "Model (perseus models)");
  p->add_option("--gpu", part.gpu, "GPU whose time model weighs the layers")->capture_default_str();
  p->add_option("--weights", part.weights, "Layer weights instead of a model: one number per line (or last CSV column)")
      ->check(CLI::ExistingFile);
  p->add_option("--stages", part.stages, "Pipeline stages");
  p->add_option("--method", part.method, "min-imbalance (Perseus), min-max, uniform or pipedream")->capture_default_str();
  p->add_option("--microbatch-size", part.microbatch_size, "Sequences per microbatch")->capture_default_str();
  p->add_option("--tensor-parallel", part.tensor, "Tensor-parallel degree")->capture_default_str();
  p->add_option("--gpus-per-node", part.gpus_per_node, "pipedream: workers per node (default: the GPU's)");
  p->add_option("--nodes", part.nodes, "pipedream: nodes")->capture_default_str();
  p->add_flag("--json", part.json, "Print as JSON");
  p->callback([] { run_partition(part); });

  static ConfigureArgs conf;
  CLI::App* cf = app.add_subcommand("configure", "Sweep tensor/pipeline/data parallelism, microbatch size and "
                                                 "recomputation: what fits and how fast (PTD-P)");
  add_model_options(cf, conf.model, conf.shape);
  cf->add_option("--gpu", conf.gpu, "GPU (perseus gpus)")->required();
  cf->add_option("--gpus", conf.gpus, "Number of GPUs")->required()->check(kPositive);
  cf->add_option("--global-batch", conf.global_batch, "Sequences per iteration (default: the model's published batch)")
      ->check(kPositive);
  cf->add_option("--schedule", conf.schedule,
                 "1f1b, gpipe, interleaved-1f1b, 1f1b-recompute, interleaved-1f1b-recompute, pipedream or pipedream-2bw")
      ->capture_default_str();
  cf->add_option("-t,--tensor-parallel", conf.tensor, "Fix the tensor-parallel degree")->check(kPositive);
  cf->add_option("-p,--pipeline-parallel", conf.pipeline, "Fix the pipeline-parallel degree")->check(kPositive);
  cf->add_option("-d,--data-parallel", conf.data, "Fix the data-parallel degree")->check(kPositive);
  cf->add_option("-b,--microbatch-size", conf.microbatch_size, "Fix the microbatch size")->check(kPositive);
  cf->add_flag("--no-recompute", conf.no_recompute, "Never recompute activations");
  cf->add_option("--memory-headroom", conf.memory_headroom,
                 "Share of each GPU's memory kept free (default 0.05: a configuration fits in 95%)")
      ->check(CLI::Range(0.0, 0.9));
  cf->add_option("--time-model", conf.time_model,
                 "published (default): times fitted to the published PTD-P runs, end to end, where the GPU has such a fit "
                 "(A100, H100 by transfer); profiles: the bundled profiles' computation times (faster at the same "
                 "shape)")
      ->capture_default_str();
  cf->add_flag("--sequence-parallel", conf.sequence_parallel, "Megatron sequence parallelism with t > 1");
  cf->add_flag("--megatron-split", conf.megatron_split,
               "Split the layers as Megatron-LM does: the same number of Transformer layers per (virtual) stage, "
               "the embedding with the first and the head with the last (default: balanced by time)");
  cf->add_option("--top", conf.top, "Show the best N that fit")->capture_default_str();
  cf->add_flag("--all", conf.all, "Show every configuration, also those that do not fit");
  cf->add_flag("--json", conf.json, "Print as JSON");
  cf->add_flag("-q,--quiet", conf.quiet, "No progress messages");
  cf->callback([] { run_configure(conf); });

  static int sched_stages = 4, sched_microbatches = 8, sched_chunks = 2;
  static bool sched_json = false;
  CLI::App* sc = app.add_subcommand("schedules", "Bubble, iteration time, memory footprint and update semantics of "
                                                 "every pipeline schedule");
  sc->add_option("--stages", sched_stages, "Pipeline stages S")->capture_default_str()->check(kPositive);
  sc->add_option("--microbatches", sched_microbatches, "Microbatches M")->capture_default_str()->check(kPositive);
  sc->add_option("--chunks", sched_chunks, "Chunks v for interleaved 1F1B")->capture_default_str()->check(kPositive);
  sc->add_flag("--json", sched_json, "Print as JSON");
  sc->callback([] { run_schedules(sched_stages, sched_microbatches, sched_chunks, sched_json); });

  static PlanArgs plan;
  CLI::App* pl = app.add_subcommand("plan", "From a model and a cluster to a configuration, a partition, a synthetic "
                                            "profile, the frontier and the energy Perseus saves");
  add_model_options(pl, plan.request.model, plan.request.shape);
  pl->add_option("--gpu", plan.request.gpu, "GPU (perseus gpus)")->required();
  pl->add_option("--gpus", plan.request.num_gpus, "Number of GPUs")->required()->check(kPositive);
  pl->add_option("--global-batch", plan.request.global_batch, "Sequences per iteration (default: the model's)")
      ->check(kPositive);
  pl->add_option("-t,--tensor-parallel", plan.request.tensor, "Fix the tensor-parallel degree")->check(kPositive);
  pl->add_option("-p,--pipeline-parallel", plan.request.pipeline, "Fix the pipeline-parallel degree")
      ->check(kPositive);
  pl->add_option("-d,--data-parallel", plan.request.data, "Fix the data-parallel degree")->check(kPositive);
  pl->add_option("-b,--microbatch-size", plan.request.microbatch_size, "Fix the microbatch size")
      ->check(kPositive);
  pl->add_option("--schedule", plan.request.schedule, "1f1b, gpipe, interleaved-1f1b, 1f1b-recompute, "
                                                      "interleaved-1f1b-recompute, pipedream, pipedream-2bw")
      ->capture_default_str();
  pl->add_flag("--no-recompute", [](std::int64_t) { plan.request.allow_recompute = false; },
               "Never recompute activations");
  pl->add_option("--memory-headroom", plan.request.memory_headroom,
                 "Share of each GPU's memory kept free (default 0.05: a configuration fits in 95%)")
      ->check(CLI::Range(0.0, 0.9));
  pl->add_option("--time-model", plan.time_model,
                 "published (default): times fitted to the published PTD-P runs, end to end, where the GPU has such a fit "
                 "(A100, H100 by transfer); profiles: the bundled profiles' computation times (faster at the same "
                 "shape)")
      ->capture_default_str();
  pl->add_option("--partition", plan.partition, "min-imbalance (Perseus), min-max or uniform")->capture_default_str();
  pl->add_option("--unit-time", plan.request.unit_time, "Time quantum tau in seconds (default: chosen)");
  pl->add_option("--p-blocking", plan.request.p_blocking, "Blocking power in W (default: the GPU's)");
  pl->add_option("--stragglers", plan.straggler_list, "Straggler slowdowns T'/T_min to report")->capture_default_str();
  pl->add_flag("--no-solve", plan.no_solve, "Stop after the configuration and the profile");
  pl->add_flag("--no-refine", [](std::int64_t) { plan.request.refine = false; },
               "Keep the crawl's plans as they are (faster; no refinement on the measured options)");
  pl->add_option("--certify", plan.request.certify_seconds,
                 "Seconds the frontier may take after the crawl for tighter bounds and cheaper plans (as perseus "
                 "optimize --certify); also solves T_min's LP relaxation, which large DAGs skip by default (a "
                 "cheaper T_min plan and a tighter bound there, at its cost, beside the crawl and not within those "
                 "seconds: some 100 s on 175B-class models)")
      ->check(CLI::Range(0.0, 86400.0));
  pl->add_option("--out", plan.out, "Write the frontier, plans, profile.csv and plan.json to this directory");
  pl->add_option("--max-plans", plan.max_plans, "Keep at most N plans in plans.bin (0: all)")
      ->check(kNonNegative);
  pl->add_flag("--force", plan.force, "Replace an existing output directory");
  pl->add_flag("--json", plan.json, "Print the summary as JSON");
  pl->add_flag("-q,--quiet", plan.quiet, "No progress messages");
  pl->callback([] { run_plan(plan); });
}

}  // namespace perseus::cli
