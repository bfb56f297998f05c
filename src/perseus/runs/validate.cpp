#include "perseus/runs/validate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <memory>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "perseus/emulator/emulator.hpp"
#include "perseus/emulator/frequency_table.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/model/statistics.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus::runs {
namespace {

constexpr int kFeatures = 5;  // forward a, b; backward a, b; blocked
using Row = std::array<double, kFeatures>;
constexpr double kKindTie = 1e-3;  // relative to the normal matrix's trace

// Least squares on the first `n` features by the normal equations (at most 5 unknowns):
// Gaussian elimination with partial pivoting; a tiny ridge keeps a kind measured at a single
// clock solvable.
std::array<double, kFeatures> least_squares(const std::vector<Row>& x, const std::vector<double>& y, int n) {
  std::array<std::array<double, kFeatures + 1>, kFeatures> a{};
  for (std::size_t r = 0; r < x.size(); ++r)
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) a[i][j] += x[r][i] * x[r][j];
      a[i][n] += x[r][i] * y[r];
    }
  double trace = 0.0;
  for (int i = 0; i < n; ++i) trace += a[i][i];
  for (int i = 0; i < n; ++i) a[i][i] += 1e-12 * trace;
  // Forward and backward times move together (both with the clock), so their separate powers
  // are barely identified: a penalty on their difference keeps them physical (one power line
  // unless the data says otherwise) without changing the iteration energy much.
  if (n >= 4) {
    const double lambda = kKindTie * trace;
    for (int k = 0; k < 2; ++k) {
      a[k][k] += lambda, a[k + 2][k + 2] += lambda;
      a[k][k + 2] -= lambda, a[k + 2][k] -= lambda;
    }
  }
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    if (a[c][c] == 0.0) throw InputError("energy fit: too few runs to fit the energy model");
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::array<double, kFeatures> out{};
  for (int i = 0; i < n; ++i) out[i] = a[i][n] / a[i][i];
  return out;
}

// The model's features for one rank: durations in one_f_one_b order at their clocks.
Row features(const std::vector<Step>& order, const std::vector<double>& durations, const std::vector<int>& clocks,
             double iteration_s) {
  Row row{};
  double busy = 0.0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const double t = durations[k];
    const double f = clocks[k] / 1000.0;
    const int base = order[k].forward ? 0 : 2;
    row[base] += t;
    row[base + 1] += t * f;
    busy += t;
  }
  row[4] = std::max(0.0, iteration_s - busy);
  return row;
}

std::vector<double> measured_durations(const RankRun& rr, const std::vector<Step>& order) {
  std::vector<double> d;
  d.reserve(order.size());
  for (const Step& s : order) d.push_back((s.forward ? rr.forward_s : rr.backward_s)[static_cast<std::size_t>(s.microbatch)]);
  return d;
}

// Time at `clock` from the profile of (stage, kind): exact, else linear between the nearest
// measured clocks below and above, else the nearest one.
double lookup(const std::map<int, double>& by_clock, int clock, int stage, bool forward) {
  if (by_clock.empty())
    throw InputError(fmt::format("stage {}: no {} measured in the other runs", stage, forward ? "forward" : "backward"));
  const auto hi = by_clock.lower_bound(clock);
  if (hi != by_clock.end() && hi->first == clock) return hi->second;
  if (hi == by_clock.begin()) return hi->second;
  if (hi == by_clock.end()) return std::prev(hi)->second;
  const auto lo = std::prev(hi);
  const double w = static_cast<double>(clock - lo->first) / (hi->first - lo->first);
  return lo->second + w * (hi->second - lo->second);
}

}  // namespace

EnergyFit fit_energy(const RunTable& table, int exclude, double blocked_w) {
  EnergyFit fit;
  double sq = 0.0;
  int rows = 0;
  for (int s = 0; s < table.stages; ++s) {
    const auto order = one_f_one_b(s, table.stages, table.microbatches);
    std::vector<Row> x;
    std::vector<double> y;
    for (const Run& run : table.runs) {
      if (run.id == exclude) continue;
      const RankRun& rr = run.ranks[static_cast<std::size_t>(s)];
      x.push_back(features(order, measured_durations(rr, order), rr.clocks, rr.iter_time_s));
      y.push_back(rr.iter_energy_j);
    }
    // A given blocked power is taken out of the energy first: fitted, it trades off against the
    // compute powers (the iteration time barely varies between runs) and the fit extrapolates badly.
    std::vector<double> y_fit = y;
    if (blocked_w >= 0.0)
      for (std::size_t r = 0; r < x.size(); ++r) y_fit[r] -= blocked_w * x[r][4];
    auto c = least_squares(x, y_fit, blocked_w >= 0.0 ? 4 : 5);
    if (blocked_w >= 0.0) c[4] = blocked_w;
    fit.stages.push_back({c[0], c[1], c[2], c[3], c[4]});
    for (std::size_t r = 0; r < x.size(); ++r) {
      double e = 0.0;
      for (int i = 0; i < kFeatures; ++i) e += c[i] * x[r][i];
      sq += std::pow(e / y[r] - 1.0, 2);
      ++rows;
    }
  }
  fit.rms_residual = rows ? std::sqrt(sq / rows) : 0.0;
  return fit;
}

