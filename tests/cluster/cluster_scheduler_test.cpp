// The live scheduler on the emulated backend: pairs share a GPU where that beats taking turns,
// the energy stage paces jobs (and measuring does not mistake the pace for the job's speed), it
// learns throughputs it was told wrong, survives a server going down (jobs back to their
// checkpoints, no lease on the lost GPUs), preempted jobs resume where they stopped, and bad input
// is named (space sharing and the energy stage on a backend that cannot do them).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/cluster_scheduler.hpp"
#include "perseus/cluster/emulated_backend.hpp"
#include "perseus/cluster/simulator.hpp"

namespace perseus::cluster {
namespace {

using testing::cluster_of;
using testing::matrix_of;

// Gavel's three types, one row per job type, a 2-GPU type among them.
ThroughputMatrix three_types() {
  return matrix_of({"k80", "p100", "v100"}, {{0.2, 0.5, 1.0}, {0.4, 0.6, 0.8}, {0.1, 0.3, 0.9}, {0.3, 0.7, 1.2}}, {1, 1, 1, 2});
}

// Runs until every job finished or failed (at most `max_rounds`).
void run_to_the_end(ClusterScheduler& s, int max_rounds = 10000) {
  for (int r = 0; r < max_rounds && !s.idle(); ++r) s.run_round();
  ASSERT_TRUE(s.idle()) << "jobs still running after " << max_rounds << " rounds";
}

TEST(ClusterScheduler, PairsShareAGpuWhereThatBeatsTakingTurns) {
  // Two jobs alone at 1 step/s on one V100, together at 0.7 each: sharing does 1.4 steps/s.
  ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  t.shared[{0, 1, 0}] = {0.7, 0.7};
  EmulatedBackend backend(cluster_of(t, {1}, 1));
  PolicySpec sharing(PolicyKind::kMaxMinFairness);
  sharing.space_sharing = true;
  ClusterScheduler s(t, backend, {sharing, 360.0});
  s.submit({0, 3600.0});
  s.submit({1, 3600.0});
  const RoundLog& first = s.run_round();
  ASSERT_EQ(first.leases.size(), 1u);
  EXPECT_EQ(first.leases[0].partner, 1);
  ASSERT_EQ(s.allocated_pairs().size(), 1u);
  EXPECT_EQ(s.allocated_pairs()[0].first, 0);
  EXPECT_EQ(s.allocated_pairs()[0].second, 1);
  EXPECT_NEAR(s.allocated_pairs()[0].share[0], 1.0, 1e-6);
  EXPECT_EQ(s.jobs()[1].partner, 0);
  run_to_the_end(s);
  // Together all the way: both finish at 3600 / 0.7 s (taking turns: 6840 and 7200 s), each
  // holding half the GPU meanwhile; the shared GPU's speeds are not its figures (not measured).
  for (const ScheduledJob& j : s.jobs()) {
    EXPECT_NEAR(j.finished_s, 3600.0 / 0.7, 1e-6) << "job " << j.id;
    EXPECT_NEAR(j.gpu_s[0], 3600.0 / 0.7 / 2.0, 1e-6) << "job " << j.id;
    EXPECT_EQ(j.preemptions, 0);
  }
  EXPECT_EQ(s.measurements()[0][0], 0);
  EXPECT_NEAR(s.usage().busy_gpu_s[0], 3600.0 / 0.7, 1e-6);
}

TEST(ClusterScheduler, TheEnergyStagePacesJobsAndMeasuresThemAtFullSpeed) {
  // One job, one A100; W = 100 at 1 step/s, 72 at 0.8 (the hull's points). Keeping 80% of its
  // throughput, the job runs at 0.8 steps/s and draws 72 W.
  const ThroughputMatrix t = testing::matrix_with_energy({"a100"}, {{{{1.0, 100.0}, {0.8, 90.0}, {0.5, 120.0}}}});
  EmulatedBackend backend(cluster_of(t, {1}, 1));
  ClusterScheduler s(t, backend, {PolicySpec(PolicyKind::kMaxMinFairness, true, {}, 0.2), 360.0});
  s.submit({0, 1e6});
  for (int r = 0; r < 4; ++r) {
    const RoundLog& log = s.run_round();
    ASSERT_EQ(log.leases.size(), 1u);
    EXPECT_NEAR(log.leases[0].pace, 0.8, 1e-5);
    EXPECT_NEAR(log.energy_j, 72.0 * 360.0, 1e-2);
  }
  EXPECT_NEAR(s.jobs()[0].steps_done, 4 * 360.0 * 0.8, 1e-2);
  EXPECT_NEAR(s.jobs()[0].energy_j, 4 * 72.0 * 360.0, 1e-1);
  // Measured at 0.8 steps/s on a lease paced at 0.8: the figure stays 1 (no drift, no reallocation).
  EXPECT_GT(s.measurements()[0][0], 0);
  EXPECT_NEAR(s.matrix().at(0, 0), 1.0, 1e-9);
  EXPECT_EQ(s.usage().allocations, 1);
}

TEST(ClusterScheduler, MeasuredThroughputsReplaceWhatItWasTold) {
  // Told the K80 is as fast as the V100 for job type 0; it is 4x slower. Once measured, the
  // matrix holds the truth and the aware policy moves the job's time to the V100.
  const ThroughputMatrix truth = matrix_of({"k80", "v100"}, {{0.25, 1.0}});
  ThroughputMatrix told = truth;
  told.steps_per_s[0][0] = 1.0;
  EmulatedBackend backend(cluster_of(truth, {1, 1}, 1));
  SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 100.0};
  options.measurement_weight = 1.0;
  ClusterScheduler s(told, backend, options);
  for (int i = 0; i < 3; ++i) s.submit({0, 1e6});
  int reallocations = 0;
  for (int r = 0; r < 6; ++r) reallocations += s.run_round().reallocated ? 1 : 0;
  EXPECT_NEAR(s.matrix().at(0, 0), 0.25, 1e-12);
  EXPECT_NEAR(s.matrix().at(0, 1), 1.0, 1e-12);
  EXPECT_GT(s.measurements()[0][0], 0);
  // Reallocated at the start, and again once the K80's figure moved.
  EXPECT_GE(reallocations, 2);
  // LAS with the truth known: the three identical jobs get equal true throughputs, a third of the
  // cluster's 1.25 steps/s each (under the wrong figure they would not).
  ASSERT_EQ(s.allocation().size(), 3u);
  for (const auto& row : s.allocation()) EXPECT_NEAR(effective_throughput(truth, 0, row), 1.25 / 3.0, 1e-6);
}

// One GPU whose jobs take `startup_s` to start on a lease that is not a renewal (as Slurm's
// launch and a Python job's imports do) and then run at `speed` steps/s. Unlike EmulatedBackend's
// restart, a start-up longer than a round spills into the next, renewed round, whose report
// (as a real backend's) counts the whole round as run.
class SlowStartBackend : public ClusterBackend {
 public:
  SlowStartBackend(double startup_s, double speed) : startup_s_(startup_s), speed_(speed) {}
  ClusterTopology topology() override { return {{1}, 1}; }
  void submit(const BackendJob& job) override { jobs_.push_back({job.id}); }
  void begin_round(const std::vector<Lease>& leases) override {
    for (Running& j : jobs_) {
      const auto l = std::find_if(leases.begin(), leases.end(), [&](const Lease& l) { return l.job == j.id; });
      if (l == leases.end()) {
        j.running = false;
      } else if (!l->renewed || !j.running) {
        j.running = true;
        j.startup_left_s = startup_s_;
      }
    }
  }
  std::vector<JobProgress> end_round(double round_s) override {
    std::vector<JobProgress> progress;
    for (Running& j : jobs_) {
      JobProgress& p = progress.emplace_back();
      p.id = j.id;
      if (j.running) {
        const double starting = std::min(round_s, j.startup_left_s);
        j.startup_left_s -= starting;
        j.steps += speed_ * (round_s - starting);
        p.status = JobStatus::kRunning;
        p.ran_s = round_s;
      }
      p.steps_done = j.steps;
    }
    return progress;
  }
  void preempt_all() override {
    for (Running& j : jobs_) j.running = false;
  }
  void cancel(int id) override {
    std::erase_if(jobs_, [&](const Running& j) { return j.id == id; });
  }

