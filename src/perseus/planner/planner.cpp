#include "perseus/planner/planner.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void report(const PlanRequest& request, const std::string& message) {
  if (request.progress) request.progress(message);
}

// 1, 2 or 5 times a power of ten, at least `value`.
double round_up_125(double value) {
  const double decade = std::pow(10.0, std::floor(std::log10(value)));
  for (double k : {1.0, 2.0, 5.0, 10.0}) {
    if (k * decade >= value * (1.0 - 1e-12)) return k * decade;
  }
  return 10.0 * decade;
}

// Enough resolution for the shortest operation's range of durations (25 units, as the reference
// has with 1 ms on A100 forwards), but at most about 20,000 crawl steps.
double choose_unit_time(const Profile& profile, int stages, int microbatches) {
  double smallest_range = std::numeric_limits<double>::infinity();
  double slowest_stage_span = 0.0;
  for (int s = 0; s < stages; ++s) {
    double span = 0.0;
    for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
      const OperationProfile* op = profile.find(s, kind);
      if (!op) continue;
      double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
      for (const Measurement& m : op->measurements) {
        lo = std::min(lo, m.time_s);
        hi = std::max(hi, m.time_s);
      }
      if (hi > lo) smallest_range = std::min(smallest_range, hi - lo);
      span += hi - lo;
    }
    slowest_stage_span = std::max(slowest_stage_span, span);
  }
  if (!std::isfinite(smallest_range)) return 1e-3;
  const double crawl_span = (microbatches + stages - 1.0) * slowest_stage_span;
  return round_up_125(std::max(smallest_range / 25.0, crawl_span / 20000.0));
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

// What would fit when nothing fits on the requested GPUs: the same model on 2x, 4x, ... GPUs.
std::string what_would_fit(const ModelSpec& model, const ClusterSpec& cluster, const SweepOptions& options) {
  for (int factor = 2; factor <= 1024; factor *= 2) {
    ClusterSpec bigger = cluster;
    bigger.num_gpus = cluster.num_gpus * factor;
    SweepOptions relaxed = options;
    relaxed.tensor = relaxed.pipeline = relaxed.data = 0;
    try {
      const auto estimates = sweep_configurations(model, bigger, relaxed);
      if (estimates.front().fits) {
        return fmt::format("it would fit on {} GPUs, e.g. {} ({} per GPU)", bigger.num_gpus,
                           describe(estimates.front().config), gib(estimates.front().memory.total_bytes));
      }
    } catch (const InputError&) {
    }
  }
  return "no configuration up to 1024x as many GPUs fits either";
}

}  // namespace

std::string explain_no_fit(const ModelSpec& model, const ClusterSpec& cluster, const SweepOptions& sweep,
                           const std::vector<ConfigEstimate>& estimates, bool constrained) {
  const GpuSpec& gpu = *cluster.gpu;
  const ConfigEstimate& leanest = estimates.front();
  const std::string message = fmt::format(
      "{} does not fit on {} {} GPUs ({} each){}: the leanest configuration ({}) needs {} per GPU", model.name,
      cluster.num_gpus, gpu.name, sweep.memory.usable_text(gpu.memory_bytes), constrained ? " with the degrees given" : "",
      describe(leanest.config), gib(leanest.memory.total_bytes));
  if (constrained) {
    SweepOptions free = sweep;
    free.tensor = free.pipeline = free.data = 0;
    free.microbatch_sizes = SweepOptions{}.microbatch_sizes;
    free.recompute = {false, true};
    try {
      const auto any = sweep_configurations(model, cluster, free);
      if (any.front().fits) {
        return message + fmt::format("; on {} GPUs, {} fits ({} per GPU)", cluster.num_gpus,
                                     describe(any.front().config), gib(any.front().memory.total_bytes));
      }
    } catch (const InputError&) {
    }
  }
  return message + "; " + what_would_fit(model, cluster, sweep);
}

