#include "perseus/emulator/comparison.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus {
namespace {

// Emulated times are sums of measured times: compare them with a little float slack.
bool fits_in(double time_s, double window_s) { return time_s <= window_s * (1.0 + 1e-9) + 1e-12; }

void report(const std::function<void(const std::string&)>& progress, const std::string& message) {
  if (progress) progress(message);
}

// One pipeline, no straggler, nothing recorded that the tables do not read.
EmulationConfig single_pipeline(const EmulationConfig& config) {
  EmulationConfig single = config;
  single.data_parallel = 1;
  single.stragglers.clear();
  single.record_transfers = false;
  single.detail = TimelineDetail::kListed;
  single.detail_pipelines.clear();
  return single;
}

void mark_pareto(std::vector<MethodPoint>& points) {
  std::stable_sort(points.begin(), points.end(),
                   [](const MethodPoint& a, const MethodPoint& b) { return a.time_s < b.time_s; });
  for (MethodPoint& p : points) {
    p.pareto = std::none_of(points.begin(), points.end(), [&](const MethodPoint& q) {
      return q.time_s <= p.time_s && q.energy_j <= p.energy_j && (q.time_s < p.time_s || q.energy_j < p.energy_j);
    });
  }
}

class PointEmulator {
 public:
  PointEmulator(const EnergyProblem& problem, const EmulationConfig& config,
                std::shared_ptr<const FrequencyTable> clocks)
      : problem_(problem),
        config_(single_pipeline(config)),
        clocks_(clocks ? std::move(clocks)
                       : std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem))) {}

  MethodPoint operator()(std::string setting, OptionChoice choice, std::vector<std::int32_t> clock_mhz = {}) const {
    MethodPoint point;
    point.setting = std::move(setting);
    point.choice = std::move(choice);
    point.clock_mhz = std::move(clock_mhz);
    const ExecutionPlan plan = execution_plan(problem_, point, clocks_);
    const EmulationResult r = emulate(problem_, plan, config_);
    point.time_s = r.iteration_time_s;
    point.energy_j = r.energy.total_j();
    point.late_switches = r.late_switches;
    // What the plan promises: its critical path over measured times, blocking in between.
    point.planned_time_s = critical_path_length<double>(problem_.dag, plan.time_s);
    double busy = 0.0, computation = 0.0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      busy += plan.time_s[i];
      computation += plan.energy_j[i];
    }
    point.planned_energy_j =
        config_.tensor_parallel *
        (computation + problem_.p_blocking * (problem_.dag.num_stages() * point.planned_time_s - busy));
    return point;
  }

  const std::shared_ptr<const FrequencyTable>& clocks() const { return clocks_; }
  int tensor_parallel() const { return config_.tensor_parallel; }

 private:
  const EnergyProblem& problem_;
  EmulationConfig config_;
  std::shared_ptr<const FrequencyTable> clocks_;
};

MethodCurve perseus_curve(const EnergyProblem& problem, const Frontier& frontier, const PointEmulator& run) {
  if (frontier.points.empty()) throw InputError("the frontier has no points");
  MethodCurve curve{kPerseus, {}};
  curve.points.reserve(frontier.points.size());
  for (std::size_t i = 0; i < frontier.points.size(); ++i) {
    const FrontierPoint& point = frontier.points[i];
    if (point.choice.size() != problem.dag.num_nodes()) {
      throw InputError(fmt::format("frontier point {} has {} instructions but the schedule has {} "
                                   "(a frontier of another problem?)",
                                   i, point.choice.size(), problem.dag.num_nodes()));
    }
    curve.points.push_back(run(fmt::format("frontier point {} of {}", i + 1, frontier.points.size()),
                               point.option_choice()));
    if (point.lower_bound_j) curve.points.back().lower_bound_j = run.tensor_parallel() * *point.lower_bound_j;
  }
  mark_pareto(curve.points);
  return curve;
}

MethodCurve baseline_curve(const std::string& method, std::vector<BaselinePlan> plans, const PointEmulator& run) {
  MethodCurve curve{method, {}};
  for (BaselinePlan& plan : plans) curve.points.push_back(run(plan.setting, {}, std::move(plan.clock_mhz)));
  mark_pareto(curve.points);
  return curve;
}

MethodRow make_row(const std::string& method, const MethodPoint* point, double energy_j, double reference_energy_j,
                   double reference_time_s) {
  MethodRow row;
  row.method = method;
  if (!point) return row;
  row.available = true;
  row.setting = point->setting;
  row.time_s = point->time_s;
  row.energy_j = energy_j;
  row.savings_j = reference_energy_j - energy_j;
  row.savings_fraction = reference_energy_j > 0.0 ? row.savings_j / reference_energy_j : 0.0;
  row.slowdown_fraction = reference_time_s > 0.0 ? point->time_s / reference_time_s - 1.0 : 0.0;
  return row;
}

const MethodPoint* least_energy(const MethodCurve& curve) {
  const MethodPoint* best = nullptr;
  for (const MethodPoint& p : curve.points) {
    if (!best || p.energy_j < best->energy_j) best = &p;
  }
  return best;
}

}  // namespace