 private:
  struct Running {
    int id = 0;
    double steps = 0.0, startup_left_s = 0.0;
    bool running = false;
  };
  double startup_s_, speed_;
  std::vector<Running> jobs_;
};

TEST(ClusterScheduler, AStartThatOutlastsARoundIsNotMeasuredAsSlowness) {
  // Told 1 step/s, and it is: a start of 1.5 rounds leaves the first renewed round half run
  // (5 steps in a round of 10 s). Timing it would halve the figure; the job is timed only from
  // the round after its first steps.
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  SlowStartBackend backend(15.0, 1.0);
  SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 10.0};
  options.measurement_weight = 1.0;
  ClusterScheduler s(t, backend, options);
  s.submit({0, 1e6});
  for (int r = 0; r < 5; ++r) {
    const RoundLog& log = s.run_round();
    ASSERT_EQ(log.leases.size(), 1u);
    EXPECT_EQ(log.leases[0].renewed, r > 0) << "round " << r;
    // Not timed in the start's round nor in the round it spilled into; timed from the third.
    EXPECT_EQ(s.measurements()[0][0], std::max(0, r - 1)) << "round " << r;
    EXPECT_NEAR(s.matrix().at(0, 0), 1.0, 1e-12) << "round " << r;
  }
  EXPECT_NEAR(s.jobs()[0].steps_done, 35.0, 1e-9);  // 0, 5, 10, 10, 10
}

