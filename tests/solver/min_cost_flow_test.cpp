// MinCostCirculation: on small random networks both algorithms' answers carry their own proof
// of optimality (a feasible circulation and potentials under which no residual arc has a
// negative reduced cost), they cost the same, and their canonical potentials are the least
// such (so the same for both, up to the root's: the optimal duals do not depend on which
// optimal flow was found).
#include "perseus/solver/min_cost_flow.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

namespace perseus {
namespace {

using Algorithm = MinCostCirculation::Algorithm;
using Status = MinCostCirculation::Status;
constexpr long long kUnbounded = MinCostCirculation::kUnbounded;

struct Arc {
  int from, to;
  long long cost, capacity;
};

// Random networks shaped as the relaxation's: forward arcs (from a lower node to a higher
// one) of any cost, some of them of negative cost and unbounded capacity, and backward ones
// that are either bounded or cost more than every negative cost together, so that no cycle of
// unbounded arcs has a negative cost.
std::vector<Arc> random_network(std::mt19937& rng, int nodes) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<long long> cost(-20, 20), capacity(0, 30);
  std::vector<Arc> arcs;
  for (int u = 0; u < nodes; ++u) {
    for (int v = 0; v < nodes; ++v) {
      if (u == v || unit(rng) > 0.35) continue;
      if (u < v) {
        arcs.push_back({u, v, cost(rng), unit(rng) < 0.3 ? kUnbounded : capacity(rng)});
      } else {
        const bool bounded = unit(rng) < 0.5;
        arcs.push_back({u, v, bounded ? cost(rng) : 20 * nodes * nodes + cost(rng), bounded ? capacity(rng) : kUnbounded});
      }
    }
  }
  return arcs;
}

struct Answer {
  Status status = Status::kInfeasible;
  long long cost = 0;
  std::vector<long long> flow, potential;
  bool scaled = false;
};

Answer solve(const std::vector<Arc>& arcs, int nodes, Algorithm algorithm, int root) {
  MinCostCirculation circulation(algorithm);
  for (int v = 0; v < nodes; ++v) EXPECT_EQ(circulation.add_node(), v);
  for (const Arc& a : arcs) circulation.add_arc(a.from, a.to, a.cost, a.capacity);
  Answer answer;
  answer.status = circulation.solve(root);
  answer.scaled = circulation.scaled() && !circulation.fell_back();
  if (answer.status != Status::kOptimal) return answer;
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    answer.flow.push_back(circulation.flow(static_cast<int>(i)));
    answer.cost += arcs[i].cost * answer.flow.back();
  }
  for (int v = 0; v < nodes; ++v) answer.potential.push_back(circulation.potential(v));
  return answer;
}

// The flow is a circulation within the capacities, and no residual arc has a negative
// reduced cost: together, a proof that it is a minimum-cost circulation.
void expect_optimal(const std::vector<Arc>& arcs, int nodes, const Answer& answer) {
  std::vector<long long> balance(static_cast<std::size_t>(nodes), 0);
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    const Arc& a = arcs[i];
    const long long f = answer.flow[i];
    ASSERT_GE(f, 0);
    ASSERT_LE(f, a.capacity);
    balance[static_cast<std::size_t>(a.from)] -= f;
    balance[static_cast<std::size_t>(a.to)] += f;
    const long long reduced = a.cost + answer.potential[static_cast<std::size_t>(a.from)] -
                              answer.potential[static_cast<std::size_t>(a.to)];
    if (f < a.capacity) {
      EXPECT_GE(reduced, 0) << "arc " << i;
    }
    if (f > 0) {
      EXPECT_LE(reduced, 0) << "arc " << i;
    }
  }
  for (const long long b : balance) EXPECT_EQ(b, 0);
}

// The residual distances to the root on reduced costs, by Bellman-Ford: all 0 when the
// potentials are the least optimal ones with the root's fixed.
constexpr long long kUnreached = std::numeric_limits<long long>::max() / 4;

std::vector<long long> distances_to_root(const std::vector<Arc>& arcs, int nodes, const Answer& answer, int root) {
  const long long unreached = kUnreached;
  std::vector<long long> distance(static_cast<std::size_t>(nodes), unreached);
  distance[static_cast<std::size_t>(root)] = 0;
  for (int round = 0; round < nodes; ++round) {
    for (std::size_t i = 0; i < arcs.size(); ++i) {
      const Arc& a = arcs[i];
      const auto u = static_cast<std::size_t>(a.from), v = static_cast<std::size_t>(a.to);
      const long long reduced = a.cost + answer.potential[u] - answer.potential[v];
      if (answer.flow[i] < a.capacity && distance[v] < unreached) distance[u] = std::min(distance[u], distance[v] + reduced);
      if (answer.flow[i] > 0 && distance[u] < unreached) distance[v] = std::min(distance[v], distance[u] - reduced);
    }
  }
  return distance;
}