ExecutionPlan execution_plan(const EnergyProblem& problem, const MethodPoint& point,
                             std::shared_ptr<const FrequencyTable> clocks) {
  if (!point.choice.empty()) return plan_from_choice(problem, point.choice, std::move(clocks));
  return plan_from_clocks(problem, point.clock_mhz, std::move(clocks));
}

const MethodCurve& Comparison::method(const std::string& name) const {
  for (const MethodCurve& curve : methods) {
    if (curve.method == name) return curve;
  }
  throw std::out_of_range("no method named " + name);
}

double energy_over_window(double time_s, double energy_j, double window_s, double p_blocking_w, int gpus) {
  return energy_j + p_blocking_w * gpus * std::max(0.0, window_s - time_s);
}

const MethodPoint* best_within(const MethodCurve& curve, double window_s, double p_blocking_w, int gpus) {
  const MethodPoint* best = nullptr;
  double best_energy = std::numeric_limits<double>::infinity();
  for (const MethodPoint& p : curve.points) {
    if (!fits_in(p.time_s, window_s)) continue;
    const double e = energy_over_window(p.time_s, p.energy_j, window_s, p_blocking_w, gpus);
    if (e < best_energy) {
      best_energy = e;
      best = &p;
    }
  }
  return best;
}

const MethodPoint* perseus_choice(const MethodCurve& curve, double t_prime_s, double p_blocking_w, int gpus) {
  if (curve.points.empty()) return nullptr;
  const MethodPoint* star = &curve.points.front();
  for (const MethodPoint& p : curve.points) {
    if (p.energy_j - p_blocking_w * gpus * p.time_s < star->energy_j - p_blocking_w * gpus * star->time_s) star = &p;
  }
  const double t_opt = std::min(star->time_s, t_prime_s);
  const MethodPoint* chosen = nullptr;
  for (const MethodPoint& p : curve.points) {
    if (!fits_in(p.time_s, t_opt)) continue;
    if (!chosen || p.time_s > chosen->time_s || (p.time_s == chosen->time_s && p.energy_j < chosen->energy_j)) {
      chosen = &p;
    }
  }
  return chosen;
}

Comparison compare_methods(const EnergyProblem& problem, const Frontier& frontier, const ComparisonOptions& options) {
  for (double ratio : options.straggler_ratios) {
    if (!std::isfinite(ratio) || ratio < 1.0) {
      throw InputError(fmt::format("a straggler's T'/T must be >= 1, not {}", ratio));
    }
  }
  const PointEmulator run(problem, options.emulation, options.clocks);
  const FrequencyTable& table = *run.clocks();
  Comparison c;
  c.gpus_per_pipeline = problem.dag.num_stages() * options.emulation.tensor_parallel;
  c.p_blocking_w = problem.p_blocking;
  const int gpus = c.gpus_per_pipeline;
  const double pb = problem.p_blocking;

  report(options.progress, fmt::format("emulating {} frontier points", frontier.points.size()));
  c.methods.push_back(perseus_curve(problem, frontier, run));
  report(options.progress, "emulating the baselines");
  c.methods.push_back(baseline_curve(kAllMax, {all_max(problem, table)}, run));
  c.methods.push_back(baseline_curve(kZeusGlobal, zeus_global(problem, table), run));
  c.methods.push_back(baseline_curve(kZeusPerStage, zeus_per_stage(problem, table), run));
  c.methods.push_back(baseline_curve(kEnvPipe, {envpipe(problem, table)}, run));

  const MethodPoint& max_point = c.method(kAllMax).points.front();
  c.all_max_time_s = max_point.time_s;
  c.all_max_energy_j = max_point.energy_j;
  const MethodCurve& perseus = c.method(kPerseus);
  c.t_min_s = perseus.points.front().time_s;
  c.t_star_s = perseus_choice(perseus, std::numeric_limits<double>::infinity(), pb, gpus)->time_s;

  const double window = c.all_max_time_s;
  for (const MethodCurve& curve : c.methods) {
    const MethodPoint* iso = best_within(curve, window, pb, gpus);
    const double iso_energy = iso ? energy_over_window(iso->time_s, iso->energy_j, window, pb, gpus) : 0.0;
    c.iso_time.push_back(make_row(curve.method, iso, iso_energy, c.all_max_energy_j, window));
    const MethodPoint* cheapest = least_energy(curve);
    c.min_energy.push_back(make_row(curve.method, cheapest, cheapest->energy_j, c.all_max_energy_j, window));
  }

  // Stragglers: the last pipeline runs AllMax slowed by the ratio; the others answer.
  EmulationConfig cluster = options.emulation;
  cluster.data_parallel = std::max(2, options.emulation.data_parallel);
  cluster.record_transfers = false;
  cluster.detail = TimelineDetail::kListed;  // the tables read summaries only
  cluster.detail_pipelines.clear();
  const int others = cluster.data_parallel - 1;
  const ExecutionPlan max_plan = execution_plan(problem, max_point, run.clocks());
  for (double ratio : options.straggler_ratios) {
    report(options.progress, fmt::format("straggler T'/T = {}", ratio));
    EmulationConfig alone = single_pipeline(options.emulation);
    alone.stragglers = {{0, ratio, 0.0}};
    StragglerRow row;
    row.ratio = ratio;
    row.t_prime_s = emulate(problem, max_plan, alone).iteration_time_s;
    cluster.stragglers = {{cluster.data_parallel - 1, ratio, 0.0}};
    double reference = 0.0;
    for (const MethodCurve& curve : c.methods) {
      const MethodPoint* point = curve.method == kPerseus ? perseus_choice(curve, row.t_prime_s, pb, gpus)
                                                          : best_within(curve, row.t_prime_s, pb, gpus);
      double energy = 0.0;
      if (point) {
        const EmulationResult r = emulate(problem, execution_plan(problem, *point, run.clocks()), cluster, &max_plan);
        for (const PipelineSummary& p : r.pipelines) {
          if (!p.straggler) energy += p.energy.total_j();
        }
        energy /= others;
      }
      if (curve.method == kAllMax) reference = energy;
      row.methods.push_back(make_row(curve.method, point, energy, 0.0, window));
    }
    for (MethodRow& m : row.methods) {
      if (!m.available) continue;
      m.savings_j = reference - m.energy_j;
      m.savings_fraction = reference > 0.0 ? m.savings_j / reference : 0.0;
    }
    c.stragglers.push_back(std::move(row));
  }
  return c;
}