std::vector<ProfileEntry> profile_with_energy(const RunTable& table, int exclude, double blocked_w) {
  const EnergyFit fit = fit_energy(table, exclude, blocked_w);
  auto entries = time_profile(table, exclude);
  for (auto& e : entries) {
    const StagePower& w = fit.stages[static_cast<std::size_t>(e.stage)];
    e.energy_j = (e.forward ? w.forward_w(e.clock) : w.backward_w(e.clock)) * e.time_s;
  }
  return entries;
}

namespace {

// The run as the emulator runs it: the 1F1B schedule of the table's shape bound to a profile,
// and each instruction's time and energy given per run (the plans below), not looked up.
struct EmulatedPipeline {
  EnergyProblem problem;
  std::shared_ptr<const FrequencyTable> clocks;
  // Per DAG node: its stage and its position in one_f_one_b(stage, ...), where the run tables
  // keep durations and clocks.
  std::vector<int> stage, position;
};

EmulatedPipeline emulated_pipeline(const RunTable& table, const std::vector<ProfileEntry>& entries, double p_blocking) {
  const Profile profile = to_profile(entries, table.dir.string());
  SolveRequest request;
  request.schedule = {ScheduleKind::k1F1B, table.stages, table.microbatches, 1, false};
  request.options.p_blocking = p_blocking;
  request.options.fit_costs = false;
  ScheduleSpec resolved;
  EmulatedPipeline out{make_problem(profile, request, &resolved, nullptr), nullptr, {}, {}};
  out.clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(out.problem, profile));
  const Dag& dag = out.problem.dag;
  out.stage.resize(dag.num_nodes());
  out.position.resize(dag.num_nodes());
  for (int s = 0; s < table.stages; ++s) {
    const auto order = one_f_one_b(s, table.stages, table.microbatches);
    std::map<std::pair<bool, int>, int> at;
    for (std::size_t k = 0; k < order.size(); ++k) at[{order[k].forward, order[k].microbatch}] = static_cast<int>(k);
    for (Dag::NodeId n : dag.stage_nodes(s)) {
      const Instruction& ins = dag.instruction(n);
      out.stage[n] = s;
      out.position[n] = at.at({ins.kind == InstructionKind::kForward, ins.microbatch});
    }
  }
  return out;
}

// A plan of per-stage durations (one_f_one_b order) at a run's clocks; energy from `power`
// (per stage: W while computing at the clock), none when null.
ExecutionPlan plan_of(const EmulatedPipeline& pipeline, const Run& run, const std::vector<std::vector<double>>& durations,
                      const EnergyFit* power) {
  const Dag& dag = pipeline.problem.dag;
  ExecutionPlan plan;
  plan.clocks = pipeline.clocks;
  for (std::size_t n = 0; n < dag.num_nodes(); ++n) {
    const int s = pipeline.stage[n], k = pipeline.position[n];
    const double t = durations[s][k];
    const int clock = run.ranks[s].clocks[k];
    const bool forward = dag.instruction(static_cast<Dag::NodeId>(n)).kind == InstructionKind::kForward;
    double watts = 0.0;
    if (power) watts = forward ? power->stages[s].forward_w(clock) : power->stages[s].backward_w(clock);
    plan.frequency_mhz.push_back(clock);
    plan.time_s.push_back(t);
    plan.energy_j.push_back(watts * t);
  }
  return plan;
}

}  // namespace

