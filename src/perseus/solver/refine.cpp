#include "perseus/solver/refine.hpp"

#include <algorithm>
#include <limits>

#include "perseus/solver/max_flow.hpp"

namespace perseus {
namespace {

// Slack comparisons tolerate float noise in summed measured times.
constexpr double kTimeEpsilon = 1e-9;
// An improvement must beat float noise in summed energies.
constexpr double kEnergyEpsilon = 1e-9;

}  // namespace

PlanRefiner::PlanRefiner(const EnergyProblem& problem, RepairCuts cuts)
    : problem_(problem), index_(problem.operations.size()), node_at_(problem.dag.topological_order()) {
  // The repair's flow network over the whole activity-on-arc graph (source 0, sink 1,
  // left(v) = 2 + 2v, right(v) = 3 + 2v), built once: each repair step only sets capacities.
  const Dag& dag = problem.dag;
  const std::size_t n = dag.num_nodes();
  repair_network_.reset(static_cast<int>(2 + 2 * n));
  repair_arcs_.source.assign(n, -1);
  repair_arcs_.sink.assign(n, -1);
  repair_arcs_.dependency_begin.assign(n + 1, 0);
  position_.resize(n);
  for (std::size_t k = 0; k < n; ++k) position_[dag.topological_order()[k]] = k;
  pred_begin_.assign(1, 0);
  succ_begin_.assign(1, 0);
  for (const Dag::NodeId v : node_at_) {
    for (const Dag::NodeId p : dag.predecessors(v)) pred_.push_back(static_cast<std::int32_t>(position_[p]));
    for (const Dag::NodeId w : dag.successors(v)) succ_.push_back(static_cast<std::int32_t>(position_[w]));
    pred_begin_.push_back(static_cast<std::int32_t>(pred_.size()));
    succ_begin_.push_back(static_cast<std::int32_t>(succ_.size()));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<Dag::NodeId>(i);
    repair_arcs_.op.push_back(repair_network_.add_arc(2 + 2 * v, 3 + 2 * v));
    if (dag.predecessors(v).empty()) repair_arcs_.source[i] = repair_network_.add_arc(0, 2 + 2 * v);
    if (dag.successors(v).empty()) repair_arcs_.sink[i] = repair_network_.add_arc(3 + 2 * v, 1);
    for (Dag::NodeId w : dag.successors(v)) repair_arcs_.dependency.push_back(repair_network_.add_arc(3 + 2 * v, 2 + 2 * w));
    repair_arcs_.dependency_begin[i + 1] = repair_arcs_.dependency.size();
  }
  // Each end of each operation gets an arc from s and one to t, closed but for raises, so
  // that a capacity cut below its flow (an operation off the critical DAG) is absorbed there
  // instead of restored (max_flow.hpp, set_terminal_arcs): the minimum cuts stay the same.
  const bool absorb = cuts == RepairCuts::kAbsorbed || (cuts == RepairCuts::kAuto && n >= kAbsorbCutsMinNodes);
  for (std::size_t i = 0; absorb && i < n; ++i) {
    for (const int end : {2 + 2 * static_cast<int>(i), 3 + 2 * static_cast<int>(i)}) {
      const int from_source = repair_network_.add_arc(0, end);
      repair_network_.set_terminal_arcs(end, from_source, repair_network_.add_arc(end, 1));
    }
  }
  for (std::size_t o = 0; o < problem.operations.size(); ++o) {
    const auto& options = problem.operations[o].options;
    OperationIndex& index = index_[o];
    for (const Option& option : options) {
      index.time.push_back(option.measurement.time_s);
      index.effective.push_back(option.measurement.energy_j - problem.p_blocking * option.measurement.time_s);
    }
    index.by_time.resize(options.size());
    for (std::size_t k = 0; k < options.size(); ++k) index.by_time[k] = static_cast<std::int32_t>(k);
    std::stable_sort(index.by_time.begin(), index.by_time.end(),
                     [&](std::int32_t a, std::int32_t b) { return index.time[a] < index.time[b]; });
    index.rank.resize(options.size());
    for (std::size_t j = 0; j < options.size(); ++j) {
      const std::int32_t k = index.by_time[j];
      index.rank[k] = static_cast<std::int32_t>(j);
      index.sorted_time.push_back(index.time[k]);
      index.best.push_back(j == 0 || index.effective[k] < index.effective[index.best[j - 1]] ? k : index.best[j - 1]);
    }
    index.cheaper_from.assign(options.size(), std::numeric_limits<double>::infinity());
    for (std::size_t k = 0; k < options.size(); ++k) {
      for (std::size_t j = 0; j < options.size(); ++j) {  // by_time: the first strictly cheaper one is the fastest
        const std::int32_t other = index.by_time[j];
        if (index.effective[other] < index.effective[k] - 1e-12) {
          index.cheaper_from[k] = index.time[other];
          break;
        }
      }
    }
  }
  index_at_.resize(n);
  for (std::size_t k = 0; k < n; ++k) index_at_[k] = &index_[problem.node_operation[node_at_[k]]];
}

double PlanRefiner::effective_energy(const OptionChoice& choice) const {
  double total = 0.0;
  for (std::size_t i = 0; i < choice.size(); ++i) total += effective_of(static_cast<Dag::NodeId>(i), choice[i]);
  return total;
}

double PlanRefiner::measured_time(const OptionChoice& choice) const {
  std::vector<double> finish(choice.size());
  return earliest_finish(choice, finish);
}

// The cheapest of an operation's options that takes at most `window` seconds; the current
// one unless another is strictly cheaper. Most calls end at the first check (nothing cheaper
// fits); the others search the options sorted by time. Inline: the sweeps call it per node.
inline std::int32_t PlanRefiner::cheapest_within(const OperationIndex& index, std::int32_t current, double window) {
  if (window + kTimeEpsilon < index.cheaper_from[current]) return current;
  const auto fits = std::upper_bound(index.sorted_time.begin(), index.sorted_time.end(), window + kTimeEpsilon);
  if (fits == index.sorted_time.begin()) return current;
  const std::int32_t best = index.best[static_cast<std::size_t>(fits - index.sorted_time.begin()) - 1];
  return index.effective[best] < index.effective[current] - 1e-12 ? best : current;
}

std::optional<std::int32_t> PlanRefiner::shifted(Dag::NodeId n, std::int32_t option, int steps) const {
  const OperationIndex& index = index_of(n);
  const int position = index.rank[option] - steps;  // by_time is fastest first
  if (position < 0 || position >= static_cast<int>(index.by_time.size())) return std::nullopt;
  return index.by_time[static_cast<std::size_t>(position)];
}

OptionChoice PlanRefiner::reclaim_slack(OptionChoice choice, double deadline_s, int max_sweeps) const {
  return reclaim(std::move(choice), deadline_s, max_sweeps);
}

OptionChoice PlanRefiner::reclaim_slack_at_own_time(OptionChoice choice, double* measured_time_s) const {
  work_ += 1.0;  // counted as measured_time()'s pass, which reclaim() shares
  return reclaim(std::move(choice), std::nullopt, 8, measured_time_s);
}

OptionChoice PlanRefiner::reclaim(OptionChoice choice, std::optional<double> deadline, int max_sweeps,
                                  double* measured_time_s) const {
  const std::size_t n = node_at_.size();
  std::vector<double> earliest(n), latest_start(n);
  std::vector<std::int32_t> options;  // the plan by position, while it is reclaimed
  to_positions(choice, options);
  double deadline_s = deadline.value_or(0.0);
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    // The forward sweep's two passes, as first written (the helpers count the others): it
    // recomputed the latest starts, which the backward sweep already leaves. Passes saved are
    // still counted: the counted work bounds the refinement, and the plans stay the same.
    work_ += 2.0;
    // Backward sweep: later operations take the slack in front of them first. After the
    // first sweep, the forward sweep below has left the earliest finish times of the plan as
    // it is in `earliest`, the same sums in the same order as earliest_finish: not repeated.
    if (sweep == 0) {
      const double length = earliest_finish_by_position(options, earliest);
      if (!deadline) deadline_s = length;
      if (length > deadline_s + kTimeEpsilon) {  // misses the deadline already
        if (measured_time_s) *measured_time_s = length;
        return choice;
      }
    } else {
      work_ += 1.0;
    }
    bool improved = backward_sweep(options, deadline_s, earliest, latest_start).changed;
    // Forward sweep: earlier operations take the slack behind them, up to the latest starts
    // the backward sweep left (each from its successors' and its own new option).
    double length = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      double start = 0.0;
      for (std::int32_t i = pred_begin_[k]; i < pred_begin_[k + 1]; ++i) start = std::max(start, earliest[pred_[i]]);
      const OperationIndex& index = *index_at_[k];
      std::int32_t& option = options[k];
      const double finish = latest_start[k] + index.time[option];
      const std::int32_t best = cheapest_within(index, option, finish - start);
      improved |= best != option;
      option = best;
      earliest[k] = start + index.time[best];
      length = std::max(length, earliest[k]);
    }
    // The plan's critical path as critical_path_length computes it (the same sums).
    if (measured_time_s) *measured_time_s = length;
    if (!improved) break;
  }
  to_nodes(options, choice);
  return choice;
}

