// FlowNetwork against brute force: on small random networks its flow value equals the
// minimum over every s-t cut, its source side is such a cut, and a warm start after
// capacity changes ends where a fresh network does, with cuts below the flow restored or
// absorbed.
#include <gtest/gtest.h>

#include <pthread.h>

#include <limits>
#include <random>

#include "perseus/solver/max_flow.hpp"

namespace perseus {
namespace {

struct RandomNetwork {
  int nodes = 0;
  std::vector<std::pair<int, int>> arcs;
  std::vector<double> capacity;
};

// A layered DAG (as the solver's networks are) from s = 0 to t = nodes - 1, with some
// unbounded arcs.
RandomNetwork random_network(std::mt19937& rng, int nodes) {
  RandomNetwork net{nodes, {}, {}};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int u = 0; u < nodes; ++u) {
    for (int v = u + 1; v < nodes; ++v) {
      if (unit(rng) < 0.45) {
        net.arcs.emplace_back(u, v);
        const double draw = unit(rng);
        net.capacity.push_back(draw < 0.15 ? FlowNetwork::kUnbounded : draw < 0.25 ? 0.0 : std::round(draw * 100) / 10);
      }
    }
  }
  return net;
}

double cut_capacity(const RandomNetwork& net, const std::vector<char>& source_side) {
  double total = 0.0;
  for (std::size_t a = 0; a < net.arcs.size(); ++a) {
    if (source_side[net.arcs[a].first] && !source_side[net.arcs[a].second]) total += net.capacity[a];
  }
  return total;
}

// The minimum over all 2^(n-2) cuts that put s on one side and t on the other.
double brute_force_min_cut(const RandomNetwork& net) {
  const int inner = net.nodes - 2;
  double best = std::numeric_limits<double>::infinity();
  for (std::uint32_t mask = 0; mask < (1u << inner); ++mask) {
    std::vector<char> side(net.nodes, 0);
    side[0] = 1;
    for (int i = 0; i < inner; ++i) side[i + 1] = (mask >> i) & 1u;
    best = std::min(best, cut_capacity(net, side));
  }
  return best;
}

FlowNetwork build(const RandomNetwork& net) {
  FlowNetwork flow;
  flow.reset(net.nodes);
  for (std::size_t a = 0; a < net.arcs.size(); ++a) {
    flow.set_capacity(flow.add_arc(net.arcs[a].first, net.arcs[a].second), net.capacity[a]);
  }
  return flow;
}

// Raises some capacities, cuts others below their flow, zeroes a few: in `net` and in `warm`.
void change_capacities(std::mt19937& rng, RandomNetwork& net, FlowNetwork& warm) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t a = 0; a < net.arcs.size(); ++a) {
    const double draw = unit(rng);
    if (draw < 0.2) net.capacity[a] = 0.0;
    else if (draw < 0.5) net.capacity[a] = std::round(unit(rng) * 100) / 10;
    warm.set_capacity(static_cast<int>(a), net.capacity[a]);
  }
}

// Whether `flow` holds a flow of `net`: balanced at every inner node, and within every arc's
// capacity (plus its raise, where cuts were absorbed).
::testing::AssertionResult is_a_flow(const RandomNetwork& net, const FlowNetwork& flow) {
  std::vector<double> balance(net.nodes, 0.0);
  for (std::size_t a = 0; a < net.arcs.size(); ++a) {
    const double f = flow.flow(static_cast<int>(a));
    if (f < -1e-9 || f > net.capacity[a] + flow.raise(static_cast<int>(a)) + 1e-9) {
      return ::testing::AssertionFailure() << "arc " << a << " carries " << f << " of " << net.capacity[a];
    }
    balance[net.arcs[a].first] -= f;
    balance[net.arcs[a].second] += f;
  }
  for (int v = 1; v + 1 < net.nodes; ++v) {
    if (std::abs(balance[v]) > 1e-6) return ::testing::AssertionFailure() << "node " << v << " off by " << balance[v];
  }
  return ::testing::AssertionSuccess();
}

