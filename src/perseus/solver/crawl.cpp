#include "perseus/solver/crawl.hpp"

#include "perseus/solver/max_flow.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

namespace perseus {

bool CrawlFlow::through_unbounded_arcs() const {
  constexpr double kUnboundedShare = 1e-3;
  const auto unbounded = [](std::span<const double> flows) {
    return std::any_of(flows.begin(), flows.end(), [](double f) { return f >= kUnboundedShare * FlowNetwork::kUnbounded; });
  };
  return unbounded(dependencies) || unbounded(starts) || unbounded(ends);
}
namespace {

// Flow amounts below this are numerical noise (the reference's FP_ERROR).
constexpr double kFlowEpsilon = 1e-6;

// The reference truncates flow bounds to multiples of 1e-6 with Python's floor division.
double truncate_bound(double value) { return python_floordiv(value, kFlowEpsilon) * kFlowEpsilon; }

// Activity-on-arc view of the DAG, used implicitly: node n is the arc left(n) -> right(n);
// a DAG edge u -> v is a dummy arc right(u) -> left(v); sources hang off a super source and
// sinks feed a super sink. Ids: source 0, sink 1, left(n) = 2 + 2n, right(n) = 3 + 2n.
constexpr int kSource = 0;
constexpr int kSink = 1;
int left_of(Dag::NodeId n) { return 2 + 2 * n; }
int right_of(Dag::NodeId n) { return 3 + 2 * n; }

class Crawler {
 public:
  Crawler(const EnergyProblem& problem, const CrawlOptions& options) : problem_(problem), dag_(problem.dag) {
    const std::size_t n = dag_.num_nodes();
    tables_.reserve(problem.operations.size());
    for (const OperationOptions& op : problem.operations) {
      tables_.push_back(options.cost == CrawlCost::kFitted ? fitted_table(op)
                                                           : hull_table(op, problem.p_blocking, options.hull_unit_s));
    }
    duration_.resize(n);
    min_q_.resize(n);
    max_q_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const CostTable& table = table_of(static_cast<Dag::NodeId>(i));
      min_q_[i] = table.min_q;
      max_q_[i] = table.min_q + static_cast<std::int64_t>(table.cost.size()) - 1;
    }
    // The critical-path passes run over arrays in topological order (positions), so that
    // they read and write memory in order; pred_/succ_ hold positions too.
    const auto& order = dag_.topological_order();
    position_.resize(n);
    for (std::size_t k = 0; k < n; ++k) position_[order[k]] = static_cast<std::int32_t>(k);
    pred_begin_.assign(1, 0);
    succ_begin_.assign(1, 0);
    for (std::size_t k = 0; k < n; ++k) {
      for (const Dag::NodeId p : dag_.predecessors(order[k])) pred_.push_back(position_[p]);
      for (const Dag::NodeId w : dag_.successors(order[k])) succ_.push_back(position_[w]);
      pred_begin_.push_back(static_cast<std::int32_t>(pred_.size()));
      succ_begin_.push_back(static_cast<std::int32_t>(succ_.size()));
    }
    ordered_duration_.resize(n);
    earliest_finish_.assign(n, 0);
    finish_prefix_max_.assign(n, 0);
    tail_.assign(n, 0);
    arc_state_.assign(n, kUnknownState);  // the first step sets every arc
    duration_changed_.assign(n, 0);
    // Cuts below the flow are absorbed (max_flow.hpp, set_terminal_arcs), but the flows that
    // on_flow reports are prices, duals of the relaxation: absorbed cuts leave them far from
    // optimal (lines 20% below the LP optimum instead of 1-5%). So a crawl that reports some
    // steps' flows (the frontier's: every (length / 256)-th step and the last few) takes them
    // from a second network, without terminal arcs, that follows the capacities and runs only
    // at those steps: its cuts, and so the crawl, stay those of a crawl that reports none. One
    // that reports every step (the bound crawl's) keeps one network and restores flows, which
    // the second network would cost as well.
    // (LEMON's Preflow, for comparison, rebuilds from the capacities set and needs neither.)
    const bool report_every_step = options.on_flow && options.flow_every <= 1;
    const bool absorb = !report_every_step && options.max_flow == MaxFlowAlgorithm::kDinic;
    build_network(/*absorb_cuts=*/absorb, /*separate_duals=*/absorb && options.on_flow);
  }

