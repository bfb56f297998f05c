#include "perseus/solver/crawl.hpp"

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
    earliest_finish_.resize(n);
    latest_start_.resize(n);
    aoa_to_flow_.assign(2 + 2 * n, -1);
  }

  CrawlResult run(const CrawlOptions& options) {
    CrawlResult result;
    duration_ = min_q_;
    result.t_min_q = compute_times();
    duration_ = max_q_;
    result.initial_durations = duration_;
    result.t_star_q = compute_times();
    result.initial_fitted_cost = total_fitted_cost();
    result.change_begin.push_back(0);

    std::vector<DurationChange> step_changes;
    while (options.max_steps == 0 || result.steps.size() < options.max_steps) {
      const std::int64_t length = iteration_length_;
      step_changes.clear();
      double cost_change = 0.0;
      if (!step(&step_changes, &cost_change, &result.stop_reason)) break;
      for (const DurationChange& c : step_changes) duration_[c.node] = c.duration_q;
      const std::int64_t new_length = compute_times();
      if (new_length != length - 1) {
        // Cannot happen with integer durations (every critical path crosses the cut once
        // more forward than backward); kept as a guard against a wrong cut.
        result.stop_reason = "step changed the iteration time by " + std::to_string(new_length - length);
        break;
      }
      result.steps.push_back({new_length, total_fitted_cost(), cost_change});
      result.changes.insert(result.changes.end(), step_changes.begin(), step_changes.end());
      result.change_begin.push_back(result.changes.size());
      if (options.progress && result.steps.size() % options.progress_every == 0) {
        options.progress(result.steps.size(), new_length, result.t_min_q);
      }
    }
    return result;
  }

 private:
  double cost(Dag::NodeId n, std::int64_t d) const { return problem_.options_of(n).fitted_cost(d); }
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

  // Flow bounds of an operation arc on the critical DAG (frontier.md, step 2b).
  std::pair<double, double> bounds(Dag::NodeId n, double infinity) const {
    const std::int64_t d = duration_[n];
    double lb = 0.0;
    double ub = infinity;
    if (is_constant(n)) {
      // Never sped up or slowed down: like a dummy arc.
    } else if (d - 1 < min_q_[n]) {
      lb = std::abs(cost(n, d) - cost(n, d + 1));
    } else if (d + 1 > max_q_[n]) {
      ub = std::abs(cost(n, d - 1) - cost(n, d));
    } else {
      lb = std::abs(cost(n, d) - cost(n, d + 1));
      ub = std::abs(cost(n, d - 1) - cost(n, d)) + kFlowEpsilon;
    }
    return {truncate_bound(lb), ub == infinity ? infinity : truncate_bound(ub)};
  }

  struct CriticalArc {
    int from;         // AOA node ids
    int to;
    Dag::NodeId op;   // -1 for a dummy arc
    double lb;
    double ub;
  };

  // One Phillips–Dessouky step: finds the cut and the duration changes. Returns false when
  // the crawl must stop (reason set).
  bool step(std::vector<DurationChange>* changes, double* cost_change, std::string* reason) {
    collect_critical_arcs();
    const std::vector<char> source_side = minimum_cut_source_side();
    struct ReleaseFlowNodes {
      Crawler* self;
      ~ReleaseFlowNodes() {
        for (int aoa : self->flow_nodes_) self->aoa_to_flow_[aoa] = -1;
        self->flow_nodes_.clear();
      }
    } release{this};
    if (source_side.empty()) {
      *reason = "no finite cut: the iteration cannot be shortened further";
      return false;
    }
    double change = 0.0;
    for (const CriticalArc& arc : arcs_) {
      const bool from_s = source_side[aoa_to_flow_[arc.from]];
      const bool to_s = source_side[aoa_to_flow_[arc.to]];
      if (from_s && !to_s) {  // shorten
        if (arc.op < 0) {
          *reason = "minimum cut crosses a dependency that takes no time";
          return false;
        }
        if (duration_[arc.op] - 1 < min_q_[arc.op]) {
          *reason = "minimum cut contains an operation already at its fastest";
          return false;
        }
        const std::int64_t d = duration_[arc.op];
        change += std::abs(cost(arc.op, d - 1) - cost(arc.op, d));
        changes->push_back({arc.op, d - 1});
      } else if (!from_s && to_s && arc.op >= 0 && !is_constant(arc.op)) {  // lengthen
        if (duration_[arc.op] + 1 > max_q_[arc.op]) {
          *reason = "minimum cut lengthens an operation already at its slowest";
          return false;
        }
        const std::int64_t d = duration_[arc.op];
        change -= std::abs(cost(arc.op, d) - cost(arc.op, d + 1));
        changes->push_back({arc.op, d + 1});
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

  void collect_critical_arcs() {
    arcs_.clear();
    const std::size_t n = dag_.num_nodes();
    // Larger than any cut made of finite arcs, so a cut through an unbounded arc is chosen
    // only when no finite cut exists (the reference uses the constant 10000 instead).
    double finite_sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto node = static_cast<Dag::NodeId>(i);
      if (!critical(node)) continue;
      auto [lb, ub] = bounds(node, std::numeric_limits<double>::infinity());
      arcs_.push_back({left_of(node), right_of(node), node, lb, ub});
      finite_sum += lb + (std::isfinite(ub) ? ub : 0.0);
      if (dag_.predecessors(node).empty() && latest_start_[node] == 0) {
        arcs_.push_back({kSource, left_of(node), -1, 0.0, std::numeric_limits<double>::infinity()});
      }
      if (dag_.successors(node).empty() && earliest_finish_[node] == iteration_length_) {
        arcs_.push_back({right_of(node), kSink, -1, 0.0, std::numeric_limits<double>::infinity()});
      }
      for (Dag::NodeId s : dag_.successors(node)) {
        if (earliest_finish_[node] == latest_start_[s]) {
          arcs_.push_back({right_of(node), left_of(s), -1, 0.0, std::numeric_limits<double>::infinity()});
        }
      }
    }
    const double infinity = 1.0 + 2.0 * finite_sum;
    for (CriticalArc& arc : arcs_) {
      if (!std::isfinite(arc.ub)) arc.ub = infinity;
    }
  }

  // Minimum cut of the critical DAG with lower flow bounds. Instead of the reference's two
  // max flows (a feasible flow via a super source and sink, then an s-t augmentation), it
  // solves one: the cut value sum_{S->T} ub - sum_{T->S} lb equals the ordinary cut of
  // capacities ub - lb plus sum_{v in S} (out_lb(v) - in_lb(v)), a node term expressed as
  // arcs v -> t (positive) or s -> v (negative). Both have the same minimal minimum cut,
  // returned here as the nodes reachable from s in the final residual graph.
  std::vector<char> minimum_cut_source_side() {
    using Graph = lemon::SmartDigraph;
    Graph graph;
    auto flow_node = [&](int aoa) {
      if (aoa_to_flow_[aoa] < 0) {
        aoa_to_flow_[aoa] = graph.id(graph.addNode());
        flow_nodes_.push_back(aoa);
      }
      return graph.nodeFromId(aoa_to_flow_[aoa]);
    };
    flow_node(kSource);
    flow_node(kSink);
    graph.reserveArc(static_cast<int>(arcs_.size() * 2));
    std::vector<double> capacity;
    capacity.reserve(arcs_.size() * 2);
    std::vector<double> excess;
    for (const CriticalArc& arc : arcs_) {
      const Graph::Node from = flow_node(arc.from);
      const Graph::Node to = flow_node(arc.to);
      graph.addArc(from, to);
      capacity.push_back(std::max(0.0, arc.ub - arc.lb));
      excess.resize(graph.maxNodeId() + 1, 0.0);
      excess[graph.id(from)] += arc.lb;
      excess[graph.id(to)] -= arc.lb;
    }
    excess.resize(graph.maxNodeId() + 1, 0.0);
    const Graph::Node s = graph.nodeFromId(aoa_to_flow_[kSource]);
    const Graph::Node t = graph.nodeFromId(aoa_to_flow_[kSink]);
    for (int v = 0; v <= graph.maxNodeId(); ++v) {
      const Graph::Node node = graph.nodeFromId(v);
      if (node == s || node == t || excess[v] == 0.0) continue;
      if (excess[v] > 0) {
        graph.addArc(node, t);
        capacity.push_back(excess[v]);
      } else {
        graph.addArc(s, node);
        capacity.push_back(-excess[v]);
      }
    }
    Graph::ArcMap<double> capacity_map(graph);
    for (Graph::ArcIt a(graph); a != lemon::INVALID; ++a) capacity_map[a] = capacity[graph.id(a)];

    lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity_map, s, t);
    preflow.run();

    // Reachable from s through arcs with residual capacity above the noise level.
    std::vector<char> reached(graph.maxNodeId() + 1, 0);
    std::vector<Graph::Node> stack{s};
    reached[graph.id(s)] = 1;
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
        if (capacity_map[a] - preflow.flow(a) > kFlowEpsilon) visit(graph.target(a));
      }
      for (Graph::InArcIt a(graph, u); a != lemon::INVALID; ++a) {
        if (preflow.flow(a) > kFlowEpsilon) visit(graph.source(a));
      }
    }
    if (reached[graph.id(t)]) reached.clear();  // no finite cut separates s from t
    return reached;  // indexed by flow node id; aoa_to_flow_ maps AOA ids to it
  }

  const EnergyProblem& problem_;
  const Dag& dag_;
  std::vector<std::int64_t> duration_, min_q_, max_q_;
  std::vector<std::int64_t> earliest_finish_, latest_start_;
  std::int64_t iteration_length_ = 0;
  std::vector<CriticalArc> arcs_;
  std::vector<int> aoa_to_flow_;  // AOA node -> flow graph node of the current step, or -1
  std::vector<int> flow_nodes_;   // AOA nodes mapped in the current step
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