std::optional<OptionChoice> PlanRefiner::repair(OptionChoice choice, double deadline_s, double budget_j) const {
  const std::size_t n = node_at_.size();
  // By topological position (as the sweeps: arrays read in order); the capacities are set
  // node by node as before, so the network sees the same changes in the same order.
  std::vector<std::int32_t> options;
  to_positions(choice, options);
  std::vector<double> start(n), finish(n), latest(n);
  std::vector<char> critical(n);
  FlowNetwork& flow = repair_network_;
  flow.clear_flow();  // a flow left by another plan is no start worth restoring
  const auto left = [](Dag::NodeId v) { return 2 + 2 * v; };
  const auto right = [](Dag::NodeId v) { return 3 + 2 * v; };
  while (true) {
    work_ += 8.0;  // the critical path both ways, the capacities, and the max flow (about 5)
    double length = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      double at = 0.0;
      for (std::int32_t i = pred_begin_[k]; i < pred_begin_[k + 1]; ++i) at = std::max(at, finish[pred_[i]]);
      start[k] = at;
      finish[k] = at + index_at_[k]->time[options[k]];
      length = std::max(length, finish[k]);
    }
    if (length <= deadline_s + kTimeEpsilon) {
      to_nodes(options, choice);
      return reclaim_slack(std::move(choice), deadline_s);
    }
    for (std::size_t k = n; k-- > 0;) {
      double until = length;
      for (std::int32_t i = succ_begin_[k]; i < succ_begin_[k + 1]; ++i) until = std::min(until, latest[succ_[i]]);
      latest[k] = until - index_at_[k]->time[options[k]];
      critical[k] = latest[k] - start[k] <= kTimeEpsilon;
    }
    // The measured critical DAG's capacities: cutting v speeds it up by one option, for the
    // effective energy that adds; v at its fastest and the dependencies cannot be cut.
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = position_[i];
      const bool on = critical[k];
      double capacity = 0.0;
      if (on) {
        capacity = FlowNetwork::kUnbounded;
        const OperationIndex& index = *index_at_[k];
        if (const int rank = index.rank[options[k]]; rank > 0) {
          capacity = std::max(0.0, index.effective[index.by_time[rank - 1]] - index.effective[options[k]]);
        }
      }
      flow.set_capacity(repair_arcs_.op[i], capacity);
      if (repair_arcs_.source[i] >= 0) {
        flow.set_capacity(repair_arcs_.source[i], on && start[k] <= kTimeEpsilon ? FlowNetwork::kUnbounded : 0.0);
      }
      if (repair_arcs_.sink[i] >= 0) {
        flow.set_capacity(repair_arcs_.sink[i], on && finish[k] >= length - kTimeEpsilon ? FlowNetwork::kUnbounded : 0.0);
      }
      const std::size_t first = repair_arcs_.dependency_begin[i];
      const std::int32_t successors = succ_begin_[k + 1] - succ_begin_[k];
      for (std::int32_t j = 0; j < successors; ++j) {
        const std::int32_t w = succ_[succ_begin_[k] + j];
        const bool tight = on && critical[w] && finish[k] >= start[w] - kTimeEpsilon;
        flow.set_capacity(repair_arcs_.dependency[first + j], tight ? FlowNetwork::kUnbounded : 0.0);
      }
    }
    flow.run(0, 1, 1e-12);
    // The cut's operations one option faster; none where the cut goes through an unbounded
    // arc (an operation at its fastest, or a dependency): some critical path is at its fastest
    // everywhere. (The flow's value includes the raises, so the cut is read, not the value.)
    const auto side = [&](int node) { return flow.on_source_side(node); };
    const auto unbounded = [&](int arc) { return arc >= 0 && flow.capacity(arc) >= FlowNetwork::kUnbounded; };
    bool changed = false;
    for (std::size_t k = 0; k < n; ++k) {
      if (!critical[k]) continue;
      const Dag::NodeId v = node_at_[k];
      const bool in_left = side(left(v)), in_right = side(right(v));
      if ((!in_left && unbounded(repair_arcs_.source[v])) || (in_right && unbounded(repair_arcs_.sink[v]))) return std::nullopt;
      if (in_right) {
        const std::size_t first = repair_arcs_.dependency_begin[v];
        for (std::int32_t j = 0; j < succ_begin_[k + 1] - succ_begin_[k]; ++j) {
          if (!side(left(node_at_[succ_[succ_begin_[k] + j]])) && unbounded(repair_arcs_.dependency[first + j])) return std::nullopt;
        }
      }
      if (in_left && !in_right) {
        if (unbounded(repair_arcs_.op[v])) return std::nullopt;
        const OperationIndex& index = *index_at_[k];
        const std::int32_t faster = index.by_time[index.rank[options[k]] - 1];  // finite arc: v has a faster option
        budget_j -= index.effective[faster] - index.effective[options[k]];
        options[k] = faster;
        changed = true;
      }
    }
    if (!changed) return std::nullopt;  // cannot happen with a finite cut; guards the loop
    if (budget_j < 0.0) return std::nullopt;
  }
}

