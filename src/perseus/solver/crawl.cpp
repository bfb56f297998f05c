#include "perseus/solver/crawl.hpp"

#include "perseus/solver/max_flow.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

namespace perseus {
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
  explicit Crawler(const EnergyProblem& problem) : problem_(problem), dag_(problem.dag) {
    const std::size_t n = dag_.num_nodes();
    duration_.resize(n);
    min_q_.resize(n);
    max_q_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const OperationOptions& op = problem.options_of(static_cast<Dag::NodeId>(i));
      min_q_[i] = op.min_q();
      max_q_[i] = op.max_q();
    }
    tables_.reserve(problem.operations.size());
    for (const OperationOptions& op : problem.operations) tables_.push_back(make_table(op));
    earliest_finish_.resize(n);
    latest_start_.resize(n);
    was_critical_.assign(n, 1);  // the first step sets every arc
    build_network();
  }

  CrawlResult run(const CrawlOptions& options) {
    algorithm_ = options.max_flow;
    CrawlResult result;
    duration_ = min_q_;
    result.t_min_q = compute_times();
    duration_ = max_q_;
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
      if (!step(&step_changes, &cost_change, &result.stop_reason)) break;
      for (const DurationChange& c : step_changes) {
        fitted_cost += cost(c.node, c.duration_q) - cost(c.node, duration_[c.node]);
        duration_[c.node] = c.duration_q;
      }
      const std::int64_t new_length = compute_times();
      if (new_length != length - 1) {
        // Cannot happen with integer durations (every critical path crosses the cut once
        // more forward than backward); kept as a guard against a wrong cut.
        result.stop_reason = "step changed the iteration time by " + std::to_string(new_length - length);
        break;
      }
      result.steps.push_back({new_length, fitted_cost, cost_change});
      result.changes.insert(result.changes.end(), step_changes.begin(), step_changes.end());
      result.change_begin.push_back(result.changes.size());
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

  static CostTable make_table(const OperationOptions& op) {
    CostTable table;
    table.min_q = op.min_q();
    const std::int64_t max_q = op.max_q();
    const auto c = [&](std::int64_t d) { return op.fitted_cost(d); };
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

  // Forward and backward critical-path passes over the DAG; returns the iteration length.
  std::int64_t compute_times() {
    const auto& order = dag_.topological_order();
    std::fill(earliest_finish_.begin(), earliest_finish_.end(), 0);
    std::int64_t length = 0;
    for (Dag::NodeId n : order) {
      std::int64_t start = 0;
      for (Dag::NodeId p : dag_.predecessors(n)) start = std::max(start, earliest_finish_[p]);
      earliest_finish_[n] = start + duration_[n];
      length = std::max(length, earliest_finish_[n]);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId n = *it;
      std::int64_t finish = length;
      for (Dag::NodeId s : dag_.successors(n)) finish = std::min(finish, latest_start_[s]);
      latest_start_[n] = finish - duration_[n];
    }
    iteration_length_ = length;
    return length;
  }

  bool critical(Dag::NodeId n) const { return earliest_finish_[n] - duration_[n] == latest_start_[n]; }

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
  void build_network() {
    const std::size_t n = dag_.num_nodes();
    network_.reset(static_cast<int>(2 + 2 * n));
    op_arc_.resize(n);
    lower_out_arc_.resize(n);
    lower_in_arc_.resize(n);
    source_arc_.assign(n, -1);
    sink_arc_.assign(n, -1);
    dummy_begin_.assign(n + 1, 0);
    dummy_arc_.clear();
    arc_ends_.clear();
    const auto add = [&](int from, int to) {
      arc_ends_.emplace_back(from, to);
      return network_.add_arc(from, to);
    };
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
      op_arc_[i] = add(left_of(v), right_of(v));
      lower_out_arc_[i] = add(left_of(v), kSink);
      lower_in_arc_[i] = add(kSource, right_of(v));
      if (dag_.predecessors(v).empty()) source_arc_[i] = add(kSource, left_of(v));
      if (dag_.successors(v).empty()) sink_arc_[i] = add(right_of(v), kSink);
      for (Dag::NodeId w : dag_.successors(v)) dummy_arc_.push_back(add(right_of(v), left_of(w)));
      dummy_begin_[i + 1] = dummy_arc_.size();
    }
  }

  // Capacities of the current critical DAG (docs/solver.md, "The crawl", steps 2a-2b).
  // A node off the critical DAG now and at the last step has every arc at 0 already.
  void set_capacities() {
    const std::size_t n = dag_.num_nodes();
    constexpr double kUnbounded = FlowNetwork::kUnbounded;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
      const bool on = critical(v);
      if (!on && !was_critical_[i]) continue;
      was_critical_[i] = on;
      const auto [lb, ub] = on ? bounds(v) : std::pair<double, double>{0.0, 0.0};
      network_.set_capacity(op_arc_[i], std::isfinite(ub) ? std::max(0.0, ub - lb) : kUnbounded);
      network_.set_capacity(lower_out_arc_[i], lb);
      network_.set_capacity(lower_in_arc_[i], lb);
      if (source_arc_[i] >= 0) network_.set_capacity(source_arc_[i], on && latest_start_[v] == 0 ? kUnbounded : 0.0);
      if (sink_arc_[i] >= 0) {
        network_.set_capacity(sink_arc_[i], on && earliest_finish_[v] == iteration_length_ ? kUnbounded : 0.0);
      }
      const auto successors = dag_.successors(v);
      for (std::size_t j = 0; j < successors.size(); ++j) {
        const bool tight = on && earliest_finish_[v] == latest_start_[successors[j]];
        network_.set_capacity(dummy_arc_[dummy_begin_[i] + j], tight ? kUnbounded : 0.0);
      }
    }
  }

  // One Phillips–Dessouky step: finds the cut and the duration changes. Returns false when
  // the crawl must stop (reason set).
  bool step(std::vector<DurationChange>* changes, double* cost_change, std::string* reason) {
    set_capacities();
    const std::vector<char> source_side = algorithm_ == MaxFlowAlgorithm::kDinic
                                              ? (network_.run(kSource, kSink, kFlowEpsilon), network_.source_side())
                                              : preflow_source_side();
    const auto crosses = [&](int arc_from, int arc_to) { return source_side[arc_from] && !source_side[arc_to]; };
    const auto active = [&](int arc) { return arc >= 0 && network_.capacity(arc) > 0.0; };
    double change = 0.0;
    for (std::size_t i = 0; i < dag_.num_nodes(); ++i) {
      const auto v = static_cast<Dag::NodeId>(i);
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
  std::vector<std::int64_t> earliest_finish_, latest_start_;
  std::vector<char> was_critical_;  // per node, critical at the last set_capacities()
  std::int64_t iteration_length_ = 0;
  MaxFlowAlgorithm algorithm_ = MaxFlowAlgorithm::kDinic;
  FlowNetwork network_;
  // Network arcs per DAG node: the operation, its lower-bound terms, and its dependencies.
  std::vector<int> op_arc_, lower_out_arc_, lower_in_arc_, source_arc_, sink_arc_;
  std::vector<int> dummy_arc_;              // per DAG edge, grouped by tail node
  std::vector<std::size_t> dummy_begin_;    // n + 1 offsets into dummy_arc_
  std::vector<std::pair<int, int>> arc_ends_;  // per network arc (for the LEMON rebuild)
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
  Crawler crawler(problem);
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