TEST(FlowNetwork, MaxFlowEqualsTheMinimumCutByBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const RandomNetwork net = random_network(rng, 4 + trial % 7);
    FlowNetwork flow = build(net);
    flow.run(0, net.nodes - 1, 1e-9);
    const double value = flow.flow_value();
    const double expected = brute_force_min_cut(net);
    ASSERT_NEAR(value, expected, 1e-6 * std::max(1.0, expected)) << "trial " << trial;
    // The source side is a minimum cut, and t is not on it.
    const std::vector<char> side = flow.source_side();
    ASSERT_TRUE(side[0]);
    ASSERT_FALSE(side[net.nodes - 1]);
    ASSERT_NEAR(cut_capacity(net, side), expected, 1e-6 * std::max(1.0, expected)) << "trial " << trial;
  }
}

// Both ways a run after capacity changes can start: from the previous flow with conservation
// restored (the default), and from the zero flow (what a run does when restoring would cost
// more than a few passes over the network; forced here with a budget of 0 passes). The raised
// capacities also check the lists of open arcs at s and t that the searches start from: a
// raise, or restored flow, that a list missed leaves an augmenting path unfound (each omission
// fails here, tried).
class FlowNetworkRestart : public testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(RestorePasses, FlowNetworkRestart, testing::Values(256, 0));

TEST_P(FlowNetworkRestart, WarmStartsAfterCapacityChangesMatchAFreshNetwork) {
  std::mt19937 rng(11);
  std::int64_t cold_starts = 0;
  for (int trial = 0; trial < 100; ++trial) {
    RandomNetwork net = random_network(rng, 5 + trial % 6);
    FlowNetwork warm = build(net);
    warm.set_restore_passes(GetParam());
    warm.run(0, net.nodes - 1, 1e-9);
    for (int round = 0; round < 5; ++round) {
      change_capacities(rng, net, warm);
      warm.run(0, net.nodes - 1, 1e-9);
      const double warm_value = warm.flow_value();
      FlowNetwork fresh = build(net);
      fresh.run(0, net.nodes - 1, 1e-9);
      const double fresh_value = fresh.flow_value();
      ASSERT_NEAR(warm_value, fresh_value, 1e-6 * std::max(1.0, fresh_value)) << "trial " << trial;
      // The minimal minimum cut is unique: both find the same source side.
      ASSERT_EQ(warm.source_side(), fresh.source_side()) << "trial " << trial << " round " << round;
      ASSERT_TRUE(is_a_flow(net, warm)) << "trial " << trial << " round " << round;
    }
    cold_starts += warm.cold_starts();
  }
  // The small networks never exhaust the default budget; with none, every cut flow restarts.
  if (GetParam() > 0) {
    EXPECT_EQ(cold_starts, 0);
  }
  else EXPECT_GT(cold_starts, 100);
}