void PlanRefiner::to_positions(const OptionChoice& choice, std::vector<std::int32_t>& options) const {
  options.resize(node_at_.size());
  for (std::size_t k = 0; k < node_at_.size(); ++k) options[k] = choice[node_at_[k]];
}

void PlanRefiner::to_nodes(const std::vector<std::int32_t>& options, OptionChoice& choice) const {
  choice.resize(node_at_.size());
  for (std::size_t k = 0; k < node_at_.size(); ++k) choice[node_at_[k]] = options[k];
}

double PlanRefiner::earliest_finish(const OptionChoice& choice, std::vector<double>& finish, std::size_t from) const {
  to_positions(choice, by_position_);
  return earliest_finish_by_position(by_position_, finish, from);
}

double PlanRefiner::earliest_finish_by_position(const std::vector<std::int32_t>& options, std::vector<double>& finish,
                                                std::size_t from) const {
  const std::size_t n = node_at_.size();
  finish.resize(n);
  work_ += static_cast<double>(n - from) / static_cast<double>(std::max<std::size_t>(1, n));
  double latest = 0.0;
  for (std::size_t k = from; k < n; ++k) {
    double start = 0.0;
    for (std::int32_t i = pred_begin_[k]; i < pred_begin_[k + 1]; ++i) start = std::max(start, finish[pred_[i]]);
    finish[k] = start + index_at_[k]->time[options[k]];
    latest = std::max(latest, finish[k]);
  }
  return latest;
}

