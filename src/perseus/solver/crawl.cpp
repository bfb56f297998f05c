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
    earliest_finish_.resize(n);
    latest_start_.resize(n);
    aoa_to_flow_.assign(2 + 2 * n, -1);
    edge_offset_.resize(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      edge_offset_[i + 1] = edge_offset_[i] + static_cast<int>(dag_.successors(static_cast<Dag::NodeId>(i)).size());
    }
    const std::size_t keys = 3 * n + static_cast<std::size_t>(edge_offset_[n]);
    previous_flow_.assign(keys, 0.0);
    previous_excess_flow_.assign(2 + 2 * n, 0.0);
  }

  int dummy_key(Dag::NodeId n, std::size_t j) const {
    return static_cast<int>(dag_.num_nodes()) + edge_offset_[n] + static_cast<int>(j);
  }
  int source_key(Dag::NodeId n) const { return static_cast<int>(dag_.num_nodes()) + edge_offset_.back() + n; }
  int sink_key(Dag::NodeId n) const { return static_cast<int>(2 * dag_.num_nodes()) + edge_offset_.back() + n; }

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
    int key;          // stable across steps: op n, dummy N + edge, source N+E+n, sink 2N+E+n
  };

  struct FlowArc {  // flow node ids
    int from;
    int to;
    double capacity;
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
      arcs_.push_back({left_of(node), right_of(node), node, lb, ub, node});
      finite_sum += lb + (std::isfinite(ub) ? ub : 0.0);
      if (dag_.predecessors(node).empty() && latest_start_[node] == 0) {
        arcs_.push_back({kSource, left_of(node), -1, 0.0, std::numeric_limits<double>::infinity(),
                         source_key(node)});
      }
      if (dag_.successors(node).empty() && earliest_finish_[node] == iteration_length_) {
        arcs_.push_back({right_of(node), kSink, -1, 0.0, std::numeric_limits<double>::infinity(),
                         sink_key(node)});
      }
      const auto successors = dag_.successors(node);
      for (std::size_t j = 0; j < successors.size(); ++j) {
        if (earliest_finish_[node] == latest_start_[successors[j]]) {
          arcs_.push_back({right_of(node), left_of(successors[j]), -1, 0.0, std::numeric_limits<double>::infinity(),
                           dummy_key(node, j)});
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
  // returned here as the nodes reachable from s in the final residual graph (indexed by
  // flow node; aoa_to_flow_ maps AOA nodes to flow nodes). Empty if no finite cut exists.
  std::vector<char> minimum_cut_source_side() {
    auto flow_node = [&](int aoa) {
      if (aoa_to_flow_[aoa] < 0) {
        aoa_to_flow_[aoa] = static_cast<int>(flow_nodes_.size());
        flow_nodes_.push_back(aoa);
      }
      return aoa_to_flow_[aoa];
    };
    const int s = flow_node(kSource);
    const int t = flow_node(kSink);
    flow_arcs_.clear();
    excess_.clear();
    for (const CriticalArc& arc : arcs_) {
      const int from = flow_node(arc.from);
      const int to = flow_node(arc.to);
      flow_arcs_.push_back({from, to, std::max(0.0, arc.ub - arc.lb)});
      excess_.resize(flow_nodes_.size(), 0.0);
      excess_[from] += arc.lb;
      excess_[to] -= arc.lb;
    }
    const int num_nodes = static_cast<int>(flow_nodes_.size());
    excess_.resize(num_nodes, 0.0);
    for (int v = 0; v < num_nodes; ++v) {
      if (v == s || v == t || excess_[v] == 0.0) continue;
      if (excess_[v] > 0) {
        flow_arcs_.push_back({v, t, excess_[v]});
      } else {
        flow_arcs_.push_back({s, v, -excess_[v]});
      }
    }
    std::vector<char> reached = algorithm_ == MaxFlowAlgorithm::kDinic
                                    ? dinic_source_side(num_nodes, s, t)
                                    : preflow_source_side(num_nodes, s, t);
    if (reached[t]) reached.clear();
    return reached;
  }

  // Warm-started from the previous cut's flow: consecutive critical DAGs differ in a few
  // arcs, so the old flow is nearly maximal and few augmenting phases remain.
  std::vector<char> dinic_source_side(int num_nodes, int s, int t) {
    dinic_.reset(num_nodes);
    const std::size_t critical = arcs_.size();
    for (std::size_t i = 0; i < flow_arcs_.size(); ++i) {
      const FlowArc& arc = flow_arcs_[i];
      const double start = i < critical ? previous_flow_[arcs_[i].key] : previous_excess_flow_[excess_owner(arc, s)];
      dinic_.add_arc(arc.from, arc.to, arc.capacity, start);
    }
    dinic_.run(s, t, kFlowEpsilon);
    // Remember this flow for the next step; arcs absent now start from zero next time.
    for (int key : remembered_keys_) previous_flow_[key] = 0.0;
    for (int aoa : remembered_excess_) previous_excess_flow_[aoa] = 0.0;
    remembered_keys_.clear();
    remembered_excess_.clear();
    for (std::size_t i = 0; i < flow_arcs_.size(); ++i) {
      const double flow = dinic_.flow(static_cast<int>(i));
      if (i < critical) {
        previous_flow_[arcs_[i].key] = flow;
        remembered_keys_.push_back(arcs_[i].key);
      } else {
        const int owner = excess_owner(flow_arcs_[i], s);
        previous_excess_flow_[owner] = flow;
        remembered_excess_.push_back(owner);
      }
    }
    return dinic_.source_side();
  }

  // The AOA node whose lower-bound imbalance an s -> v or v -> t arc carries.
  int excess_owner(const FlowArc& arc, int s) const { return flow_nodes_[arc.from == s ? arc.to : arc.from]; }

  std::vector<char> preflow_source_side(int num_nodes, int s, int t) {
    using Graph = lemon::SmartDigraph;
    Graph graph;
    graph.reserveNode(num_nodes);
    graph.reserveArc(static_cast<int>(flow_arcs_.size()));
    for (int v = 0; v < num_nodes; ++v) graph.addNode();
    for (const FlowArc& arc : flow_arcs_) graph.addArc(graph.nodeFromId(arc.from), graph.nodeFromId(arc.to));
    Graph::ArcMap<double> capacity(graph);
    for (Graph::ArcIt a(graph); a != lemon::INVALID; ++a) capacity[a] = flow_arcs_[graph.id(a)].capacity;
    lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity, graph.nodeFromId(s), graph.nodeFromId(t));
    preflow.run();
    // Reachable from s through arcs with residual capacity above the noise level.
    std::vector<char> reached(num_nodes, 0);
    std::vector<Graph::Node> stack{graph.nodeFromId(s)};
    reached[s] = 1;
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

  const EnergyProblem& problem_;
  const Dag& dag_;
  std::vector<std::int64_t> duration_, min_q_, max_q_;
  std::vector<std::int64_t> earliest_finish_, latest_start_;
  std::int64_t iteration_length_ = 0;
  std::vector<CriticalArc> arcs_;
  std::vector<int> aoa_to_flow_;  // AOA node -> flow graph node of the current step, or -1
  std::vector<int> flow_nodes_;   // AOA nodes mapped in the current step, by flow node
  std::vector<FlowArc> flow_arcs_;
  std::vector<double> excess_;
  MaxFlowAlgorithm algorithm_ = MaxFlowAlgorithm::kDinic;
  DinicMaxFlow dinic_;
  std::vector<int> edge_offset_;            // CSR offset of each DAG node's successor edges
  std::vector<double> previous_flow_;       // by stable arc key
  std::vector<double> previous_excess_flow_;  // by AOA node
  std::vector<int> remembered_keys_, remembered_excess_;
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
