// Maximum flow for the crawl's minimum cuts.
//
// Why our own: LEMON's Preflow (push-relabel) spends most of its time on these graphs
// returning the huge excess that the unbounded dependency arcs admit (perf: 88% of a
// solve in Preflow::startFirstPhase); augmenting paths do not, because the flow value is
// bounded by the few finite arcs of the cut. bench/solver_bench measures both
// (BM_*_Lemon vs BM_*_Dinic); see the README for the ratio. LEMON stays selectable
// (MaxFlowAlgorithm::kLemonPreflow) and the tests check both give the same crawl.
#pragma once

#include <cstdint>
#include <vector>

namespace perseus {

// Dinic's algorithm on a graph rebuilt for every cut, with buffers reused between cuts.
class DinicMaxFlow {
 public:
  void reset(int num_nodes);
  // Returns the arc's index (for flow()). `initial_flow` warm-starts the arc (clamped to
  // [0, capacity]); run() first restores flow conservation, so any start is valid.
  int add_arc(int from, int to, double capacity, double initial_flow = 0.0);
  // Runs from s to t. Residual capacities at or below `epsilon` count as saturated.
  double run(int s, int t, double epsilon);
  int num_arcs() const { return static_cast<int>(from_.size() / 2); }
  double flow(int arc) const { return capacity_[2 * arc] - residual_[2 * arc]; }
  // After run(): nodes reachable from s through residual capacity above epsilon.
  const std::vector<char>& source_side() const { return reached_; }

 private:
  bool build_levels(int s, int t, double epsilon);
  // Cancels flow along paths until every node but s and t is balanced again.
  void restore_conservation(int s, int t);
  double arc_flow(int half_arc) const { return capacity_[half_arc] - residual_[half_arc]; }
  double push(int v, int t, double limit, double epsilon);
  void finalize_csr();

  int num_nodes_ = 0;
  std::vector<int> from_, to_;           // per half-arc (2 per arc: forward, reverse)
  std::vector<double> capacity_, residual_;
  std::vector<int> first_, order_;       // CSR: half-arcs of node v are order_[first_[v]..first_[v+1])
  std::vector<int> level_, next_;        // BFS levels and DFS cursors
  std::vector<int> queue_;
  std::vector<double> imbalance_;  // inflow - outflow per node
  std::vector<int> path_;
  std::vector<char> reached_;
};

}  // namespace perseus