PlanRefiner::Sweep PlanRefiner::backward_sweep(std::vector<std::int32_t>& options, double deadline_s,
                                               const std::vector<double>& finish,
                                               std::vector<double>& latest_start) const {
  const std::size_t n = node_at_.size();
  latest_start.resize(n);
  work_ += 1.0;
  Sweep sweep;
  for (std::size_t k = n; k-- > 0;) {
    double latest_finish = deadline_s;
    for (std::int32_t i = succ_begin_[k]; i < succ_begin_[k + 1]; ++i) latest_finish = std::min(latest_finish, latest_start[succ_[i]]);
    const OperationIndex& index = *index_at_[k];
    std::int32_t& option = options[k];
    const std::int32_t best = cheapest_within(index, option, latest_finish - (finish[k] - index.time[option]));
    sweep.changed |= best != option;
    option = best;
    sweep.effective_energy += index.effective[best];
    latest_start[k] = latest_finish - index.time[best];
  }
  return sweep;
}

double PlanRefiner::screen(OptionChoice& trial, double deadline_s, const std::vector<double>* finish,
                           std::size_t from) const {
  if (finish) {
    earliest_finish_ = *finish;
  } else {
    from = 0;
  }
  // Those before `from` are a plan's that meets the deadline.
  to_positions(trial, by_position_);
  if (earliest_finish_by_position(by_position_, earliest_finish_, from) > deadline_s + kTimeEpsilon) {
    return std::numeric_limits<double>::infinity();
  }
  const double energy = backward_sweep(by_position_, deadline_s, earliest_finish_, latest_start_).effective_energy;
  to_nodes(by_position_, trial);
  return energy;
}

