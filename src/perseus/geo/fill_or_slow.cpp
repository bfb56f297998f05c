#include "perseus/geo/fill_or_slow.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "perseus/model/statistics.hpp"

namespace perseus::geo {

std::string_view to_string(BubbleObjective objective) {
  return objective == BubbleObjective::kPrice ? "price" : "energy-per-flop";
}

BubbleObjective parse_bubble_objective(std::string_view name) {
  if (name == "energy-per-flop") return BubbleObjective::kEnergyPerFlop;
  if (name == "price") return BubbleObjective::kPrice;
  throw InputError(fmt::format("unknown objective '{}': expected energy-per-flop or price", name));
}

double PolicyOutcome::net_value_per_hour(const FillOrSlowSpec& spec) const {
  const double per_s = prefill_tokens_per_s * spec.value_per_mtokens * 1e-6 -
                       total_j() / iteration_time_s * spec.price_per_kwh / 3.6e6;
  return 3600.0 * per_s;
}

namespace {

constexpr int kKinds = 3;  // forward, recomputation, backward
int kind_index(InstructionKind kind) {
  return kind == InstructionKind::kForward ? 0 : kind == InstructionKind::kRecompute ? 1 : 2;
}

// Per stage and kind, (time, energy) at every supported clock, top first, scaled so that the top
// clock's is the workload's (which --forward-ms may have set).
using ClockCurves = std::vector<std::array<std::vector<TaskCost>, kKinds>>;
ClockCurves clock_curves(const Workload& w) {
  const planner::EnergyModel energy(*w.gpu, w.gpu->energy);
  const double collective = planner::collective_bandwidth(*w.gpu, 1);
  const std::vector<int> clocks = planner::supported_frequencies(*w.gpu, w.gpu->min_mhz);
  ClockCurves curves(w.stages.size());
  for (std::size_t s = 0; s < w.stages.size(); ++s) {
    const StageWork& stage = w.stages[s];
    const std::array<std::pair<const planner::OperationWork*, InstructionKind>, kKinds> kinds = {
        std::pair{&stage.forward_work, InstructionKind::kForward}, {&stage.forward_work, InstructionKind::kForward},
        {&stage.backward_work, InstructionKind::kBackward}};
    const std::array<TaskCost, kKinds> top = {TaskCost{stage.forward_s, stage.forward_j},
                                              {stage.recompute_s, stage.recompute_j},
                                              {stage.backward_s, stage.backward_j}};
    for (int k = 0; k < kKinds; ++k) {
      const auto at = [&](int mhz) { return energy.estimate(*kinds[k].first, kinds[k].second, mhz, collective); };
      const planner::OperationEstimate reference = at(clocks.front());
      const double time_scale = top[k].time_s / reference.time_s, energy_scale = top[k].energy_j / reference.energy_j;
      std::vector<TaskCost>& curve = curves[s][k];
      curve.push_back(top[k]);
      for (std::size_t f = 1; f < clocks.size(); ++f) {
        const planner::OperationEstimate e = at(clocks[f]);
        curve.push_back({e.time_s * time_scale, e.energy_j * energy_scale});
      }
    }
  }
  return curves;
}

// The clock of least energy within `window`, the GPU's idle power over the rest of it counted.
TaskCost slowest_worthwhile(const std::vector<TaskCost>& curve, double window, double p_blocking) {
  TaskCost best = curve.front();
  double best_j = best.energy_j - p_blocking * best.time_s;
  for (const TaskCost& c : curve)
    if (c.time_s <= window && c.energy_j - p_blocking * c.time_s < best_j) best = c, best_j = c.energy_j - p_blocking * c.time_s;
  return best;
}

TaskCosts top_costs(const GeoEmulation& run, const ClockCurves& curves) {
  TaskCosts costs(run.tasks.size());
  const int S = run.placement.stages;
  for (std::size_t g = 0; g < run.tasks.size(); ++g)
    for (const GeoTask& t : run.tasks[g]) costs[g].push_back(curves[g % S][kind_index(t.kind)].front());
  return costs;
}

struct Context {
  const Workload& workload;
  const NetworkSpec& network;
  const GeoEmulation& training;
  const FillOrSlowSpec& spec;
  double prefill_power_w, blocking_power_w;
  double training_flops;
};

PolicyOutcome measure(const Context& c, std::string name, const TaskCosts& costs, const GeoEmulation& run,
                      const BubbleTeaResult* prefills) {
  PolicyOutcome o;
  o.policy = std::move(name);
  const double T = c.training.iteration_time_s;
  const int iterations = c.spec.prefills.iterations;
  // Training must not notice: replay the top-clock order with these clocks and the prefills held.
  const GeoEmulation check = replay(c.workload, c.network, c.training, prefills ? prefills->held : std::vector<std::vector<Interval>>{}, costs);
  o.iteration_time_s = check.iteration_time_s;
  o.training_unchanged = std::abs(check.iteration_time_s - T) <= 1e-9 * std::max(1.0, T);
  double prefill_busy = 0.0, tokens = 0.0;
  std::vector<double> ttft;
  if (prefills) {
    for (const PrefillRequest& r : prefills->requests) {
      if (!r.served) continue;
      tokens += r.tokens;
      ttft.push_back(r.ttft_s);
      for (const PrefillPart& part : r.parts) prefill_busy += part.end_s - part.start_s;
    }
    o.served = prefills->served, o.declined = prefills->declined;
    o.median_ttft_s = median(ttft);
    o.prefill_flops = 2.0 * prefills->inference_parameters * tokens / iterations;
    o.prefill_tokens_per_s = tokens / prefills->horizon_s;
  }
  prefill_busy /= iterations;
  const double gpu_time = T * run.num_gpus();
  o.computation_j = run.computation_j;
  o.prefill_j = c.prefill_power_w * prefill_busy;
  o.idle_j = c.blocking_power_w * std::max(0.0, gpu_time - run.busy_s - prefill_busy);
  o.training_flops = c.training_flops;
  o.utilization = (run.busy_s + prefill_busy) / gpu_time;
  return o;
}

}  // namespace

FillOrSlowResult fill_or_slow(const Workload& workload, const NetworkSpec& network, const GeoEmulation& training,
                              const FillOrSlowSpec& spec) {
  if (!(spec.price_per_kwh >= 0.0) || !std::isfinite(spec.price_per_kwh))
    throw InputError(fmt::format("--price-per-kwh must be zero or more, got {}", spec.price_per_kwh));
  if (!(spec.value_per_mtokens >= 0.0) || !std::isfinite(spec.value_per_mtokens))
    throw InputError(fmt::format("--value-per-mtokens must be zero or more, got {}", spec.value_per_mtokens));
  FillOrSlowResult out;
  out.spec = spec;
  const ClockCurves curves = clock_curves(workload);
  const int S = training.placement.stages;
  const StageWork& first = workload.stages.front();
  out.prefill_power_w = first.forward_j / first.forward_s;
  out.blocking_power_w = workload.p_blocking_w;
  double training_flops = 0.0;
  for (std::size_t g = 0; g < training.tasks.size(); ++g)
    for (const GeoTask& t : training.tasks[g]) {
      const StageWork& stage = workload.stages[g % S];
      if (t.kind == InstructionKind::kForward) training_flops += stage.forward_work.flops;
      if (t.kind == InstructionKind::kBackward) training_flops += stage.backward_work.flops;
    }
  const Context context{workload, network, training, spec, out.prefill_power_w, out.blocking_power_w, training_flops};
  const double T = training.iteration_time_s;
  const double p_blocking = out.blocking_power_w;
  const auto curve_of = [&](int g, int i) -> const std::vector<TaskCost>& {
    return curves[static_cast<std::size_t>(g % S)][kind_index(training.tasks[g][static_cast<std::size_t>(i)].kind)];
  };

  // The bubbles of the top-clock run: before each GPU's first computation and after each.
  std::vector<std::vector<int>> bubble_after(training.tasks.size());  // index into out.bubbles, by computation + 1
  for (std::size_t g = 0; g < training.tasks.size(); ++g) {
    const auto& tasks = training.tasks[g];
    bubble_after[g].assign(tasks.size() + 1, -1);
    for (int i = -1; i < static_cast<int>(tasks.size()); ++i) {
      const double from = i < 0 ? 0.0 : tasks[static_cast<std::size_t>(i)].end_s;
      const double to = i + 1 < static_cast<int>(tasks.size()) ? tasks[static_cast<std::size_t>(i + 1)].start_s : T;
      if (to - from <= 1e-9) continue;
      bubble_after[g][static_cast<std::size_t>(i + 1)] = static_cast<int>(out.bubbles.size());
      out.bubbles.push_back({static_cast<int>(g), i, from, to - from});
    }
  }

  // Fill: BubbleTea on the top-clock run.
  const TaskCosts top = top_costs(training, curves);
  out.outcomes.push_back(measure(context, "none", top, training, nullptr));
  const BubbleTeaResult filled = fill_bubbles(training, network, spec.prefills);
  out.outcomes.push_back(measure(context, "fill", top, training, &filled));
  for (const PrefillRequest& r : filled.requests) {
    if (!r.served) continue;
    double parts_s = 0.0;
    for (const PrefillPart& part : r.parts) parts_s += part.end_s - part.start_s;
    for (const PrefillPart& part : r.parts) {
      // The bubble holding the part's start, folded into one iteration.
      const double t = part.start_s - std::floor(part.start_s / T) * T;
      const auto& tasks = training.tasks[static_cast<std::size_t>(part.gpu)];
      const auto next = std::upper_bound(tasks.begin(), tasks.end(), t, [](double v, const GeoTask& k) { return v < k.start_s; });
      const int b = bubble_after[static_cast<std::size_t>(part.gpu)][static_cast<std::size_t>(next - tasks.begin())];
      if (b < 0) continue;
      const double d = part.end_s - part.start_s, share = d / parts_s;
      BubbleChoice& bubble = out.bubbles[static_cast<std::size_t>(b)];
      bubble.fill_extra_j += (out.prefill_power_w - p_blocking) * d / spec.prefills.iterations;
      bubble.fill_tokens += r.tokens * share / spec.prefills.iterations;
      bubble.fill_flops += 2.0 * filled.inference_parameters * r.tokens * share / spec.prefills.iterations;
    }
  }

  // Slow: every computation into its slack.
  const TaskCosts slow = stretch_into_slack(training, [&](int g, int i, double window) {
    return slowest_worthwhile(curve_of(g, i), window, p_blocking);
  });
  const GeoEmulation slowed = replay(workload, network, training, {}, slow);
  out.outcomes.push_back(measure(context, "slow", slow, slowed, nullptr));
  for (BubbleChoice& b : out.bubbles) {
    if (b.after < 0) continue;
    const TaskCost& t = top[b.gpu][static_cast<std::size_t>(b.after)];
    const TaskCost& s = slow[b.gpu][static_cast<std::size_t>(b.after)];
    b.slow_saving_j = t.energy_j - s.energy_j + p_blocking * (s.time_s - t.time_s);
  }

  // Mixed: per bubble, slow its computation unless filling it is worth more.
  // Every bubble starts filled; returns whether a choice changed.
  const auto decide = [&](double ratio) {
    const double price_per_j = spec.price_per_kwh / 3.6e6, value_per_token = spec.value_per_mtokens * 1e-6;
    bool changed = false;
    for (BubbleChoice& b : out.bubbles) {
      bool fill = true;
      if (b.slow_saving_j > 0.0) {
        fill = spec.objective == BubbleObjective::kPrice
                   ? value_per_token * b.fill_tokens - price_per_j * b.fill_extra_j > price_per_j * b.slow_saving_j
                   : b.fill_extra_j + b.slow_saving_j < ratio * b.fill_flops;
      }
      changed = changed || fill != b.fill;
      b.fill = fill;
    }
    return changed;
  };
  // Energy per FLOP: Dinkelbach's iteration. The choice minimising energy - r * FLOPs at the
  // last choice's ratio r lowers the ratio; when the choice no longer changes it is optimal.
  const PolicyOutcome& slow_outcome = out.outcomes.back();
  const auto ratio_of_choice = [&] {
    double energy = slow_outcome.total_j(), flops = slow_outcome.training_flops;
    for (const BubbleChoice& b : out.bubbles)
      if (b.fill) energy += b.fill_extra_j + b.slow_saving_j, flops += b.fill_flops;
    return energy / flops;
  };
  out.objective_rounds = 1;
  if (spec.objective == BubbleObjective::kPrice) {
    decide(0.0);
  } else {
    while (decide(ratio_of_choice()) && out.objective_rounds < 100) ++out.objective_rounds;
  }
  const TaskCosts mixed = stretch_into_slack(training, [&](int g, int i, double window) {
    const int b = bubble_after[static_cast<std::size_t>(g)][static_cast<std::size_t>(i + 1)];
    if (b >= 0 && out.bubbles[static_cast<std::size_t>(b)].fill) return top[g][static_cast<std::size_t>(i)];
    return slowest_worthwhile(curve_of(g, i), window, p_blocking);
  });
  out.mixed_training = replay(workload, network, training, {}, mixed);
  out.mixed_prefills = fill_bubbles(out.mixed_training, network, spec.prefills);
  out.outcomes.push_back(measure(context, "mixed", mixed, out.mixed_training, &out.mixed_prefills));

  // Counts: a bubble is slowed when its computation runs below the top clock, else open to prefills.
  const std::array<const TaskCosts*, 4> costs = {&top, &top, &slow, &mixed};
  const std::array<bool, 4> prefills = {false, true, false, true};
  for (std::size_t k = 0; k < costs.size(); ++k) {
    for (const BubbleChoice& b : out.bubbles) {
      const bool slowed_here = b.after >= 0 && (*costs[k])[b.gpu][static_cast<std::size_t>(b.after)].time_s >
                                                   top[b.gpu][static_cast<std::size_t>(b.after)].time_s;
      if (slowed_here) ++out.outcomes[k].bubbles_slowed;
      else if (prefills[k]) ++out.outcomes[k].bubbles_filled;
    }
  }
  return out;
}

}  // namespace perseus::geo