  CrawlResult run(const CrawlOptions& options) {
    algorithm_ = options.max_flow;
    on_flow_ = options.on_flow ? &options.on_flow : nullptr;
    flow_every_ = std::max<std::size_t>(1, options.flow_every);
    if (on_flow_ && algorithm_ != MaxFlowAlgorithm::kDinic) throw SolveError("the crawl's flows need its own max flow");
    CrawlResult result;
    set_durations(min_q_);
    result.t_min_q = compute_times();
    t_min_q_ = result.t_min_q;
    set_durations(max_q_);
    result.initial_durations = duration_;
    result.t_star_q = compute_times();
    result.initial_fitted_cost = total_fitted_cost();
    result.change_begin.push_back(0);
    // Kept up to date step by step (a step changes a few operations), not re-summed.
    double fitted_cost = result.initial_fitted_cost;

    std::vector<DurationChange> step_changes;
    while (options.max_steps == 0 || result.steps.size() < options.max_steps) {
      const std::int64_t length = iteration_length_;
      step_changes.clear();
      double cost_change = 0.0;
      if (!step(result.steps.size(), &step_changes, &cost_change, &result.stop_reason)) break;
      std::size_t first_changed = kAllPositions, last_changed = 0;
      for (const DurationChange& c : step_changes) {
        fitted_cost += cost(c.node, c.duration_q) - cost(c.node, duration_[c.node]);
        duration_[c.node] = c.duration_q;
        const auto at = static_cast<std::size_t>(position_[c.node]);
        ordered_duration_[at] = c.duration_q;
        first_changed = std::min(first_changed, at);
        last_changed = std::max(last_changed, at);
        duration_changed_[c.node] = 1;
      }
      const std::int64_t new_length = compute_times(first_changed, last_changed);
      if (new_length != length - 1) {
        // Cannot happen with integer durations (every critical path crosses the cut once
        // more forward than backward); kept as a guard against a wrong cut.
        result.stop_reason = "step changed the iteration time by " + std::to_string(new_length - length);
        break;
      }
      result.steps.push_back({new_length, fitted_cost, cost_change});
      result.changes.insert(result.changes.end(), step_changes.begin(), step_changes.end());
      result.change_begin.push_back(result.changes.size());
      if (options.on_step) options.on_step(result.steps.size() - 1, result.steps.back(), step_changes);
      if (options.progress && result.steps.size() % options.progress_every == 0) {
        options.progress(result.steps.size(), new_length, result.t_min_q);
      }
    }
    return result;
  }

 private:
  // An operation's fitted cost and flow bounds (docs/solver.md, "The crawl", step 2b) at every duration in
  // [min q, max q], computed once: a step then costs table lookups instead of exponentials
  // and floor divisions for every critical arc.
  struct CostTable {
    std::int64_t min_q = 0;
    std::vector<double> cost;         // cost(d), d = min_q + index
    std::vector<double> lower, upper;  // flow bounds at d; upper is +inf when unbounded
  };

  static CostTable fitted_table(const OperationOptions& op) {
    return make_table(op.min_q(), op.max_q(), [&](std::int64_t d) { return op.fitted_cost(d); });
  }

  // The lower convex hull of every option's (time, effective energy), times rounded to
  // multiples of `unit_s`, per unit of time (so that the flow bounds are prices in J/s, the
  // relaxation's duals, whatever the unit), interpolated at every whole unit.
  static CostTable hull_table(const OperationOptions& op, double p_blocking, double unit_s) {
    std::vector<std::pair<std::int64_t, double>> hull;  // (units, effective J), fastest first
    for (const HullPoint& p : effective_energy_hull(op, p_blocking, unit_s)) {
      hull.emplace_back(std::llround(p.time_s / unit_s), p.effective_j);
    }
    std::size_t piece = 0;
    return make_table(hull.front().first, hull.back().first, [&](std::int64_t d) {
      while (piece + 1 < hull.size() && hull[piece + 1].first < d) ++piece;
      if (piece + 1 == hull.size() || d <= hull[piece].first) return hull[piece].second / unit_s;
      const auto& [q0, e0] = hull[piece];
      const auto& [q1, e1] = hull[piece + 1];
      return (e0 + (e1 - e0) * static_cast<double>(d - q0) / static_cast<double>(q1 - q0)) / unit_s;
    });
  }