TEST(ClusterScheduler, AServerDownShrinksTheClusterAndItsJobsResumeFromTheirCheckpoints) {
  const ThroughputMatrix t = three_types();
  EmulatedCluster cluster = cluster_of(t, {2, 2, 4}, 2);
  cluster.checkpoint_s = 100.0;
  EmulatedBackend backend(cluster);
  ClusterScheduler s(t, backend, {PolicySpec(PolicyKind::kMaxMinFairness), 360.0});
  for (int i = 0; i < 8; ++i) s.submit({i % 3, 2000.0});
  s.run_round();
  s.run_round();
  // V100 server 1 (GPUs 2 and 3) goes down; who was there?
  std::vector<int> on_lost;
  for (const Lease& l : s.last_round().leases)
    if (l.gpu_type == 2 && std::any_of(l.gpus.begin(), l.gpus.end(), [](int g) { return g >= 2; })) on_lost.push_back(l.job);
  ASSERT_FALSE(on_lost.empty());
  std::vector<double> before;
  for (int id : on_lost) before.push_back(s.jobs()[id].steps_done);
  backend.set_server_up(2, 1, false);
  const RoundLog& after = s.run_round();
  EXPECT_TRUE(after.reallocated);
  EXPECT_EQ(after.topology.workers, (std::vector<int>{2, 2, 2}));
  for (const Lease& l : after.leases) {
    EXPECT_FALSE(l.renewed && l.gpu_type == 2 && std::find(on_lost.begin(), on_lost.end(), l.job) != on_lost.end());
    for (int g : l.gpus) EXPECT_LT(g, after.topology.workers[l.gpu_type]);
  }
  // Each lost job fell back to its last checkpoint (taken every 100 s of running) and went on.
  for (std::size_t k = 0; k < on_lost.size(); ++k) {
    const ScheduledJob& j = s.jobs()[on_lost[k]];
    const bool leased = std::any_of(after.leases.begin(), after.leases.end(), [&](const Lease& l) { return l.job == j.id; });
    if (!leased) {
      EXPECT_LT(j.steps_done, before[k]) << "job " << j.id;
    }
  }
  backend.set_server_up(2, 1, true);
  run_to_the_end(s);
  for (const ScheduledJob& j : s.jobs()) EXPECT_EQ(j.status, JobStatus::kFinished);
  EXPECT_EQ(s.topology().workers, (std::vector<int>{2, 2, 4}));
}

TEST(ClusterScheduler, PreemptedJobsResumeWhereTheyStopped) {
  const ThroughputMatrix t = three_types();
  EmulatedBackend backend(cluster_of(t, {1, 1, 1}, 1));
  ClusterScheduler s(t, backend, {PolicySpec(PolicyKind::kMaxMinFairness), 360.0});
  for (int i = 0; i < 6; ++i) s.submit({i % 3, 900.0});
  std::vector<double> last(6, 0.0);
  int preempted = 0;
  while (!s.idle()) {
    s.run_round();
    for (const ScheduledJob& j : s.jobs()) {
      EXPECT_GE(j.steps_done, last[j.id]) << "job " << j.id << " lost progress without a failure";
      last[j.id] = j.steps_done;
      preempted += j.preemptions;
    }
  }
  EXPECT_GT(preempted, 0);  // six jobs on three GPUs take turns
}