LargeScaleRow large_scale_row(const Profile& profile, const std::string& workload, int microbatches,
                              const OptionsConfig& options_config, const LargeScaleOptions& options) {
  if (microbatches < 1 || options.global_microbatches % microbatches != 0) {
    throw InputError(fmt::format("{} microbatches do not divide the global batch of {} microbatches", microbatches,
                                 options.global_microbatches));
  }
  LargeScaleRow row;
  row.workload = workload;
  row.microbatches = microbatches;
  row.pipelines = options.global_microbatches / microbatches;
  row.gpus = row.pipelines * options.stages * options.tensor_parallel;

  SolveRequest request;
  request.schedule = {ScheduleKind::k1F1B, options.stages, microbatches, 1, false};
  request.options = options_config;
  request.frontier = options.frontier;
  report(options.progress, fmt::format("{}, {} microbatches: solving the frontier", workload, microbatches));
  const Solution solution = solve(profile, request);
  const EnergyProblem& problem = solution.problem;
  const Frontier& frontier = solution.frontier;
  row.solve_s = solution.solve_seconds();
  row.crawl_steps = solution.crawl.steps.size();
  row.frontier_points = frontier.points.size();

  EmulationConfig cluster = options.emulation;
  cluster.data_parallel = row.pipelines;
  cluster.tensor_parallel = options.tensor_parallel;
  cluster.stragglers.clear();
  cluster.record_transfers = false;
  cluster.detail = TimelineDetail::kListed;
  cluster.detail_pipelines.clear();
  report(options.progress, fmt::format("{}, {} microbatches: emulating {} pipelines ({} GPUs)", workload, microbatches,
                                       row.pipelines, row.gpus));
  const PointEmulator run(problem, cluster,
                          std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, profile)));
  const MethodCurve perseus = perseus_curve(problem, frontier, run);
  const MethodPoint max_point = run("AllMax", {}, all_max(problem, *run.clocks()).clock_mhz);
  const int gpus = options.stages * options.tensor_parallel;
  const MethodPoint* iso = best_within(perseus, max_point.time_s, problem.p_blocking, gpus);
  const MethodPoint* star = perseus_choice(perseus, std::numeric_limits<double>::infinity(), problem.p_blocking, gpus);

  // The whole cluster, every pipeline emulated explicitly.
  const auto whole = [&](const MethodPoint& point) {
    return emulate(problem, execution_plan(problem, point, run.clocks()), cluster);
  };
  const EmulationResult max_run = whole(max_point);
  row.all_max_time_s = max_run.iteration_time_s;
  row.all_max_energy_j = max_run.energy.total_j();
  if (iso) {
    const EmulationResult r = whole(*iso);
    row.perseus_time_s = r.iteration_time_s;
    row.perseus_energy_j =
        energy_over_window(r.iteration_time_s, r.energy.total_j(), row.all_max_time_s, problem.p_blocking, r.num_gpus());
  } else {  // no plan keeps up with AllMax (switching latency): Perseus runs AllMax
    row.perseus_time_s = row.all_max_time_s;
    row.perseus_energy_j = row.all_max_energy_j;
  }
  row.savings_fraction = 1.0 - row.perseus_energy_j / row.all_max_energy_j;
  const EmulationResult s = whole(*star);
  row.t_star_time_s = s.iteration_time_s;
  row.t_star_energy_j = s.energy.total_j();
  row.t_star_savings_fraction = 1.0 - row.t_star_energy_j / row.all_max_energy_j;
  return row;
}

}  // namespace perseus
