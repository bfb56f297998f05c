// The round-based mechanism: realises allocations over rounds, never over-commits a GPU type,
// renews leases, places multi-GPU jobs on one server when one holds them.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "perseus/cluster/rounds.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::cluster {
namespace {

// Jobs alone: `share[i]` for job `ids[i]`, which uses `scales[i]` GPUs.
std::vector<Combination> alone(const std::vector<int>& ids, const std::vector<int>& scales,
                               const std::vector<std::vector<double>>& share) {
  std::vector<Combination> out;
  for (std::size_t i = 0; i < ids.size(); ++i) out.push_back({ids[i], -1, scales[i], share[i]});
  return out;
}

// Runs `rounds` full rounds; returns the rounds each job ran on each type.
std::map<std::pair<int, int>, int> run_rounds(RoundScheduler& s, int rounds, const std::vector<int>& scales = {}) {
  std::map<std::pair<int, int>, int> ran;
  for (int r = 0; r < rounds; ++r) {
    const auto leases = s.next_round();
    std::vector<int> used(s.workers().size(), 0);
    std::set<int> jobs;
    std::vector<std::set<int>> gpus(s.workers().size());
    for (const Lease& l : leases) {
      EXPECT_TRUE(jobs.insert(l.job).second) << "job " << l.job << " leased twice in round " << r;
      const int scale = scales.empty() ? 1 : scales[static_cast<std::size_t>(l.job)];
      EXPECT_EQ(static_cast<int>(l.gpus.size()), scale);
      used[l.gpu_type] += scale;
      for (int g : l.gpus) {
        EXPECT_GE(g, 0);
        EXPECT_LT(g, s.workers()[l.gpu_type]);
        EXPECT_TRUE(gpus[l.gpu_type].insert(g).second) << "GPU " << g << " given twice";
      }
      ++ran[{l.job, l.gpu_type}];
    }
    for (std::size_t j = 0; j < used.size(); ++j) EXPECT_LE(used[j], s.workers()[j]);
    s.finish_round(leases, std::vector<double>(leases.size(), 360.0), 360.0);
  }
  return ran;
}

TEST(Rounds, RealisesAnEqualTimeShare) {
  // 4 jobs, 2 GPUs, X = 1/2 each: over 100 rounds each runs exactly 50.
  RoundScheduler s({2}, 4);
  s.set_allocation(alone({0, 1, 2, 3}, {1, 1, 1, 1}, {{0.5}, {0.5}, {0.5}, {0.5}}));
  const auto ran = run_rounds(s, 100);
  for (int m = 0; m < 4; ++m) EXPECT_EQ(ran.at({m, 0}), 50) << m;
  EXPECT_NEAR(s.allocation_gap(), 0.0, 1e-12);
}

TEST(Rounds, RealisesAHeterogeneousAllocation) {
  // Two types; shares with different fractions on each. After 600 rounds each job's received
  // fraction is within a round's worth of X, so the gap is small.
  const std::vector<std::vector<double>> x = {{0.6, 0.4}, {0.4, 0.0}, {0.0, 0.8}, {1.0, 0.0}, {0.0, 0.8}};
  RoundScheduler s({2, 2}, 4);
  s.set_allocation(alone({0, 1, 2, 3, 4}, {1, 1, 1, 1, 1}, x));
  run_rounds(s, 600);
  const auto f = s.received_share();
  for (std::size_t m = 0; m < x.size(); ++m)
    for (std::size_t j = 0; j < 2; ++j) EXPECT_NEAR(f[m][j], x[m][j], 2.0 / 600 + 1e-9) << m << "," << j;
  EXPECT_LT(s.allocation_gap(), 0.01);
}

TEST(Rounds, AJobWithTheWholeGpuKeepsItsLease) {
  RoundScheduler s({4}, 4);
  s.set_allocation(alone({7}, {2}, {{1.0}}));
  auto first = s.next_round();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0].renewed);
  s.finish_round(first, {360.0}, 360.0);
  for (int r = 0; r < 5; ++r) {
    auto next = s.next_round();
    ASSERT_EQ(next.size(), 1u);
    EXPECT_TRUE(next[0].renewed);
    EXPECT_EQ(next[0].gpus, first[0].gpus);
    s.finish_round(next, {360.0}, 360.0);
  }
}

TEST(Rounds, PlacesMultiGpuJobsOnOneServerWhenOneHoldsThem) {
  // 2 servers of 4: jobs of 4, 2 and 2 GPUs fill them without splitting any.
  RoundScheduler s({8}, 4);
  s.set_allocation(alone({0, 1, 2}, {2, 4, 2}, {{1.0}, {1.0}, {1.0}}));
  const auto leases = s.next_round();
  ASSERT_EQ(leases.size(), 3u);
  for (const Lease& l : leases) {
    EXPECT_TRUE(l.consolidated) << l.job;
    const int server = l.gpus.front() / 4;
    for (int g : l.gpus) EXPECT_EQ(g / 4, server) << "job " << l.job;
  }
  // 3 servers of 2 with one GPU taken on each: a 3-GPU job has to spread.
  RoundScheduler spread({6}, 2);
  spread.set_allocation(alone({0, 1, 2, 3}, {1, 1, 1, 3}, {{1.0}, {1.0}, {1.0}, {1.0}}));
  const auto l2 = spread.next_round();
  const auto big = std::find_if(l2.begin(), l2.end(), [](const Lease& l) { return l.job == 3; });
  ASSERT_NE(big, l2.end());
  EXPECT_FALSE(big->consolidated);
}