  // Cost and flow bounds at every duration in [min_q, max_q]; `cost_at` is called once for
  // each, in increasing order.
  template <typename Cost>
  static CostTable make_table(std::int64_t min_q, std::int64_t max_q, Cost&& cost_at) {
    CostTable table;
    table.min_q = min_q;
    std::vector<double> values;
    for (std::int64_t d = min_q; d <= max_q; ++d) values.push_back(cost_at(d));
    const auto c = [&](std::int64_t d) { return values[static_cast<std::size_t>(d - min_q)]; };
    const double infinity = std::numeric_limits<double>::infinity();
    for (std::int64_t d = table.min_q; d <= max_q; ++d) {
      table.cost.push_back(c(d));
      double lb = 0.0;
      double ub = infinity;
      if (table.min_q == max_q) {
        // Never sped up or slowed down: like a dummy arc.
      } else if (d - 1 < table.min_q) {
        lb = std::abs(c(d) - c(d + 1));
      } else if (d + 1 > max_q) {
        ub = std::abs(c(d - 1) - c(d));
      } else {
        lb = std::abs(c(d) - c(d + 1));
        ub = std::abs(c(d - 1) - c(d)) + kFlowEpsilon;
      }
      table.lower.push_back(truncate_bound(lb));
      table.upper.push_back(ub == infinity ? infinity : truncate_bound(ub));
    }
    return table;
  }

  const CostTable& table_of(Dag::NodeId n) const { return tables_[problem_.node_operation[n]]; }
  double cost(Dag::NodeId n, std::int64_t d) const {
    const CostTable& t = table_of(n);
    return t.cost[static_cast<std::size_t>(d - t.min_q)];
  }
  bool is_constant(Dag::NodeId n) const { return min_q_[n] == max_q_[n]; }

  double total_fitted_cost() const {
    double total = 0.0;
    for (std::size_t i = 0; i < duration_.size(); ++i) {
      total += cost(static_cast<Dag::NodeId>(i), duration_[i]);
    }
    return total;
  }

  void set_durations(const std::vector<std::int64_t>& durations) {
    duration_ = durations;
    for (std::size_t i = 0; i < durations.size(); ++i) ordered_duration_[position_[i]] = durations[i];
  }