TEST(ClusterScheduler, ACancelledJobStopsAndTheOthersHaveItsGpus) {
  // Two jobs of 3600 steps at 1 step/s take turns on one V100 (each would finish near 7200 s);
  // the one that ran the first round is cancelled after it: the other then runs alone, every
  // round, and finishes at 360 + 3600 s.
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  EmulatedBackend backend(cluster_of(t, {1}, 1));
  ClusterScheduler s(t, backend, {PolicySpec(PolicyKind::kMaxMinFairness), 360.0});
  s.submit({0, 3600.0});
  s.submit({1, 3600.0});
  const int never_ran = s.submit({0, 100.0});
  EXPECT_TRUE(s.cancel(never_ran));  // waiting, never leased
  EXPECT_EQ(s.active_jobs(), 2);
  const RoundLog& first = s.run_round();
  ASSERT_EQ(first.leases.size(), 1u);
  EXPECT_NE(first.leases[0].job, never_ran);
  const int ran = first.leases[0].job, other = 1 - ran;
  EXPECT_DOUBLE_EQ(s.jobs()[ran].steps_done, 360.0);

  EXPECT_TRUE(s.cancel(ran));
  EXPECT_FALSE(s.cancel(ran));  // over already: nothing changes
  const ScheduledJob& cancelled = s.jobs()[ran];
  EXPECT_EQ(cancelled.status, JobStatus::kCancelled);
  EXPECT_DOUBLE_EQ(cancelled.finished_s, 360.0);
  EXPECT_EQ(s.active_jobs(), 1);
  while (!s.idle()) {
    const RoundLog& round = s.run_round();
    ASSERT_EQ(round.leases.size(), 1u);
    EXPECT_EQ(round.leases[0].job, other);
  }
  EXPECT_EQ(s.jobs()[other].status, JobStatus::kFinished);
  EXPECT_NEAR(s.jobs()[other].finished_s, 360.0 + 3600.0, 1e-6);
  // The cancelled job kept what it had done and held, and nothing more.
  EXPECT_DOUBLE_EQ(cancelled.steps_done, 360.0);
  EXPECT_DOUBLE_EQ(cancelled.gpu_s[0], 360.0);
  EXPECT_EQ(cancelled.finish_time_fairness(), 0.0);
  const ScheduledJob& dropped = s.jobs()[never_ran];
  EXPECT_EQ(dropped.status, JobStatus::kCancelled);
  EXPECT_EQ(dropped.rounds, 0);
  EXPECT_LT(dropped.started_s, 0.0);
  EXPECT_THROW(s.cancel(3), InputError);
  EXPECT_THROW(s.cancel(-1), InputError);
}

TEST(ClusterScheduler, ARestoredSchedulerFinishesWhereTheFirstWould) {
  // Two schedulers in a row (the first stops after 4 rounds, the second restores its jobs, clock
  // and measurement counts) finish every job with all its steps; a job the first finished is not
  // handed to the backend again, and the jobs' steps add up to a continuous run's.
  const ThroughputMatrix t = three_types();
  const std::vector<int> workers{2, 2, 4};
  std::vector<JobRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back({i % 4, 100.0 + 400.0 * i});
  requests[0].steps = 50.0;  // over in the first round

  EmulatedBackend first_backend(cluster_of(t, workers, 2));
  ClusterScheduler first(t, first_backend, {PolicySpec(PolicyKind::kMaxMinFairness), 360.0});
  for (const JobRequest& r : requests) first.submit(r);
  for (int r = 0; r < 4; ++r) first.run_round();
  ASSERT_EQ(first.jobs()[0].status, JobStatus::kFinished);
  ASSERT_FALSE(first.idle());

  EmulatedBackend second_backend(cluster_of(t, workers, 2));
  ClusterScheduler second(first.matrix(), second_backend, {PolicySpec(PolicyKind::kMaxMinFairness), 360.0});
  second.restore(first.now_s(), first.jobs(), first.measurements());
  EXPECT_EQ(second.now_s(), first.now_s());
  EXPECT_EQ(second.jobs()[0].status, JobStatus::kFinished);
  EXPECT_EQ(second.jobs()[0].finished_s, first.jobs()[0].finished_s);
  const RoundLog& round = second.run_round();
  for (const Lease& l : round.leases) EXPECT_NE(l.job, 0);
  for (std::size_t i = 1; i < requests.size(); ++i)
    if (first.jobs()[i].steps_done > 0.0 && second.jobs()[i].status == JobStatus::kRunning) {
      EXPECT_GE(second.jobs()[i].steps_done, first.jobs()[i].steps_done) << "job " << i << " lost its progress";
    }
  run_to_the_end(second);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(second.jobs()[i].status, JobStatus::kFinished) << i;
    EXPECT_DOUBLE_EQ(second.jobs()[i].steps_done, requests[i].steps) << i;
    EXPECT_GT(second.jobs()[i].finished_s, second.jobs()[i].submitted_s) << i;
  }

  // Restoring is for a fresh scheduler, with ids in order.
  EXPECT_THROW(second.restore(0.0, {}, first.measurements()), InputError);
  EmulatedBackend third_backend(cluster_of(t, workers, 2));
  ClusterScheduler third(t, third_backend, {});
  std::vector<ScheduledJob> shuffled = first.jobs();
  std::swap(shuffled[1], shuffled[2]);
  EXPECT_THROW(third.restore(0.0, shuffled, first.measurements()), InputError);
  EXPECT_THROW(third.restore(0.0, first.jobs(), {}), InputError);
}

