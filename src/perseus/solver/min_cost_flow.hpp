// Minimum-cost circulation in integers, for the LP relaxation's dual (relaxation.hpp).
//
// Two of LEMON's algorithms, both exact:
// - NetworkSimplex (primal network simplex, block-search pivots), here in a copy that can start
//   again from an optimal spanning tree it kept (warm_network_simplex.h, which says what changed);
// - CostScaling (Goldberg-Tarjan cost scaling with augmenting paths between epsilon phases):
//   O(n^2 m log(n C)) in the worst case, C the largest cost.
// On the relaxation's networks (a few parallel arcs per operation, the dependencies, one
// return arc), timed deadline by deadline with a probe: on 768 operations cost scaling took
// 20-25 ms a solve against the simplex's 16-57 ms from scratch, on 1,536 operations 46-66 ms
// against 87-225 ms; on 384 it was slower (4-12 ms against 0.4-15), and on 192 about the same.
// Between its solves the relaxation moves one cost, the return arc's (the deadline), so an
// optimal spanning tree of the simplex at a nearby deadline, with its flow, is a feasible basis
// to pivot from: solve_near(). Resumed from the last solve's tree, the simplex took 0.01-5 ms
// on 768 operations for deadlines up to 7% away, 24-33 ms on 1,536 for 7-13%, but 152 ms for
// a jump of 50% (more than from scratch). The tree is not the last solve's, though, but an
// anchor's: the optimum at a fixed deadline near the one asked (LpRelaxation rounds it up to a
// geometric grid of 1% steps), found once and kept, by resuming from its neighbour's towards
// the all-slowest critical path's anchor, solved from scratch (shared between the relaxations
// of one frontier). Where the optimum is degenerate the flow the pivots end at depends on the
// tree they start from, and the flows are prices and slopes the frontier uses: from the last
// solve's tree, the plans depended on the order of the solves, and so on the threads. From an
// anchor's, an answer depends on the costs and the chain of anchors only. On the 16 published
// frontiers this took the LP solves from 8.6 s to 4.9 s of CPU, the same gaps (docs/solver.md,
// "The LP resumed from an anchor's tree").
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

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

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
  // The memory solve_near's kept trees may take (each a few arrays of the network's size:
  // 0.2 MB on 1,536 operations, some 3 MB on the planner's 24,576); beyond, it solves from
  // scratch.
  static constexpr std::size_t kMaxAnchorBytes = std::size_t{64} << 20;
  // solve_near on networks of more nodes is solve(): measured up to 3,074 (1,536 operations);
  // on the planner's 49,000, near T_min, a solve from scratch takes minutes, and how resumes
  // fare there is not known.
  static constexpr int kAnchorMaxNodes = 4000;

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
  // The same optimum (the same canonical potentials), found by the simplex from the optimal
  // tree of this network with `arc` costing chain.back() and every other arc as now. That
  // tree is found along the chain, each anchor's tree by resuming from the one before it, the
  // first's from scratch, and every one is kept (within kMaxAnchorBytes) while only `arc`'s cost
  // changes; where one has no optimum, or there is no room, solve() (and on networks of more
  // than kAnchorMaxNodes nodes). A tree, and so the flow
  // where several are optimal, depends on the costs and the chain to its anchor only: give an
  // anchor always the same chain. Fast when `arc`'s cost is near the last anchor's.
  Status solve_near(int root, int arc, const std::vector<long long>& chain);
  // The simplex from the optimal tree the last solve ended with (solve() when it ended with
  // none, or ran cost scaling): the fewest pivots for a cost near the last one. Where the
  // optimum is degenerate, the flow and potentials found depend on the solves made before
  // (the same for the same sequence), and the potentials are the simplex's own, not made
  // canonical: that Dijkstra pass was 38% of a solve in a sweep of 2,000 nearby costs on
  // 1,536 operations, and skipping it left the sweep's plans byte for byte the same on the
  // published frontiers (docs/solver.md, "The sweep from the last tree").
  Status solve_from_last(int root);
  // Whether the last solve ended with an optimal tree of the simplex to resume from.
  bool has_last_tree() const;
  // Uses (and adds to) `other`'s anchors' trees from now on: circulations of the same network,
  // built the same way (thread-safe between them).
  void share_anchors(const MinCostCirculation& other);
  long long flow(int arc) const;
  long long potential(int node) const;
  // Whether the last solve ran cost scaling, and whether it then fell back to the network
  // simplex (a capped arc was saturated).
  bool scaled() const { return scaled_; }
  bool fell_back() const { return fell_back_; }
  // Whether the last solve ran the simplex from an anchor's tree (solve_near).
  bool resumed() const { return resumed_; }

  struct Impl;
  struct AnchorTrees;

 private:
  std::unique_ptr<Impl> impl_;
  Algorithm algorithm_;
  bool scaled_ = false;
  bool fell_back_ = false;
  bool resumed_ = false;
};

}  // namespace perseus