  // Forward and backward critical-path passes over the DAG; returns the iteration length.
  // The backward pass also finds each node's arc state (arc_state_) and lists the nodes whose
  // arcs set_capacities() must set: those whose state or duration changed.
  // Only durations at topological positions from `first_changed` to `last_changed` changed
  // since the last call: earliest finishes before the first and tails after the last are as
  // they were, and the passes start there (a step's changes leave half of each pass
  // untouched on average: 49% before the first and 48% after the last on the A40 8 x 96
  // crawls).
  std::int64_t compute_times(std::size_t first_changed = 0, std::size_t last_changed = kAllPositions) {
    const auto& order = dag_.topological_order();
    const std::size_t n = order.size();
    if (n == 0) return iteration_length_ = 0;
    last_changed = std::min(last_changed, n - 1);
    const std::int64_t* const duration = ordered_duration_.data();
    std::int64_t* const finish_at = earliest_finish_.data();
    std::int64_t* const latest_finish = finish_prefix_max_.data();
    std::int64_t* const tail = tail_.data();
    // Both passes are chains of dependent maxima, bound by latency: computed as the earliest
    // finish (forward) and the tail, the longest path from a node's start to the end
    // (backward), they do not depend on each other, and one loop interleaves the two chains
    // for as long as both run. The forward pass keeps the running maximum of the finishes by
    // position, whose last entry is the iteration's length.
    std::int64_t running = first_changed == 0 ? 0 : latest_finish[first_changed - 1];
    const auto forward = [&](std::size_t k) {
      std::int64_t start = 0;
      for (std::int32_t i = pred_begin_[k]; i < pred_begin_[k + 1]; ++i) start = std::max(start, finish_at[pred_[i]]);
      finish_at[k] = start + duration[k];
      running = std::max(running, finish_at[k]);
      latest_finish[k] = running;
    };
    const auto backward = [&](std::size_t j) {
      std::int64_t after = 0;
      for (std::int32_t i = succ_begin_[j]; i < succ_begin_[j + 1]; ++i) after = std::max(after, tail[succ_[i]]);
      tail[j] = after + duration[j];
    };
    const std::size_t forward_count = n - first_changed, backward_count = last_changed + 1;
    const std::size_t both = std::min(forward_count, backward_count);
    for (std::size_t i = 0; i < both; ++i) {
      forward(first_changed + i);
      backward(last_changed - i);
    }
    for (std::size_t i = both; i < forward_count; ++i) forward(first_changed + i);
    for (std::size_t i = both; i < backward_count; ++i) backward(last_changed - i);
    const std::int64_t length = latest_finish[n - 1];
    // Latest start = length - tail. A node's arc state needs nothing of another node's pass.
    for (std::size_t k = 0; k < n; ++k) {
      std::uint64_t state = 0;
      if (finish_at[k] - duration[k] + tail[k] == length) {  // critical
        const std::int32_t first = succ_begin_[k], count = succ_begin_[k + 1] - first;
        if (count > static_cast<std::int32_t>(kMaxTrackedSuccessors)) {
          state = kUnknownState;  // too many to track: set every time
        } else {
          state = kCritical | (tail[k] == length ? kStartsAtZero : 0) | (finish_at[k] == length ? kEndsLast : 0);
          for (std::int32_t i = 0; i < count; ++i) {
            if (finish_at[k] == length - tail[succ_[first + i]]) state |= kFirstTightSuccessor << i;
          }
        }
      }
      const Dag::NodeId v = order[k];
      if (state != arc_state_[v] || state == kUnknownState || (state != 0 && duration_changed_[v])) {
        arc_state_[v] = state;
        stale_arcs_.push_back(v);
      }
    }
    iteration_length_ = length;
    return length;
  }

  // Earliest finish and latest start of a node (the passes keep them by position).
  std::int64_t earliest_finish(Dag::NodeId v) const { return earliest_finish_[position_[v]]; }
  std::int64_t latest_start(Dag::NodeId v) const { return iteration_length_ - tail_[position_[v]]; }

  bool critical(Dag::NodeId n) const { return arc_state_[n] & kCritical; }

  // Flow bounds of an operation arc on the critical DAG (docs/solver.md, "The crawl", step 2b).
  std::pair<double, double> bounds(Dag::NodeId n) const {
    const CostTable& t = table_of(n);
    const auto i = static_cast<std::size_t>(duration_[n] - t.min_q);
    return {t.lower[i], t.upper[i]};
  }