// Cuts below the flow absorbed by each node's arcs from s and to t (set_terminal_arcs): the
// raises add the same to every s-t cut, so a warm network ends on the minimum cut a fresh one
// finds for the capacities set, with a flow value larger by the raises, and its flow stays a
// flow (balanced at every inner node, within the raised capacities) with nothing to restore.
TEST(FlowNetwork, AbsorbedCutsKeepTheMinimumCut) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double total_raise = 0.0;
  int trials = 0;
  for (int trial = 0; trial < 100; ++trial) {
    RandomNetwork net = random_network(rng, 5 + trial % 6);
    const int s = 0, t = net.nodes - 1;
    // Every inner node gets an arc from s and one to t, open or closed, as the crawl's have.
    std::vector<std::pair<int, int>> terminal(net.nodes, {-1, -1});
    for (int v = 1; v < t; ++v) {
      for (const bool from_source : {true, false}) {
        net.arcs.emplace_back(from_source ? s : v, from_source ? v : t);
        net.capacity.push_back(unit(rng) < 0.5 ? 0.0 : std::round(unit(rng) * 50) / 10);
        (from_source ? terminal[v].first : terminal[v].second) = static_cast<int>(net.arcs.size()) - 1;
      }
    }
    FlowNetwork warm = build(net);
    for (int v = 1; v < t; ++v) warm.set_terminal_arcs(v, terminal[v].first, terminal[v].second);
    warm.set_restore_passes(0);  // anything left to restore would start over: counted below
    warm.run(s, t, 1e-9);
    // A path of unbounded arcs only: a flow of 1e12, whose cuts, absorbed, leave nodes
    // balanced only to its precision (1e-4). The crawl's flows are that large only at the
    // cut that stops it.
    if (warm.flow_value() > 1e6) continue;
    ++trials;
    for (int round = 0; round < 5; ++round) {
      change_capacities(rng, net, warm);
      warm.run(s, t, 1e-9);
      FlowNetwork fresh = build(net);
      fresh.run(s, t, 1e-9);
      ASSERT_EQ(warm.source_side(), fresh.source_side()) << "trial " << trial << " round " << round;
      double raises = 0.0;
      for (int v = 1; v < t; ++v) {
        // Both arcs of a node rise together.
        ASSERT_EQ(warm.raise(terminal[v].first), warm.raise(terminal[v].second)) << "node " << v;
        raises += warm.raise(terminal[v].first);
      }
      total_raise += raises;
      ASSERT_NEAR(warm.flow_value(), fresh.flow_value() + raises, 1e-6 * std::max(1.0, fresh.flow_value()))
          << "trial " << trial << " round " << round;
      ASSERT_TRUE(is_a_flow(net, warm)) << "trial " << trial << " round " << round;
    }
    EXPECT_EQ(warm.cold_starts(), 0) << "trial " << trial;  // nothing was left to restore
  }
  EXPECT_GT(trials, 80);
  EXPECT_GT(total_raise, 100.0);  // cuts below the flow were absorbed, many of them
}

TEST(FlowNetwork, ClearFlowStartsOver) {
  std::mt19937 rng(3);
  const RandomNetwork net = random_network(rng, 8);
  FlowNetwork flow = build(net);
  flow.run(0, net.nodes - 1, 1e-9);
  const double first = flow.flow_value();
  flow.clear_flow();
  for (int a = 0; a < flow.num_arcs(); ++a) EXPECT_EQ(flow.flow(a), 0.0);
  flow.run(0, net.nodes - 1, 1e-9);
  EXPECT_NEAR(flow.flow_value(), first, 1e-9);
}

// No recursion whose depth grows with the input: a path of 200,000 arcs (a pipeline of many
// microbatches has paths that long) augments on a thread with a 256 KiB stack, which a
// recursive search (about a hundred bytes a level) would overflow.
TEST(FlowNetwork, LongPathsNeedNoDeepStack) {
  struct Work {
    double value = -1.0;
    std::vector<char> side;
  } work;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  const auto body = [](void* arg) -> void* {
    auto* w = static_cast<Work*>(arg);
    constexpr int kNodes = 200'001;
    FlowNetwork flow;
    flow.reset(kNodes);
    std::vector<int> arcs;
    for (int u = 0; u + 1 < kNodes; ++u) arcs.push_back(flow.add_arc(u, u + 1));
    for (std::size_t a = 0; a < arcs.size(); ++a) flow.set_capacity(arcs[a], a == arcs.size() / 2 ? 0.5 : 2.0);
    flow.run(0, kNodes - 1, 1e-9);
    w->value = flow.flow_value();
    w->side = flow.source_side();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &work), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_DOUBLE_EQ(work.value, 0.5);  // the bottleneck in the middle
  ASSERT_EQ(work.side.size(), 200'001u);
  EXPECT_TRUE(work.side[100'000]);    // the cut lies just after the bottleneck's tail
  EXPECT_FALSE(work.side[100'001]);
}

}  // namespace
}  // namespace perseus