EnergyProblem make_async_window_problem(const Profile& profile, int stages, int window, bool recompute,
                                        const OptionsConfig& config, std::vector<Warning>* warnings) {
  // The operations of one microbatch of the flushed order are those of every window node:
  // make_problem binds them (and checks the profile); the window only needs its own DAG.
  const ScheduleKind kind = recompute ? ScheduleKind::k1F1BEarlyRecompute : ScheduleKind::k1F1B;
  EnergyProblem one = make_problem(profile, ScheduleSpec{kind, stages, 1, 1, false}, config, warnings);
  std::map<std::pair<int, InstructionKind>, std::int32_t> operation;
  for (std::size_t n = 0; n < one.dag.num_nodes(); ++n) {
    const auto id = static_cast<Dag::NodeId>(n);
    operation[{one.dag.virtual_stage(id), one.dag.instruction(id).kind}] = one.node_operation[n];
  }
  Dag dag = Dag::steady_state_window(async_window_schedule(stages, window, recompute));
  std::vector<std::int32_t> node_operation(dag.num_nodes());
  for (std::size_t n = 0; n < dag.num_nodes(); ++n) {
    const auto id = static_cast<Dag::NodeId>(n);
    node_operation[n] = operation.at({dag.virtual_stage(id), dag.instruction(id).kind});
  }
  return EnergyProblem{std::move(dag), std::move(one.operations), std::move(node_operation), one.unit_time,
                       one.p_blocking};
}

std::string_view to_string(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::kMinImbalance: return "min-imbalance";
    case PartitionMethod::kMinMax: return "min-max";
    case PartitionMethod::kUniform: return "uniform";
  }
  return "unknown";
}

PartitionMethod parse_partition_method(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key == "min-imbalance" || key == "perseus") return PartitionMethod::kMinImbalance;
  if (key == "min-max" || key == "balanced") return PartitionMethod::kMinMax;
  if (key == "uniform") return PartitionMethod::kUniform;
  throw InputError("unknown partition method '" + std::string(name) + "'; known methods: min-imbalance, min-max, uniform");
}

std::vector<double> layer_forward_times(const EnergyModel& model, std::span<const LayerCost> layers,
                                        int tensor_parallel) {
  const double bw = collective_bandwidth(model.gpu(), tensor_parallel, model.params().collective_scale);
  std::vector<double> out;
  out.reserve(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const OperationWork work = operation_work(layers.subspan(l, 1), InstructionKind::kForward);
    out.push_back(model.time_at_max(work, InstructionKind::kForward, bw));
  }
  return out;
}

Partition partition_layers(const EnergyModel& model, std::span<const LayerCost> layers, int tensor_parallel,
                           int stages, PartitionMethod method) {
  const std::vector<double> weights = layer_forward_times(model, layers, tensor_parallel);
  switch (method) {
    case PartitionMethod::kMinImbalance: return min_imbalance_partition(weights, stages);
    case PartitionMethod::kMinMax: return min_max_partition(weights, stages);
    case PartitionMethod::kUniform: return uniform_partition(weights, stages);
  }
  throw InputError("unknown partition method");
}