  // The flow network of the minimum cut (docs/solver.md, "The crawl", step 2c), built once over the whole
  // activity-on-arc graph: arcs off the critical DAG get capacity 0, which is the same as
  // absent, so a step only sets capacities and the flow carries over from the last step.
  // Instead of the reference's two max flows (a feasible flow via a super source and sink,
  // then an s-t augmentation) it solves one: the cut value sum_{S->T} ub - sum_{T->S} lb
  // equals the ordinary cut of capacities ub - lb plus sum_{v in S} (out_lb(v) - in_lb(v)),
  // a node term carried by arcs left(n) -> t and s -> right(n) of capacity lb(n). Both have
  // the same minimal minimum cut: the nodes reachable from s in the final residual graph.
  void build_network(bool absorb_cuts, bool separate_duals) {
    const std::size_t n = dag_.num_nodes();
    network_.reset(static_cast<int>(2 + 2 * n));
    separate_duals_ = separate_duals;
    if (separate_duals_) dual_network_.reset(static_cast<int>(2 + 2 * n));
    op_arc_.resize(n);
    lower_out_arc_.resize(n);
    lower_in_arc_.resize(n);
    source_arc_.assign(n, -1);
    sink_arc_.assign(n, -1);
    dummy_begin_.assign(n + 1, 0);
    dummy_arc_.clear();
    first_operations_.clear();
    candidate_bits_.assign((n + 63) / 64, 0);
    arc_ends_.clear();
    const auto add = [&](int from, int to) {
      arc_ends_.emplace_back(from, to);
      if (separate_duals_) dual_network_.add_arc(from, to);  // the same index
      return network_.add_arc(from, to);
    };
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
      op_arc_[i] = add(left_of(v), right_of(v));
      lower_out_arc_[i] = add(left_of(v), kSink);
      lower_in_arc_[i] = add(kSource, right_of(v));
      if (dag_.predecessors(v).empty()) {
        source_arc_[i] = add(kSource, left_of(v));
        first_operations_.push_back(v);
      }
      if (dag_.successors(v).empty()) sink_arc_[i] = add(right_of(v), kSink);
      for (Dag::NodeId w : dag_.successors(v)) dummy_arc_.push_back(add(right_of(v), left_of(w)));
      dummy_begin_[i + 1] = dummy_arc_.size();
    }
    if (!absorb_cuts) return;
    // Each node's arcs to t and from s, for capacity cuts below the flow (max_flow.hpp,
    // set_terminal_arcs): the lower-bound arcs where a node has one, and an arc of capacity 0
    // (closed but for raises) where it has none. Added after the others, so that every node
    // lists its other arcs in the same order as without them.
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
      network_.set_terminal_arcs(left_of(v), network_.add_arc(kSource, left_of(v)), lower_out_arc_[i]);
      network_.set_terminal_arcs(right_of(v), lower_in_arc_[i], network_.add_arc(right_of(v), kSink));
    }
  }

  // Capacities of the current critical DAG (docs/solver.md, "The crawl", steps 2a-2b), set
  // for the nodes compute_times() listed: a node whose arc state and duration stayed as they
  // were has its arcs as they should be. Off the critical DAG every arc is 0.
  void set_capacities() {
    constexpr double kUnbounded = FlowNetwork::kUnbounded;
    // On the dual network too: a cut below its flow only notes an imbalance there, restored
    // when it next runs.
    const auto set_capacity = [&](int arc, double capacity) {
      network_.set_capacity(arc, capacity);
      if (separate_duals_) dual_network_.set_capacity(arc, capacity);
    };
    // In node order: the order of capacity cuts decides how the flow is restored, which can
    // decide between cuts of equal cost (ties in the crawl are common: identical microbatches).
    std::sort(stale_arcs_.begin(), stale_arcs_.end());
    stale_arcs_.erase(std::unique(stale_arcs_.begin(), stale_arcs_.end()), stale_arcs_.end());
    for (const Dag::NodeId v : stale_arcs_) {
      const std::size_t i = static_cast<std::size_t>(v);
      const std::uint64_t state = arc_state_[i];
      const bool on = state & kCritical;
      const bool all = state == kUnknownState;  // state unknown: work the arcs out here
      const auto [lb, ub] = on ? bounds(v) : std::pair<double, double>{0.0, 0.0};
      set_capacity(op_arc_[i], std::isfinite(ub) ? std::max(0.0, ub - lb) : kUnbounded);
      set_capacity(lower_out_arc_[i], lb);
      set_capacity(lower_in_arc_[i], lb);
      if (source_arc_[i] >= 0) {
        const bool tight = all ? on && latest_start(v) == 0 : (state & kStartsAtZero) != 0;
        set_capacity(source_arc_[i], tight ? kUnbounded : 0.0);
      }
      if (sink_arc_[i] >= 0) {
        const bool tight = all ? on && earliest_finish(v) == iteration_length_ : (state & kEndsLast) != 0;
        set_capacity(sink_arc_[i], tight ? kUnbounded : 0.0);
      }
      const auto successors = dag_.successors(v);
      for (std::size_t j = 0; j < successors.size(); ++j) {
        const bool tight = all ? on && earliest_finish(v) == latest_start(successors[j])
                               : (state & (kFirstTightSuccessor << j)) != 0;
        set_capacity(dummy_arc_[dummy_begin_[i] + j], tight ? kUnbounded : 0.0);
      }
      duration_changed_[i] = 0;
    }
    stale_arcs_.clear();
  }

  // One Phillips–Dessouky step: finds the cut and the duration changes. Returns false when
  // the crawl must stop (reason set).
  bool step(std::size_t index, std::vector<DurationChange>* changes, double* cost_change, std::string* reason) {
    set_capacities();
    std::vector<char> preflow_side;
    std::vector<int> preflow_nodes;
    if (algorithm_ == MaxFlowAlgorithm::kDinic) {
      network_.run(kSource, kSink, kFlowEpsilon);
      if (on_flow_ && (index % flow_every_ == 0 || iteration_length_ - t_min_q_ <= static_cast<std::int64_t>(flow_every_))) {
        if (separate_duals_) dual_network_.run(kSource, kSink, kFlowEpsilon);
        report_flow(separate_duals_ ? dual_network_ : network_);
      }
    } else {
      preflow_side = preflow_source_side();
      for (int x = 0; x < network_.num_nodes(); ++x) {
        if (preflow_side[x]) preflow_nodes.push_back(x);
      }
    }
    const auto on_source_side = [&](int v) {
      return algorithm_ == MaxFlowAlgorithm::kDinic ? network_.on_source_side(v) : preflow_side[v] != 0;
    };
    const auto crosses = [&](int arc_from, int arc_to) { return on_source_side(arc_from) && !on_source_side(arc_to); };
    const auto active = [&](int arc) { return arc >= 0 && network_.capacity(arc) > 0.0; };
    // Only operations with an end on the source side, and those after s, can cross the cut:
    // those, in node order (the order of the changes and of their summed cost).
    // A bit per operation, read back word by word: in node order without sorting.
    for (const Dag::NodeId v : first_operations_) candidate_bits_[v >> 6] |= std::uint64_t{1} << (v & 63);
    for (const int x : algorithm_ == MaxFlowAlgorithm::kDinic ? network_.source_side_nodes() : std::span<const int>(preflow_nodes)) {
      if (x < 2) continue;
      const int v = (x - 2) / 2;
      candidate_bits_[v >> 6] |= std::uint64_t{1} << (v & 63);
    }
    cut_candidates_.clear();
    for (std::size_t w = 0; w < candidate_bits_.size(); ++w) {
      for (std::uint64_t bits = candidate_bits_[w]; bits; bits &= bits - 1) {
        cut_candidates_.push_back(static_cast<Dag::NodeId>(64 * w + std::countr_zero(bits)));
      }
      candidate_bits_[w] = 0;
    }
    double change = 0.0;
    for (const Dag::NodeId v : cut_candidates_) {
      const auto i = static_cast<std::size_t>(v);
      if (!critical(v)) continue;
      const std::int64_t d = duration_[v];
      if (crosses(left_of(v), right_of(v))) {  // shorten
        if (d - 1 < min_q_[v]) {
          *reason = "minimum cut contains an operation already at its fastest";
          return false;
        }
        change += std::abs(cost(v, d - 1) - cost(v, d));
        changes->push_back({v, d - 1});
      } else if (crosses(right_of(v), left_of(v)) && !is_constant(v)) {  // lengthen
        if (d + 1 > max_q_[v]) {
          *reason = "minimum cut lengthens an operation already at its slowest";
          return false;
        }
        change -= std::abs(cost(v, d) - cost(v, d + 1));
        changes->push_back({v, d + 1});
      }
      bool through_dependency = (active(source_arc_[i]) && crosses(kSource, left_of(v))) ||
                                (active(sink_arc_[i]) && crosses(right_of(v), kSink));
      const auto successors = dag_.successors(v);
      for (std::size_t j = 0; j < successors.size() && !through_dependency; ++j) {
        through_dependency = active(dummy_arc_[dummy_begin_[i] + j]) && crosses(right_of(v), left_of(successors[j]));
      }
      if (through_dependency) {
        *reason = "minimum cut crosses a dependency that takes no time";
        return false;
      }
    }
    if (changes->empty()) {
      *reason = "minimum cut shortens nothing";
      return false;
    }
    if (std::abs(change) < kFlowEpsilon) {
      *reason = "cost change below 1e-6";
      return false;
    }
    *cost_change = change;
    return true;
  }

  // CrawlOptions::on_flow: the flows of the dependency, start and end arcs. Arcs off the
  // critical DAG have capacity 0 and carry none.
  void report_flow(const FlowNetwork& network) {
    const std::size_t n = dag_.num_nodes();
    flow_dependencies_.resize(dummy_arc_.size());
    flow_starts_.assign(n, 0.0);
    flow_ends_.assign(n, 0.0);
    for (std::size_t e = 0; e < dummy_arc_.size(); ++e) flow_dependencies_[e] = network.flow(dummy_arc_[e]);
    for (std::size_t i = 0; i < n; ++i) {
      if (source_arc_[i] >= 0) flow_starts_[i] = network.flow(source_arc_[i]);
      if (sink_arc_[i] >= 0) flow_ends_[i] = network.flow(sink_arc_[i]);
    }
    (*on_flow_)(CrawlFlow{iteration_length_, flow_dependencies_, flow_starts_, flow_ends_});
  }

  // The same cut with LEMON's Preflow on the positive-capacity arcs, rebuilt every step.
  std::vector<char> preflow_source_side() const {
    using Graph = lemon::SmartDigraph;
    Graph graph;
    const int num_nodes = network_.num_nodes();
    graph.reserveNode(num_nodes);
    for (int v = 0; v < num_nodes; ++v) graph.addNode();
    std::vector<double> capacities;
    for (int a = 0; a < network_.num_arcs(); ++a) {
      if (network_.capacity(a) <= 0.0) continue;
      graph.addArc(graph.nodeFromId(tail_of(a)), graph.nodeFromId(head_of(a)));
      capacities.push_back(network_.capacity(a));
    }
    Graph::ArcMap<double> capacity(graph);
    for (Graph::ArcIt a(graph); a != lemon::INVALID; ++a) capacity[a] = capacities[graph.id(a)];
    lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity, graph.nodeFromId(kSource),
                                                         graph.nodeFromId(kSink));
    preflow.run();
    // Reachable from s through arcs with residual capacity above the noise level.
    std::vector<char> reached(num_nodes, 0);
    std::vector<Graph::Node> stack{graph.nodeFromId(kSource)};
    reached[kSource] = 1;
    while (!stack.empty()) {
      const Graph::Node u = stack.back();
      stack.pop_back();
      auto visit = [&](Graph::Node w) {
        if (!reached[graph.id(w)]) {
          reached[graph.id(w)] = 1;
          stack.push_back(w);
        }
      };
      for (Graph::OutArcIt a(graph, u); a != lemon::INVALID; ++a) {
        if (capacity[a] - preflow.flow(a) > kFlowEpsilon) visit(graph.target(a));
      }
      for (Graph::InArcIt a(graph, u); a != lemon::INVALID; ++a) {
        if (preflow.flow(a) > kFlowEpsilon) visit(graph.source(a));
      }
    }
    return reached;
  }

  // Ends of network arc a, from the layout build_network() made.
  int tail_of(int a) const { return arc_ends_[a].first; }
  int head_of(int a) const { return arc_ends_[a].second; }

  const EnergyProblem& problem_;
  const Dag& dag_;
  std::vector<CostTable> tables_;  // per problem operation
  std::vector<std::int64_t> duration_, min_q_, max_q_;
  std::vector<std::int32_t> position_;                  // per node: its topological position
  std::vector<std::int32_t> pred_begin_, pred_, succ_begin_, succ_;  // by position
  std::vector<std::int64_t> ordered_duration_;         // by position
  std::vector<std::int64_t> earliest_finish_, tail_;  // by position
  std::vector<std::int64_t> finish_prefix_max_;       // by position: the latest finish up to it
  static constexpr std::size_t kAllPositions = std::numeric_limits<std::size_t>::max();
  // A node's arc state: 0 off the critical DAG; else kCritical, whether it starts at 0 and
  // ends last (its source and sink arcs), and which arcs to its successors are tight.
  static constexpr std::uint64_t kCritical = 1, kStartsAtZero = 2, kEndsLast = 4, kFirstTightSuccessor = 8;
  static constexpr std::size_t kMaxTrackedSuccessors = 60;
  static constexpr std::uint64_t kUnknownState = ~std::uint64_t{0};
  std::vector<std::uint64_t> arc_state_;  // per node, as set_capacities() last set its arcs
  std::vector<char> duration_changed_;    // per node, since set_capacities() last ran
  std::vector<Dag::NodeId> stale_arcs_;   // nodes whose arcs set_capacities() must set
  std::int64_t iteration_length_ = 0;
  MaxFlowAlgorithm algorithm_ = MaxFlowAlgorithm::kDinic;
  const std::function<void(const CrawlFlow&)>* on_flow_ = nullptr;
  std::size_t flow_every_ = 1;
  std::int64_t t_min_q_ = 0;
  std::vector<double> flow_dependencies_, flow_starts_, flow_ends_;  // report_flow()'s
  FlowNetwork network_;       // the minimum cuts' (absorbs cuts below the flow, most crawls)
  FlowNetwork dual_network_;  // on_flow's flows, where network_ absorbs cuts (build_network)
  bool separate_duals_ = false;
  // Network arcs per DAG node: the operation, its lower-bound terms, and its dependencies.
  std::vector<int> op_arc_, lower_out_arc_, lower_in_arc_, source_arc_, sink_arc_;
  std::vector<int> dummy_arc_;              // per DAG edge, grouped by tail node
  std::vector<std::size_t> dummy_begin_;    // n + 1 offsets into dummy_arc_
  std::vector<std::pair<int, int>> arc_ends_;  // per network arc (for the LEMON rebuild)
  std::vector<Dag::NodeId> first_operations_;  // the DAG's sources, with arcs from s
  std::vector<Dag::NodeId> cut_candidates_;    // step()'s, kept to reuse its memory
  std::vector<std::uint64_t> candidate_bits_;  // step()'s: a bit per operation, all 0 between steps
};

}  // namespace