TEST(Rounds, ReallocatingEveryRoundStarvesNoOne) {
  // A busy cluster recomputes X whenever a job arrives or finishes, often every round. Job 1's
  // share is small; counting its received time from each new allocation would leave it behind
  // job 0 for ever. Kept across allocations, it runs its tenth.
  RoundScheduler s({1}, 1);
  int job1 = 0;
  for (int r = 0; r < 200; ++r) {
    s.set_allocation(alone({0, 1}, {1, 1}, {{0.9}, {0.1}}));
    const auto leases = s.next_round();
    ASSERT_EQ(leases.size(), 1u);
    job1 += leases[0].job == 1 ? 1 : 0;
    s.finish_round(leases, {360.0}, 360.0);
  }
  EXPECT_NEAR(job1, 20, 1);
}

TEST(Rounds, PairsShareGpusAndNoJobRunsTwiceInARound) {
  // One GPU: jobs 0 and 1 together half the time, each alone a quarter. A round runs the pair or
  // one job alone, never the pair beside one of its jobs; over 40 rounds each combination gets its
  // share, and the per-job gap (a job's time alone and in pairs) closes.
  RoundScheduler s({1}, 1);
  s.set_allocation(std::vector<Combination>{{0, -1, 1, {0.25}}, {0, 1, 1, {0.5}}, {1, -1, 1, {0.25}}});
  std::map<std::pair<int, int>, int> ran;
  for (int r = 0; r < 40; ++r) {
    const auto leases = s.next_round();
    ASSERT_EQ(leases.size(), 1u) << "round " << r;
    ++ran[{leases[0].job, leases[0].partner}];
    s.finish_round(leases, {360.0}, 360.0);
  }
  EXPECT_EQ((ran[{0, 1}]), 20);
  EXPECT_EQ((ran[{0, -1}]), 10);
  EXPECT_EQ((ran[{1, -1}]), 10);
  EXPECT_LT(s.allocation_gap(), 1e-9);
  // Two GPUs: the pair and a third job run side by side; the pair's second job is not leased again.
  RoundScheduler two({2}, 2);
  two.set_allocation(std::vector<Combination>{{0, 1, 1, {1.0}}, {1, -1, 1, {0.5}}, {2, -1, 1, {1.0}}});
  const auto leases = two.next_round();
  ASSERT_EQ(leases.size(), 2u);
  std::set<int> jobs;
  for (const Lease& l : leases) {
    EXPECT_TRUE(jobs.insert(l.job).second);
    if (l.partner >= 0) {
      EXPECT_TRUE(jobs.insert(l.partner).second);
    }
  }
  EXPECT_EQ(jobs, (std::set<int>{0, 1, 2}));
  // The pair renews its GPU next round.
  two.finish_round(leases, {360.0, 360.0}, 360.0);
  for (const Lease& l : two.next_round())
    if (l.partner == 1) {
      EXPECT_TRUE(l.renewed);
    }
  // A partner must be the larger id.
  EXPECT_THROW(two.set_allocation(std::vector<Combination>{{1, 0, 1, {1.0}}}), InputError);
}

TEST(Rounds, ZeroShareNeverRunsAndBadInputIsNamed) {
  RoundScheduler s({1, 1}, 1);
  s.set_allocation(alone({0, 1}, {1, 1}, {{1.0, 0.0}, {0.0, 0.0}}));
  const auto ran = run_rounds(s, 10);
  EXPECT_EQ(ran.count({1, 0}) + ran.count({1, 1}), 0u);
  EXPECT_THROW(s.set_allocation(alone({1, 0}, {1, 1}, {{1.0, 0.0}, {0.0, 1.0}})), InputError);  // ids not ascending
  EXPECT_THROW(s.set_allocation(alone({0}, {0}, {{1.0, 0.0}})), InputError);  // scale factor 0
  EXPECT_THROW(s.set_allocation(alone({0}, {1}, {{1.0}})), InputError);  // one type, two in the cluster
  EXPECT_THROW(RoundScheduler({2}, 0), InputError);
  EXPECT_THROW(RoundScheduler({-1}, 4), InputError);
}

TEST(Rounds, AClusterThatShrinksKeepsEachJobsHistoryAndRenewsNothing) {
  // Two jobs on two GPUs: each holds one, renewed every round.
  RoundScheduler s({2}, 1);
  s.set_allocation(alone({0, 1}, {1, 1}, {{1.0}, {1.0}}));
  auto leases = s.next_round();
  s.finish_round(leases, {360.0, 360.0}, 360.0);
  leases = s.next_round();
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_TRUE(leases[0].renewed && leases[1].renewed);
  s.finish_round(leases, {360.0, 0.0}, 360.0);  // job 1 got nothing this round
  // One GPU goes: no lease is a renewal (GPU 0 may not be the GPU 0 it was), and job 1, which
  // received less, goes first.
  s.set_workers({1}, 1);
  s.set_allocation(alone({0, 1}, {1, 1}, {{0.5}, {0.5}}));
  leases = s.next_round();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].job, 1);
  EXPECT_FALSE(leases[0].renewed);
  EXPECT_EQ(leases[0].gpus, std::vector<int>{0});
  EXPECT_THROW(s.set_workers({1, 1}, 1), InputError);
  EXPECT_THROW(s.set_workers({1}, 0), InputError);
  EXPECT_THROW(s.set_workers({-1}, 1), InputError);
}

}  // namespace
}  // namespace perseus::cluster
