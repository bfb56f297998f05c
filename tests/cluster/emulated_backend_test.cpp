// The emulated cluster against closed forms: a job runs at its true speed times the lease's pace
// and draws the power of that pace on the lower hull of its operating points; two jobs sharing a
// lease run at their shared speeds until one finishes, the other then alone; a lease that is not
// a renewal loses the restart time; bad leases are named.
#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/emulated_backend.hpp"

namespace perseus::cluster {
namespace {

using testing::cluster_of;
using testing::matrix_of;
using testing::matrix_with_energy;

// A job of `steps` steps, no command (the emulated backend runs none).
BackendJob job_of(int id, int type, int gpus, double steps) {
  BackendJob job;
  job.id = id, job.type = type, job.gpus = gpus, job.steps = steps;
  return job;
}

Lease lease_of(int job, int gpu_type, std::vector<int> gpus, int partner = -1, double pace = 1.0, bool renewed = false) {
  Lease l;
  l.job = job, l.gpu_type = gpu_type, l.gpus = std::move(gpus), l.partner = partner, l.pace = pace, l.renewed = renewed;
  return l;
}

TEST(EmulatedBackend, APairRunsAtItsSharedSpeedsThenTheSurvivorAlone) {
  ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  t.shared[{0, 1, 0}] = {0.5, 0.6};
  EmulatedBackend b(cluster_of(t, {1}, 1));
  b.submit(job_of(0, 0, 1, 100.0));
  b.submit(job_of(1, 1, 1, 300.0));
  b.begin_round({lease_of(0, 0, {0}, 1)});
  const std::vector<JobProgress> p = b.end_round(360.0);
  ASSERT_EQ(p.size(), 2u);
  // Job 0 needs 100 / 0.5 = 200 s together; job 1 does 200 x 0.6 = 120 steps meanwhile, then
  // 160 s alone at 1.0.
  EXPECT_EQ(p[0].status, JobStatus::kFinished);
  EXPECT_DOUBLE_EQ(p[0].steps_done, 100.0);
  EXPECT_DOUBLE_EQ(p[0].ran_s, 200.0);
  EXPECT_DOUBLE_EQ(p[0].shared_s, 200.0);
  EXPECT_EQ(p[1].status, JobStatus::kRunning);
  EXPECT_DOUBLE_EQ(p[1].steps_done, 280.0);
  EXPECT_DOUBLE_EQ(p[1].ran_s, 360.0);
  EXPECT_DOUBLE_EQ(p[1].shared_s, 200.0);
  // The survivor alone, renewed: no restart, 20 steps left.
  b.begin_round({lease_of(1, 0, {0}, -1, 1.0, true)});
  const std::vector<JobProgress> q = b.end_round(360.0);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].status, JobStatus::kFinished);
  EXPECT_DOUBLE_EQ(q[0].ran_s, 20.0);
}

TEST(EmulatedBackend, APacedJobDrawsThePowerOfItsSpeedOnTheLowerHull) {
  // Points (steps/s, J/step): W = 100, 72, 78 and 60 at 1.0, 0.8, 0.6 and 0.5 steps/s; 0.6 lies
  // above the hull (0.5 -> 0.8 passes 64 W there).
  const ThroughputMatrix t = matrix_with_energy({"a100"}, {{{{1.0, 100.0}, {0.8, 90.0}, {0.6, 130.0}, {0.5, 120.0}}}});
  EmulatedCluster c = cluster_of(t, {1}, 1);
  c.restart_s = 10.0;
  EmulatedBackend b(c);
  b.submit(job_of(0, 0, 1, 1e6));
  const struct {
    double pace, watts;
  } cases[] = {{1.0, 100.0}, {0.9, 86.0}, {0.8, 72.0}, {0.7, 68.0}, {0.6, 64.0}, {0.5, 60.0}};
  double done = 0.0;
  bool first = true;
  for (const auto& c : cases) {
    b.begin_round({lease_of(0, 0, {0}, -1, c.pace, !first)});
    const std::vector<JobProgress> p = b.end_round(360.0);
    ASSERT_EQ(p.size(), 1u);
    const double running_s = first ? 350.0 : 360.0;  // the first lease loads its checkpoint
    done += running_s * c.pace;
    EXPECT_NEAR(p[0].steps_done, done, 1e-6) << "pace " << c.pace;
    EXPECT_NEAR(p[0].energy_j, 360.0 * c.watts, 1e-6) << "pace " << c.pace;
    first = false;
  }
}

TEST(EmulatedBackend, ALeaseThatIsNotARenewalPaysTheRestart) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  EmulatedCluster c = cluster_of(t, {2}, 1);
  c.restart_s = 30.0;
  EmulatedBackend b(c);
  b.submit(job_of(0, 0, 1, 1e6));
  b.begin_round({lease_of(0, 0, {0})});
  EXPECT_DOUBLE_EQ(b.end_round(360.0)[0].steps_done, 330.0);
  b.begin_round({lease_of(0, 0, {0}, -1, 1.0, true)});
  EXPECT_DOUBLE_EQ(b.end_round(360.0)[0].steps_done, 690.0);
  b.begin_round({lease_of(0, 0, {1})});  // moved to the other GPU
  EXPECT_DOUBLE_EQ(b.end_round(360.0)[0].steps_done, 1020.0);
}

TEST(EmulatedBackend, ACancelledJobIsNeverLeasedNorReportedAgain) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  EmulatedBackend b(cluster_of(t, {2}, 1));
  b.submit(job_of(0, 0, 1, 1e6));
  b.submit(job_of(1, 1, 1, 1e6));
  b.begin_round({lease_of(0, 0, {0}), lease_of(1, 0, {1})});
  ASSERT_EQ(b.end_round(360.0).size(), 2u);
  b.cancel(0);  // running: stopped for good
  EXPECT_THROW(b.begin_round({lease_of(0, 0, {0})}), InputError);
  b.begin_round({lease_of(1, 0, {1}, -1, 1.0, true)});
  const std::vector<JobProgress> after = b.end_round(360.0);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].id, 1);
  EXPECT_DOUBLE_EQ(after[0].steps_done, 720.0);
  EXPECT_THROW(b.cancel(0), InputError);  // over
  EXPECT_THROW(b.cancel(7), InputError);  // never submitted
  b.cancel(1);
  EXPECT_TRUE(b.end_round(360.0).empty());
}

TEST(EmulatedBackend, BadLeasesAreNamed) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  EmulatedBackend b(cluster_of(t, {2}, 1));
  b.submit(job_of(0, 0, 1, 100.0));
  b.submit(job_of(1, 1, 1, 100.0));
  EXPECT_THROW(b.begin_round({lease_of(5, 0, {0})}), InputError);
  EXPECT_THROW(b.begin_round({lease_of(0, 0, {0}), lease_of(0, 0, {1})}), InputError);
  EXPECT_THROW(b.begin_round({lease_of(0, 0, {0}, -1, 0.0)}), InputError);
  EXPECT_THROW(b.begin_round({lease_of(0, 0, {0}, 1, 0.5)}), InputError);
  EXPECT_THROW(b.submit(job_of(0, 0, 1, 100.0)), InputError);
}

}  // namespace
}  // namespace perseus::cluster
