// Minimum-cost circulation in integers, for the LP relaxation's dual (relaxation.hpp).
//
// Two of LEMON's algorithms, both exact:
// - NetworkSimplex (primal network simplex, block-search pivots);
// - CostScaling (Goldberg-Tarjan cost scaling with augmenting paths between epsilon phases):
//   O(n^2 m log(n C)) in the worst case, C the largest cost.
// On the relaxation's networks (a few parallel arcs per operation, the dependencies, one
// return arc), timed deadline by deadline with a probe: on 768 operations cost scaling took
// 20-25 ms a solve against the simplex's 16-57 ms, on 1,536 operations 46-66 ms against
// 87-225 ms; on 384 it was slower (4-12 ms against 0.4-15), and on 192 about the same. So
// kAuto chooses cost scaling from kCostScalingMinNodes nodes (1,538 for 768 operations) to
// kCostScalingMaxNodes: on the planner's 24,576-operation DAG at T_min an earlier trial of
// cost scaling aborted with a corrupted heap (augment) or ran past 300 s (push), where the
// simplex is slow but finishes (docs/solver.md).
//
// The potentials are made canonical after either algorithm: the least ones with the root's
// fixed (each node's potential lowered by its residual distance to the root, on reduced
// costs, by Dijkstra's algorithm: O(m log n)). Where the optimum is degenerate the two
// algorithms' own potentials differ; the relaxation's durations are differences of them, and
// its rounded plans depend on them. These canonical ones are the network simplex's own on
// all 16 published frontiers' solves (the frontiers were the same figure for figure), so the
// choice of algorithm changes the time, not the plans.
//
// Preconditions: no cycle of negative cost and unbounded capacity (else kUnbounded); costs
// and capacities fit in 62 bits. CostScaling rejects an arc of negative cost and unbounded
// capacity even on a bounded problem, so such arcs get a large finite capacity for it
// (kLargeCapacity, or less where there are many of them); a flow reaching it means that
// capacity mattered, and the solve falls back to the network simplex, which needs none.
//
// The header needs nothing of LEMON: min_cost_flow.cpp is compiled on its own as C++17,
// because CostScaling's internal StaticDigraph uses std::allocator members C++20 removed.
#pragma once

#include <limits>
#include <memory>

namespace perseus {

class MinCostCirculation {
 public:
  static constexpr long long kUnbounded = std::numeric_limits<long long>::max();
  // The capacity given to arcs of negative cost and unbounded capacity for cost scaling (see
  // above): five orders above the largest flows the relaxation has shown (2e10, at T_min).
  static constexpr long long kLargeCapacity = 1'000'000'000'000'000LL;
  // kAuto's choice: cost scaling from this many nodes to that many (above).
  static constexpr int kCostScalingMinNodes = 1200;
  static constexpr int kCostScalingMaxNodes = 4000;

  enum class Algorithm { kAuto, kNetworkSimplex, kCostScaling };
  enum class Status { kOptimal, kUnbounded, kInfeasible };

  explicit MinCostCirculation(Algorithm algorithm = Algorithm::kAuto);
  ~MinCostCirculation();
  MinCostCirculation(const MinCostCirculation&) = delete;
  MinCostCirculation& operator=(const MinCostCirculation&) = delete;

  // Nodes and arcs are added before the first solve. Each returns its index.
  int add_node();
  int add_arc(int from, int to, long long cost, long long capacity);  // capacity may be kUnbounded
  void set_cost(int arc, long long cost);

  // The network is built on the first call. `root`: the node whose potential the canonical
  // potentials keep (see above).
  Status solve(int root);
  // After an optimal solve: an optimal circulation, and the least potentials pi with pi(root)
  // as the algorithm left it and reduced costs cost + pi(from) - pi(to) >= 0 on every arc with
  // residual capacity.
  long long flow(int arc) const;
  long long potential(int node) const;
  // Whether the last solve ran cost scaling, and whether it then fell back to the network
  // simplex (a capped arc was saturated).
  bool scaled() const { return scaled_; }
  bool fell_back() const { return fell_back_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  Algorithm algorithm_;
  bool scaled_ = false;
  bool fell_back_ = false;
};

}  // namespace perseus