bool PlanRefiner::try_move(OptionChoice trial, double deadline_s, OptionChoice* choice, double* cost,
                           const std::vector<double>* finish, std::size_t from) const {
  if (screen(trial, deadline_s, finish, from) >= *cost - kEnergyEpsilon) return false;
  trial = reclaim_slack(std::move(trial), deadline_s);
  const double trial_cost = effective_energy(trial);
  if (trial_cost >= *cost - kEnergyEpsilon || measured_time(trial) > deadline_s + kTimeEpsilon) return false;
  *choice = std::move(trial);
  *cost = trial_cost;
  return true;
}

std::vector<double> PlanRefiner::slack(const OptionChoice& choice, double deadline_s, std::vector<double>* finish) const {
  const Dag& dag = problem_.dag;
  std::vector<double> own, result(dag.num_nodes());
  std::vector<double>& earliest = finish ? *finish : own;
  earliest_finish(choice, earliest);  // by position; the slack is by node
  work_ += 1.0;
  for (std::size_t k = node_at_.size(); k-- > 0;) {
    double latest = deadline_s;  // the latest finish of the node at k
    for (std::int32_t i = succ_begin_[k]; i < succ_begin_[k + 1]; ++i) {
      const Dag::NodeId s = node_at_[succ_[i]];
      latest = std::min(latest, result[s] + earliest[succ_[i]] - time_of(s, choice[s]));
    }
    result[node_at_[k]] = latest - earliest[k];
  }
  return result;
}