// A backend that refuses every job whose command is "refuse" (as Slurm refuses a bad partition).
class RefusingBackend : public EmulatedBackend {
 public:
  using EmulatedBackend::EmulatedBackend;
  void submit(const BackendJob& job) override {
    if (job.command == "refuse") throw SolveError("no such partition");
    EmulatedBackend::submit(job);
  }
};

TEST(ClusterScheduler, AJobTheBackendRefusesFailsAndTheOthersRun) {
  const ThroughputMatrix t = matrix_of({"k80", "v100"}, {{0.5, 1.0}});
  RefusingBackend backend(cluster_of(t, {1, 1}, 1));
  ClusterScheduler s(t, backend, {PolicySpec(PolicyKind::kFifo), 100.0});
  EXPECT_EQ(s.submit({0, 10.0, 1.0, Job::kNoSlo, 0, "refuse"}), 0);
  EXPECT_EQ(s.submit({0, 10.0}), 1);
  EXPECT_EQ(s.jobs()[0].status, JobStatus::kFailed);
  EXPECT_NE(s.jobs()[0].detail.find("no such partition"), std::string::npos);
  run_to_the_end(s);
  EXPECT_EQ(s.jobs()[1].status, JobStatus::kFinished);
}

// A cluster that runs one job per GPU at full speed (as Slurm does).
class ExclusiveBackend : public EmulatedBackend {
 public:
  using EmulatedBackend::EmulatedBackend;
  bool shares_gpus() const override { return false; }
  bool paces_jobs() const override { return false; }
};

TEST(ClusterScheduler, BadInputIsNamed) {
  const ThroughputMatrix t = matrix_of({"k80", "v100"}, {{0.25, 1.0}, {0.0, 0.0}});
  EmulatedBackend backend(cluster_of(t, {1, 1}, 1));
  ClusterScheduler s(t, backend, {});
  const auto message = [&](JobRequest r) {
    try {
      s.submit(r);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({5, 10.0}).find("job type 5"), std::string::npos);
  EXPECT_NE(message({1, 10.0}).find("no throughput on any GPU type"), std::string::npos);
  EXPECT_NE(message({0, 0.0}).find("steps"), std::string::npos);
  EXPECT_NE(message({0, 10.0, -1.0}).find("weight -1"), std::string::npos);
  EXPECT_NE(message({0, 10.0, 1.0, Job::kNoSlo, 3}).find("entity 3"), std::string::npos);
  EXPECT_THROW(ClusterScheduler(t, backend, {PolicySpec(PolicyKind::kMaxMinFairness), 0.0}), InputError);
  PolicySpec sharing;
  sharing.space_sharing = true;
  ExclusiveBackend exclusive(cluster_of(t, {1, 1}, 1));
  EXPECT_THROW(ClusterScheduler(t, exclusive, {sharing}), InputError);
  EXPECT_THROW(ClusterScheduler(t, exclusive, {PolicySpec(PolicyKind::kMaxMinFairness, true, {}, 0.1)}), InputError);
  EXPECT_THROW(s.submit({0, 10.0}, 5.0), InputError);  // after the clock
  EXPECT_THROW(s.submit({0, 10.0}, -1.0), InputError);
  s.idle_until(100.0);
  EXPECT_DOUBLE_EQ(s.now_s(), 100.0);
  EXPECT_THROW(s.idle_until(50.0), InputError);
  EXPECT_THROW(backend.set_server_up(0, 3, false), InputError);
  EXPECT_TRUE(s.jobs().empty());
  s.submit({0, 10.0}, 40.0);
  EXPECT_DOUBLE_EQ(s.jobs()[0].submitted_s, 40.0);
  EXPECT_THROW(s.idle_until(200.0), InputError);  // a job is active
}

}  // namespace
}  // namespace perseus::cluster