TEST(MinCostCirculation, BothAlgorithmsProveTheSameOptimumAndTheSameLeastPotentials) {
  std::mt19937 rng(20261128);
  int scaled = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int nodes = 3 + trial % 8;
    const std::vector<Arc> arcs = random_network(rng, nodes);
    const int root = trial % nodes;
    const Answer simplex = solve(arcs, nodes, Algorithm::kNetworkSimplex, root);
    const Answer scaling = solve(arcs, nodes, Algorithm::kCostScaling, root);
    ASSERT_EQ(simplex.status, Status::kOptimal) << "trial " << trial;
    ASSERT_EQ(scaling.status, Status::kOptimal) << "trial " << trial;
    scaled += scaling.scaled;
    expect_optimal(arcs, nodes, simplex);
    expect_optimal(arcs, nodes, scaling);
    EXPECT_EQ(simplex.cost, scaling.cost) << "trial " << trial;
    // Where a node reaches the root (with either flow: the optimal potentials do not depend on
    // it), its potential is the least: its distance to the root on reduced costs is 0.
    const std::vector<long long> simplex_distance = distances_to_root(arcs, nodes, simplex, root);
    const std::vector<long long> scaling_distance = distances_to_root(arcs, nodes, scaling, root);
    for (int v = 0; v < nodes; ++v) {
      const auto i = static_cast<std::size_t>(v), r = static_cast<std::size_t>(root);
      const bool reaches = simplex_distance[i] < kUnreached;
      ASSERT_EQ(reaches, scaling_distance[i] < kUnreached) << "trial " << trial << " node " << v;
      if (!reaches) continue;
      EXPECT_EQ(simplex_distance[i], 0) << "trial " << trial << " node " << v;
      EXPECT_EQ(scaling_distance[i], 0) << "trial " << trial << " node " << v;
      EXPECT_EQ(simplex.potential[i] - simplex.potential[r], scaling.potential[i] - scaling.potential[r])
          << "trial " << trial << " node " << v;
    }
  }
  EXPECT_GT(scaled, 250);  // cost scaling answered, without falling back, nearly every time
}

TEST(MinCostCirculation, ANegativeCycleOfUnboundedArcsIsUnboundedWithEither) {
  const std::vector<Arc> arcs = {{0, 1, -3, kUnbounded}, {1, 2, 1, kUnbounded}, {2, 0, 1, kUnbounded}, {0, 2, 5, 4}};
  for (const Algorithm algorithm : {Algorithm::kNetworkSimplex, Algorithm::kCostScaling, Algorithm::kAuto}) {
    MinCostCirculation circulation(algorithm);
    for (int v = 0; v < 3; ++v) circulation.add_node();
    for (const Arc& a : arcs) circulation.add_arc(a.from, a.to, a.cost, a.capacity);
    EXPECT_EQ(circulation.solve(0), Status::kUnbounded);
    // Cost scaling, given a finite capacity on the negative arc, saturates it and hands over.
    EXPECT_EQ(circulation.fell_back(), algorithm == Algorithm::kCostScaling);
  }
}

TEST(MinCostCirculation, NewCostsBetweenSolvesAreUsed) {
  // A cycle 0 -> 1 -> 0 whose cost the return arc sets: negative (capacity 7 binds), then not.
  for (const Algorithm algorithm : {Algorithm::kNetworkSimplex, Algorithm::kCostScaling}) {
    MinCostCirculation circulation(algorithm);
    circulation.add_node();
    circulation.add_node();
    const int forward = circulation.add_arc(0, 1, -5, 7);
    const int back = circulation.add_arc(1, 0, 2, kUnbounded);
    ASSERT_EQ(circulation.solve(0), Status::kOptimal);
    EXPECT_EQ(circulation.flow(forward), 7);
    circulation.set_cost(back, 6);
    ASSERT_EQ(circulation.solve(0), Status::kOptimal);
    EXPECT_EQ(circulation.flow(forward), 0);
    EXPECT_EQ(circulation.flow(back), 0);
  }
}

// An answer's flows and potentials, read back.
Answer read_answer(const MinCostCirculation& circulation, const std::vector<Arc>& arcs, int nodes, Status status) {
  Answer answer;
  answer.status = status;
  if (status != Status::kOptimal) return answer;
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    answer.flow.push_back(circulation.flow(static_cast<int>(i)));
    answer.cost += arcs[i].cost * answer.flow.back();
  }
  for (int v = 0; v < nodes; ++v) answer.potential.push_back(circulation.potential(v));
  return answer;
}