Validation validate(const RunTable& table, const ValidateOptions& options, const std::function<void(int, int)>& progress) {
  if (table.runs.size() < 3) throw InputError(fmt::format("{}: leave-one-out needs at least 3 runs, found {}",
                                                          table.dir.string(), table.runs.size()));
  const int S = table.stages, M = table.microbatches;
  std::vector<std::vector<Step>> orders;
  for (int s = 0; s < S; ++s) orders.push_back(one_f_one_b(s, S, M));
  const auto load_per_forward = [&](const Run& run, int stage) { return run.ranks[stage].load_s / M; };
  // The emulator with a run's data loading (the first and the last stage's, per microbatch).
  const auto loading = [&](double first, double last) {
    EmulationConfig config;
    config.detail = TimelineDetail::kListed;
    config.record_transfers = false;
    if (options.data_loading) {
      config.overheads.first_stage_load_s = first;
      config.overheads.last_stage_load_s = S > 1 ? last : 0.0;
    }
    return config;
  };
  // The DAG and clocks are the same for every run: one problem, bound to all the runs' clocks.
  const EmulatedPipeline pipeline = emulated_pipeline(table, time_profile(table, -1), 83.64);

  // Each run's remainder: measured iteration time minus the emulated time of its own measured
  // instruction and load times.
  std::vector<double> remainder(table.runs.size());
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const Run& run = table.runs[i];
    std::vector<std::vector<double>> d;
    for (int s = 0; s < S; ++s) d.push_back(measured_durations(run.ranks[s], orders[s]));
    // Without the loading term the remainder holds the loading too.
    const EmulationResult r = emulate(pipeline.problem, plan_of(pipeline, run, d, nullptr),
                                      loading(load_per_forward(run, 0), load_per_forward(run, S - 1)));
    remainder[i] = run.iter_time_s() - r.iteration_time_s;
  }

  Validation v;
  v.options = options;
  std::vector<double> residuals;
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const Run& run = table.runs[i];
    // The profile from the other runs.
    std::map<std::tuple<int, bool>, std::map<int, double>> profile;
    for (const auto& e : time_profile(table, run.id)) profile[{e.stage, e.forward}][e.clock] = e.time_s;
    std::vector<double> first_loads, last_loads, others_remainder;
    for (std::size_t j = 0; j < table.runs.size(); ++j) {
      if (j == i) continue;
      first_loads.push_back(load_per_forward(table.runs[j], 0));
      last_loads.push_back(load_per_forward(table.runs[j], S - 1));
      others_remainder.push_back(remainder[j]);
    }
    std::vector<std::vector<double>> d(S);
    for (int s = 0; s < S; ++s)
      for (std::size_t k = 0; k < orders[s].size(); ++k) {
        const bool fwd = orders[s][k].forward;
        d[s].push_back(lookup(profile[{s, fwd}], run.ranks[s].clocks[k], s, fwd));
      }
    const EnergyFit fit = fit_energy(table, run.id, options.blocked_power_w);
    residuals.push_back(fit.rms_residual);

    // The emulator's iteration: the instructions, the loads, then the remainder of the other
    // runs as time between iterations (the dumps do not split it into optimizer step,
    // point-to-point transfers and the gap; the GPU is blocked through all of them).
    EmulationConfig config = loading(median(first_loads), median(last_loads));
    RunPrediction p;
    p.remainder_s = options.remainder ? median(others_remainder) : 0.0;
    // A negative remainder (the critical path overestimates) shortens the prediction; the
    // emulator takes no negative gap, so it is applied here.
    config.overheads.between_iterations_s = std::max(0.0, p.remainder_s);
    const EmulationResult r = emulate(pipeline.problem, plan_of(pipeline, run, d, &fit), config);
    p.id = run.id;
    p.uniform_clock = run.uniform_clock();
    p.critical_path_s = r.communication_end_s;
    p.predicted_time_s = p.critical_path_s + p.remainder_s;
    p.measured_time_s = run.iter_time_s();
    p.measured_energy_j = run.iter_energy_j();
    // Energy of each stage's GPU: its instructions at the fitted power, and its blocked power
    // (per stage when fitted) for the rest of the iteration.
    for (const DeviceSummary& device : r.devices) {
      p.predicted_energy_j +=
          device.energy.computation_j + fit.stages[device.stage].blocked_w * (p.predicted_time_s - device.busy_s);
    }
    v.runs.push_back(p);
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(table.runs.size()));
  }
  std::vector<double> te, ee;
  for (const auto& p : v.runs) {
    te.push_back(std::abs(p.time_error()));
    ee.push_back(std::abs(p.energy_error()));
  }
  v.median_time_error = median(te);
  v.worst_time_error = *std::max_element(te.begin(), te.end());
  v.median_energy_error = median(ee);
  v.worst_energy_error = *std::max_element(ee.begin(), ee.end());
  v.median_fit_residual = median(residuals);
  return v;
}

}  // namespace perseus::runs