const std::vector<std::int64_t>& CrawlCursor::advance_to(std::size_t step) {
  for (; applied_ <= step && applied_ < result_.steps.size(); ++applied_) {
    for (std::size_t i = result_.change_begin[applied_]; i < result_.change_begin[applied_ + 1]; ++i) {
      durations_[result_.changes[i].node] = result_.changes[i].duration_q;
    }
  }
  return durations_;
}

double CrawlResult::reference_energy(const CrawlStep& step, const EnergyProblem& problem) const {
  return step.fitted_cost + problem.num_gpus() * (static_cast<double>(step.time_q) * problem.unit_time) * problem.p_blocking;
}

CrawlResult crawl_frontier(const EnergyProblem& problem, const CrawlOptions& options) {
  if (options.cost == CrawlCost::kMeasuredHull && !(options.hull_unit_s > 0.0)) {
    throw SolveError("crawl on the measured hull needs a positive time unit");
  }
  Crawler crawler(problem, options);
  return crawler.run(options);
}

OptionChoice choice_for_durations(const EnergyProblem& problem, const std::vector<std::int64_t>& durations) {
  OptionChoice choice(durations.size());
  for (std::size_t i = 0; i < durations.size(); ++i) {
    choice[i] = static_cast<std::int32_t>(problem.options_of(static_cast<Dag::NodeId>(i)).option_for_duration(durations[i]));
  }
  return choice;
}

}  // namespace perseus