TEST(MinCostCirculation, FromAnAnchorsTreeItAnswersAsFromScratchWhateverCameBefore) {
  // One extra arc, from the last node back to the first, changes cost between solves, as the
  // relaxation's return arc does; each solve starts from the optimal tree at an anchor, the
  // cost rounded up to a multiple of 16, reached from the anchor at 0 in steps of 16. Its
  // capacity is finite and its cost mostly negative, so it often carries flow below its
  // capacity and is in the tree: the potentials below it move. Every answer is optimal, costs
  // what a fresh solve's does and has its least potentials (up to the root's); and a second
  // circulation, sharing the first's trees, solving the same costs in the reverse order, and a
  // third on its own, in the reverse order too, end at the same flows (the answer does not
  // depend on what was solved before, nor on who found the trees).
  std::mt19937 rng(20261129);
  int resumed = 0;
  const auto chain_to = [](long long cost) {
    const long long anchor = cost >= 0 ? (cost + 15) / 16 * 16 : -(-cost / 16 * 16);
    std::vector<long long> chain;
    for (long long k = 0;; k += anchor >= 0 ? 16 : -16) {
      chain.push_back(k);
      if (k == anchor) break;
    }
    return chain;
  };
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 4 + trial % 7;
    std::vector<Arc> arcs = random_network(rng, nodes);
    arcs.push_back({nodes - 1, 0, -10 * nodes, 25});
    const int moving = static_cast<int>(arcs.size()) - 1;
    std::uniform_int_distribution<long long> pick(-20 * nodes, 10 * nodes);
    std::vector<long long> costs(12);
    for (long long& cost : costs) cost = pick(rng);
    const Algorithm algorithm = trial % 2 == 0 ? Algorithm::kAuto : Algorithm::kNetworkSimplex;
    const auto make = [&] {
      auto circulation = std::make_unique<MinCostCirculation>(algorithm);
      for (int v = 0; v < nodes; ++v) circulation->add_node();
      for (const Arc& a : arcs) circulation->add_arc(a.from, a.to, a.cost, a.capacity);
      return circulation;
    };
    const std::unique_ptr<MinCostCirculation> first = make(), sharing = make(), alone = make();
    sharing->share_anchors(*first);
    std::vector<std::vector<long long>> first_flows(costs.size());
    for (MinCostCirculation* circulation : {first.get(), sharing.get(), alone.get()}) {
      for (std::size_t k = 0; k < costs.size(); ++k) {
        const std::size_t index = circulation == first.get() ? k : costs.size() - 1 - k;
        arcs.back().cost = costs[index];
        circulation->set_cost(moving, costs[index]);
        const int root = static_cast<int>(index) % nodes;
        const Status status = circulation->solve_near(root, moving, chain_to(costs[index]));
        resumed += circulation->resumed();
        const Answer fresh = solve(arcs, nodes, Algorithm::kNetworkSimplex, root);
        ASSERT_EQ(status, fresh.status) << "trial " << trial << " cost " << costs[index];
        const Answer answer = read_answer(*circulation, arcs, nodes, status);
        if (status != Status::kOptimal) continue;
        expect_optimal(arcs, nodes, answer);
        EXPECT_EQ(answer.cost, fresh.cost) << "trial " << trial << " cost " << costs[index];
        const std::vector<long long> distance = distances_to_root(arcs, nodes, answer, root);
        for (int v = 0; v < nodes; ++v) {
          const auto i = static_cast<std::size_t>(v), r = static_cast<std::size_t>(root);
          if (distance[i] >= kUnreached) continue;
          EXPECT_EQ(distance[i], 0) << "trial " << trial << " node " << v;
          EXPECT_EQ(answer.potential[i] - answer.potential[r], fresh.potential[i] - fresh.potential[r])
              << "trial " << trial << " node " << v;
        }
        if (circulation == first.get()) {
          first_flows[index] = answer.flow;
        } else {
          EXPECT_EQ(answer.flow, first_flows[index]) << "trial " << trial << " cost " << costs[index];
        }
      }
    }
  }
  EXPECT_GT(resumed, 2000);  // nearly every solve started from an anchor's tree
}