PlanReport plan_training(const PlanRequest& request) {
  PlanReport out;
  out.model = std::make_shared<const ModelSpec>(resolve_model(request.model, request.shape));
  const ModelSpec& model = *out.model;
  const GpuSpec& gpu = find_gpu(request.gpu);
  out.gpu = &gpu;
  if (request.num_gpus < 1) throw InputError("plan: --gpus must be at least 1");
  if (request.global_batch < 0) throw InputError("plan: --global-batch must be positive");  // 0: the model's
  out.global_batch = request.global_batch > 0 ? request.global_batch : model.default_global_batch;
  out.cluster = ClusterSpec{&gpu, request.num_gpus, 0, 0.0};
  const int node = out.cluster.nodes_gpus_per_node();

  for (auto [value, name] : {std::pair{request.tensor, "--tensor-parallel"}, std::pair{request.pipeline, "--pipeline-parallel"},
                             std::pair{request.data, "--data-parallel"}}) {
    if (value < 0) throw InputError(fmt::format("plan: {} must be positive", name));
    if (value > 0 && request.num_gpus % value != 0) {
      throw InputError(fmt::format("plan: {} {} does not divide the {} GPUs", name, value, request.num_gpus));
    }
  }
  const long long fixed_product = static_cast<long long>(std::max(request.tensor, 1)) * std::max(request.pipeline, 1) *
                                  std::max(request.data, 1);
  if (request.num_gpus % fixed_product != 0) {
    throw InputError(fmt::format("plan: the fixed degrees multiply to {}, which does not divide the {} GPUs",
                                 fixed_product, request.num_gpus));
  }
  if (request.tensor > 0 && request.pipeline > 0 && request.data > 0 && fixed_product != request.num_gpus) {
    throw InputError(fmt::format("plan: t*p*d = {} but there are {} GPUs", fixed_product, request.num_gpus));
  }

  SweepOptions sweep;
  sweep.global_batch = out.global_batch;
  sweep.tensor = request.tensor;
  sweep.pipeline = request.pipeline;
  sweep.data = request.data;
  if (request.microbatch_size > 0) sweep.microbatch_sizes = {request.microbatch_size};
  if (request.memory_headroom >= 0.0) sweep.memory.headroom = request.memory_headroom;
  sweep.time_model = request.time_model;
  out.time_model = gpu.published_fit ? request.time_model : TimeModel::kProfiles;
  const ScheduleKind schedule = parse_schedule_kind(request.schedule);
  sweep.schedules = {schedule};
  if (!request.allow_recompute) sweep.recompute = {false};
  if (recomputes(schedule)) sweep.recompute = {true};

  report(request, fmt::format("sweeping configurations of {} on {} {} GPUs", model.name, request.num_gpus, gpu.name));
  const std::vector<ConfigEstimate> estimates = sweep_configurations(model, out.cluster, sweep);
  out.configurations_valid = estimates.size();
  out.configurations_fit = std::count_if(estimates.begin(), estimates.end(), [](const auto& e) { return e.fits; });
  if (out.configurations_fit == 0) {
    const bool constrained = request.tensor || request.pipeline || request.data || request.microbatch_size ||
                             !request.allow_recompute;
    throw InputError(explain_no_fit(model, out.cluster, sweep, estimates, constrained));
  }
  out.chosen = estimates.front();
  for (std::size_t i = 1; i < estimates.size() && out.runners_up.size() < 4; ++i) {
    if (estimates[i].fits) out.runners_up.push_back(estimates[i]);
  }
  const ParallelConfig& config = out.chosen.config;

  // Why this configuration.
  out.reasons.push_back(fmt::format(
      "configuration {}: the fastest of {} that fit in {} (of {} valid): about {:.3f} s an iteration, "
      "{:.0f}% model FLOPs utilisation, {} per GPU",
      describe(config), out.configurations_fit, sweep.memory.usable_text(gpu.memory_bytes), out.configurations_valid,
      out.chosen.iteration_time_s, 100.0 * out.chosen.model_flops_utilization, gib(out.chosen.memory.total_bytes)));
  if (config.tensor > 1) {
    out.reasons.push_back(fmt::format("tensor parallelism {} {} a node of {} GPUs ({}){}", config.tensor,
                                      out.chosen.tensor_within_node ? "stays inside"
                                      : config.tensor > node        ? "spans more than"
                                                                    : "does not divide, so some groups straddle",
                                      node,
                                      gpu.intra_node_link,
                                      out.chosen.tensor_within_node
                                          ? ": its all-reduces in every layer stay on the fast link (Megatron-LM guidance)"
                                          : ": its all-reduces cross the network, against Megatron-LM's guidance"));
  } else {
    out.reasons.push_back("no tensor parallelism: the model fits without splitting its layers");
  }
  if (config.pipeline > 1) {
    out.reasons.push_back(fmt::format("pipeline parallelism {} ({}): bubble {:.1f}% of the iteration with {} "
                                      "microbatches per pipeline",
                                      config.pipeline, pipeline_placement(out.chosen), 100.0 * out.chosen.bubble_share(),
                                      config.microbatches));
  }
  if (config.data > 1) {
    out.reasons.push_back(fmt::format("data parallelism {} for the remaining GPUs: a {} gradient all-reduce takes "
                                      "about {:.3f} s an iteration",
                                      config.data, gib(out.chosen.data_bytes), out.chosen.data_parallel_s));
  }
  if (config.recompute) {
    out.reasons.push_back("activation recomputation: without it the activations do not fit");
  }
  if (!out.runners_up.empty()) {
    const ConfigEstimate& next = out.runners_up.front();
    out.reasons.push_back(fmt::format("next best: {} ({:+.1f}% iteration time)", describe(next.config),
                                      100.0 * (next.iteration_time_s / out.chosen.iteration_time_s - 1.0)));
  }

  // Partition at the chosen microbatch size and tensor parallelism.
  out.layers = model_layers(model, Workload{config.microbatch_size, config.tensor, 0, config.sequence_parallel, false});
  const EnergyModel energy(gpu, planning_params(gpu, request.time_model));
  const int virtual_stages = config.pipeline * config.chunks;
  out.partition_method = request.partition;
  out.partition = partition_layers(energy, out.layers, config.tensor, virtual_stages, request.partition);
  out.uniform_partition = partition_layers(energy, out.layers, config.tensor, virtual_stages, PartitionMethod::kUniform);
  out.reasons.push_back(fmt::format(
      "partition {}: {} layers into {} stages, forward-time imbalance {:.3f} (equal layer counts: {:.3f})",
      to_string(request.partition), out.layers.size(), virtual_stages, out.partition.imbalance_ratio,
      out.uniform_partition.imbalance_ratio));

  // The profile of every (virtual) stage, the schedule, and the frontier.
  SynthesisOptions synthesis;
  synthesis.recompute = config.recompute;
  out.profile = synthesize_profile(energy, out.layers, out.partition.boundaries, config.tensor, synthesis,
                                   fmt::format("synthetic {} on {} ({})", model.name, gpu.name, describe(config)));
  std::string calibration = gpu.calibrated ? "calibrated on measured profiles" : gpu.calibration;
  if (request.time_model == TimeModel::kPublishedRuns && gpu.published_fit) {
    calibration = fmt::format("times fitted to {}; power {}", gpu.published_fit_source,
                              gpu.calibrated ? "fitted to measured profiles" : gpu.calibration);
  }
  out.reasons.push_back(fmt::format("profile synthesised from {}'s energy model, {}", gpu.name, calibration));
  out.schedule = ScheduleSpec{core_schedule_kind(config.schedule), config.pipeline, config.microbatches, config.chunks,
                              false};
  if (config.recompute && !recomputes(config.schedule) && flushes(config.schedule)) {
    out.warnings.push_back(fmt::format("the core builds recomputation instructions only for 1F1B and interleaved 1F1B; the {} frontier "
                                       "leaves them out, so its times miss one forward per microbatch",
                                       to_string(config.schedule)));
  }
  if (!flushes(config.schedule)) {
    // What cutting the steady state into windows costs, with the slowest stage's times.
    const double tf = out.chosen.stage_forward_s, tb = out.chosen.stage_backward_s;
    const double steady = config.microbatches * (tf + tb);
    out.reasons.push_back(fmt::format(
        "{} has no flush: the frontier is computed on a steady-state window of {} microbatches of 1F1B without "
        "fill or drain, run back to back (the cut between windows adds at most {:.2f}% with equal stages)",
        to_string(config.schedule), config.microbatches,
        100.0 * (async_window_time_closed_form(config.pipeline, config.microbatches, tf, tb) - steady) / steady));
  }
  out.p_blocking = request.p_blocking > 0.0 ? request.p_blocking : gpu.p_blocking_w;
  out.unit_time = request.unit_time > 0.0 ? request.unit_time
                                          : choose_unit_time(out.profile, virtual_stages, config.microbatches);
  if (request.unit_time <= 0.0) {
    out.reasons.push_back(fmt::format("unit time {:g} s: at least 25 steps across the shortest operation's range "
                                      "of durations, at most about 20,000 crawl steps",
                                      out.unit_time));
  }
  if (!request.solve) return out;

  std::vector<Warning> warnings;
  const OptionsConfig options_config{out.unit_time, out.p_blocking, {}};
  if (flushes(config.schedule)) {
    report(request, fmt::format("building the {} DAG: {} stages x {} microbatches", to_string(out.schedule.kind),
                                out.schedule.stages, out.schedule.microbatches));
    out.problem.emplace(make_problem(out.profile, out.schedule, options_config, &warnings));
  } else {
    report(request, fmt::format("building the steady-state window DAG: {} stages x {} microbatches",
                                config.pipeline, config.microbatches));
    out.problem.emplace(make_async_window_problem(out.profile, config.pipeline, config.microbatches, config.recompute,
                                                  options_config, &warnings));
    out.warnings.push_back(fmt::format(
        "the plans are for one steady-state window, repeated: summary.json names its 1f1b order, but the window's "
        "microbatch labels run 0..{} (stage s begins s+1 instructions into the 1F1B steady state)",
        config.microbatches + config.pipeline - 1));
  }
  for (const Warning& w : warnings) out.warnings.push_back(w.message);
  SolveRequest solve_request;
  solve_request.frontier.refine = request.refine;
  solve_request.frontier.certify_for(request.certify_seconds);
  if (request.progress) {
    // Every 5,000 crawl steps, and every tenth of the frontier: refining a long frontier
    // takes minutes on large pipelines.
    solve_request.progress = [&request, last_step = std::size_t{0}, last_tenth = std::size_t{0}](
                                 const SolveProgress& p) mutable {
      if (p.phase == SolveProgress::Phase::kCrawl) {
        if (p.done < last_step + 5000) return;
        last_step = p.done;
        report(request, fmt::format("crawl step {} of at most {}", p.done, p.total));
        return;
      }
      const std::size_t tenth = p.total > 0 ? 10 * p.done / p.total : 10;
      if (tenth <= last_tenth) return;
      last_tenth = tenth;
      report(request, fmt::format("frontier: {} of {} candidate plans done", p.done, p.total));
    };
  }
  report(request, fmt::format("solving: crawling the frontier ({} nodes), then {}", out.problem->dag.num_nodes(),
                              request.refine ? "refining the plans on the measured options (--no-refine skips that)"
                                             : "the plans as the crawl made them (no refinement)"));
  Solution solution = solve(std::move(*out.problem), solve_request);
  out.problem.emplace(std::move(solution.problem));
  out.crawl = std::move(solution.crawl);
  out.frontier = std::move(solution.frontier);
  report(request, fmt::format("frontier: {} points from {} crawl steps in {:.1f} s", out.frontier.points.size(),
                              out.crawl.steps.size(), solution.solve_seconds()));
  out.solved = true;

  const FrontierPoint& fastest = out.frontier.t_min_point();
  out.savings_at_t_min_j = out.frontier.all_max.energy_j - fastest.measured.energy_j;
  out.savings_at_t_min_fraction = out.savings_at_t_min_j / out.frontier.all_max.energy_j;
  const double s = out.problem->num_gpus();
  for (double slowdown : request.straggler_slowdowns) {
    if (!(slowdown >= 1.0)) throw InputError("plan: straggler slowdowns must be at least 1");
    StragglerSaving row;
    row.slowdown = slowdown;
    row.straggler_time_s = slowdown * fastest.measured.time_s;
    const FrontierPoint* point = select_for_deadline(out.frontier, row.straggler_time_s);
    if (!point) continue;
    row.plan_time_s = point->measured.time_s;
    const double wait = std::max(0.0, row.straggler_time_s - out.frontier.all_max.time_s);
    row.baseline_energy_j = out.frontier.all_max.energy_j + out.p_blocking * s * wait;
    row.perseus_energy_j = energy_at(*out.problem, *point, std::max(row.straggler_time_s, point->measured.time_s));
    row.savings_fraction = 1.0 - row.perseus_energy_j / row.baseline_energy_j;
    out.stragglers.push_back(row);
  }
  return out;
}

}  // namespace perseus::planner