OptionChoice PlanRefiner::local_search(OptionChoice choice, double deadline_s, int max_rounds, Moves moves,
                                       const std::vector<double>* prices) const {
  const Dag& dag = problem_.dag;
  choice = reclaim_slack(std::move(choice), deadline_s);
  if (measured_time(choice) > deadline_s + kTimeEpsilon) return choice;
  double cost = effective_energy(choice);
  constexpr int kPartnerWindow = 16;  // exchange partners: this many positions either side on a stage
  constexpr int kMaxShift = 3;        // options faster or slower per move
  constexpr int kSlowdowns[] = {1, 2, 3, 5, 8};  // options slower in a slow-and-repair move
  // Earliest finish times of the current plan and of the sped-up one, from which screens
  // of moves start (a move changes one or two operations: only what follows them is redone).
  std::vector<double> finish, sped_up_finish;
  earliest_finish(choice, finish);
  for (int round = 0; round < max_rounds && !out_of_work(); ++round) {
    bool improved = false;
    for (int stage = 0; stage < dag.num_stages(); ++stage) {
      const auto nodes = dag.stage_nodes(stage);
      const int count = static_cast<int>(nodes.size());
      for (int a = 0; a < count && !out_of_work(); ++a) {
        const Dag::NodeId u = nodes[a];
        for (int faster = 1; faster <= kMaxShift; ++faster) {
          const auto sped_up = shifted(u, choice[u], faster);
          if (!sped_up) break;
          OptionChoice trial = choice;
          trial[u] = *sped_up;
          bool moved = try_move(trial, deadline_s, &choice, &cost, &finish, position_[u]);
          // Exchanges: the time u gives up goes to one partner, within the partner's slack
          // in the sped-up plan (so every exchange tried meets the deadline).
          const std::vector<double> room = moved ? std::vector<double>{} : slack(trial, deadline_s, &sped_up_finish);
          for (int b = std::max(0, a - kPartnerWindow); !moved && b <= std::min(count - 1, a + kPartnerWindow); ++b) {
            const Dag::NodeId v = nodes[b];
            if (v == u) continue;
            for (int slower = 1; !moved && slower <= kMaxShift; ++slower) {
              const auto slowed = shifted(v, trial[v], -slower);
              if (!slowed || time_of(v, *slowed) - time_of(v, trial[v]) > room[v] + kTimeEpsilon) break;
              OptionChoice exchange = trial;
              exchange[v] = *slowed;
              moved = try_move(std::move(exchange), deadline_s, &choice, &cost, &sped_up_finish, position_[v]);
            }
          }
          if (moved) {
            earliest_finish(choice, finish);
            improved = true;
            break;
          }
        }
      }
      // Slow one operation down (by a few options) and let the minimum cut pay
      // for it elsewhere, anywhere on the critical paths it lengthens.
      // A slowdown within v's slack is reclaim_slack's to make; one beyond it must save more
      // than the repair adds (before the final reclaim) to be tried to the end.
      if (moves == Moves::kExchanges) continue;
      const std::vector<double> room = slack(choice, deadline_s);
      for (const Dag::NodeId v : nodes) {
        if (out_of_work()) break;
        for (const int slower : kSlowdowns) {
          const auto slowed = shifted(v, choice[v], -slower);
          if (!slowed) break;
          const double extra_s = time_of(v, *slowed) - time_of(v, choice[v]);
          if (extra_s <= room[v] + kTimeEpsilon) continue;
          // At the LP's prices the time costs more than the slowdown saves: skip.
          if (prices && effective_of(v, *slowed) - effective_of(v, choice[v]) + (*prices)[v] * extra_s > 0.0) continue;
          OptionChoice trial = choice;
          trial[v] = *slowed;
          const double saving = effective_of(v, choice[v]) - effective_of(v, *slowed);
          auto repaired = repair(std::move(trial), deadline_s, 2.0 * saving);
          if (repaired && try_move(std::move(*repaired), deadline_s, &choice, &cost)) {
            earliest_finish(choice, finish);
            improved = true;
            break;
          }
        }
      }
    }
    if (!improved) break;
  }
  return choice;
}

OptionChoice reclaim_slack(const EnergyProblem& problem, OptionChoice choice, double deadline_s) {
  return PlanRefiner(problem).reclaim_slack(std::move(choice), deadline_s);
}

}  // namespace perseus