TEST(MinCostCirculation, FromTheLastTreeItCostsWhatAFreshSolveDoesAndRepeatsItself) {
  // The moving arc as above, its costs in a walk of small steps (a sweep), each solve from the
  // tree the last one left: every answer carries its proof of optimality (its potentials are
  // the simplex's own, not the least ones) and costs what a fresh solve's does; the same walk
  // on a second circulation ends at the same flows and potentials at every step. An unbounded
  // cost leaves no tree, and the next solve starts afresh.
  std::mt19937 rng(20261202);
  int resumed = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 4 + trial % 7;
    std::vector<Arc> arcs = random_network(rng, nodes);
    arcs.push_back({nodes - 1, 0, -10 * nodes, 25});
    const int moving = static_cast<int>(arcs.size()) - 1;
    std::uniform_int_distribution<long long> step(-3 * nodes, 3 * nodes);
    std::vector<long long> costs{-10LL * nodes};
    for (int k = 1; k < 24; ++k) costs.push_back(costs.back() + step(rng));
    const Algorithm algorithm = trial % 2 == 0 ? Algorithm::kAuto : Algorithm::kNetworkSimplex;
    std::vector<std::vector<long long>> flows, potentials;  // the first copy's, in order
    std::size_t compared = 0;
    for (int copy = 0; copy < 2; ++copy) {
      MinCostCirculation circulation(algorithm);
      for (int v = 0; v < nodes; ++v) circulation.add_node();
      for (const Arc& a : arcs) circulation.add_arc(a.from, a.to, a.cost, a.capacity);
      EXPECT_FALSE(circulation.has_last_tree());
      for (std::size_t k = 0; k < costs.size(); ++k) {
        arcs.back().cost = costs[k];
        circulation.set_cost(moving, costs[k]);
        const bool had_tree = circulation.has_last_tree();
        const Status status = circulation.solve_from_last(0);
        EXPECT_EQ(circulation.resumed(), had_tree);
        resumed += circulation.resumed();
        const Answer fresh = solve(arcs, nodes, Algorithm::kNetworkSimplex, 0);
        ASSERT_EQ(status, fresh.status) << "trial " << trial << " cost " << costs[k];
        if (status != Status::kOptimal) {
          EXPECT_FALSE(circulation.has_last_tree());
          continue;
        }
        const Answer answer = read_answer(circulation, arcs, nodes, status);
        expect_optimal(arcs, nodes, answer);
        EXPECT_EQ(answer.cost, fresh.cost) << "trial " << trial << " cost " << costs[k];
        if (copy == 0) {
          flows.push_back(answer.flow);
          potentials.push_back(answer.potential);
        } else {
          EXPECT_EQ(answer.flow, flows[compared]) << "trial " << trial << " step " << k;
          EXPECT_EQ(answer.potential, potentials[compared]) << "trial " << trial << " step " << k;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(resumed, 1000);  // most solves started from the last tree
}

TEST(MinCostCirculation, AnAnchorWithoutAnOptimumFallsBackAndAnUnboundedCostStaysUnbounded) {
  // The cycle 0 -> 1 -> 2 -> 0 of unbounded arcs is negative while arc 0 -> 1 costs below -2.
  for (const Algorithm algorithm : {Algorithm::kNetworkSimplex, Algorithm::kAuto}) {
    MinCostCirculation circulation(algorithm);
    for (int v = 0; v < 3; ++v) circulation.add_node();
    const int first = circulation.add_arc(0, 1, -1, kUnbounded);
    circulation.add_arc(1, 2, 1, kUnbounded);
    circulation.add_arc(2, 0, 1, kUnbounded);
    const int bounded = circulation.add_arc(0, 2, -5, 4);
    // An anchor on the chain with no optimum: solved from scratch, right.
    ASSERT_EQ(circulation.solve_near(0, first, {-1, -3}), Status::kOptimal);
    EXPECT_FALSE(circulation.resumed());
    EXPECT_EQ(circulation.flow(bounded), 4);
    // A cost with no optimum, from a good anchor: unbounded.
    circulation.set_cost(first, -3);
    EXPECT_EQ(circulation.solve_near(0, first, {-1}), Status::kUnbounded);
    circulation.set_cost(first, -2);
    ASSERT_EQ(circulation.solve_near(0, first, {-1}), Status::kOptimal);
    EXPECT_TRUE(circulation.resumed());
    EXPECT_EQ(circulation.flow(bounded), 4);
    // Another arc's cost changed: the anchors' trees are dropped, and the answer is right.
    circulation.set_cost(bounded, 5);
    ASSERT_EQ(circulation.solve_near(0, first, {-1}), Status::kOptimal);
    EXPECT_EQ(circulation.flow(bounded), 0);
  }
}

}  // namespace
}  // namespace perseus
