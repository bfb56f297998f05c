// Gavel on a live cluster (docs/cluster.md, "Running a cluster"): jobs are submitted while it
// runs; every round the scheduler reallocates when the jobs, the cluster or the measured
// throughputs changed (a policy of policies.hpp on its matrix), turns the allocation into leases
// (rounds.hpp) and has a backend (backend.hpp) run them; then it reads each job's progress back.
// A job that ran through a whole round on the GPUs it already held (a renewed lease: no start-up
// in it) and still runs measures its job type's steps/s on that GPU type, which moves the matrix's figure (an
// exponential average over measurements), so the next allocation uses what was measured.
//
// What the simulator (simulator.hpp) computes in simulated time, this does in rounds a backend
// runs: a real one waits round_s, the emulated one advances its clock. Jobs alone only (no space
// sharing: no backend shares a GPU between jobs).
//
// Cost per round: one policy solve when something changed, plus RoundScheduler's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perseus/cluster/backend.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/rounds.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

struct SchedulerOptions {
  PolicySpec policy;
  double round_s = 360.0;  // Gavel's 6 minutes
  // Weight of a new measurement in the matrix's figure (1: the last measurement alone).
  double measurement_weight = 0.5;
  // A figure that moves by more than this fraction makes the next round reallocate.
  double reallocate_on_change = 0.05;
};

// A job submitted to the scheduler.
struct JobRequest {
  // The fields in order, so that brace lists may stop early (as PolicySpec).
  JobRequest(int type = 0, double steps = 0.0, double weight = 1.0, double slo_s = Job::kNoSlo, int entity = 0,
             std::string command = {})
      : type(type), steps(steps), weight(weight), slo_s(slo_s), entity(entity), command(std::move(command)) {}

  int type = 0;             // row of the matrix
  double steps = 0.0;       // iterations to run, > 0
  double weight = 1.0;
  double slo_s = Job::kNoSlo;  // from its submission
  int entity = 0;           // hierarchical policy
  std::string command;      // what the backend runs
};

// Throws InputError when `request` cannot be submitted to a scheduler of this matrix and policy:
// a type outside the matrix or one with no throughput on any GPU type, steps not > 0, a weight
// not >= 0, an unknown entity. (Measurements never change which figures are > 0, so a request
// checked against the matrix a scheduler started from is checked against the scheduler's.)
void check_job_request(const JobRequest& request, const ThroughputMatrix& matrix, const PolicySpec& policy);

struct ScheduledJob {
  int id = 0;
  JobRequest request;
  JobStatus status = JobStatus::kWaiting;
  double submitted_s = 0.0, finished_s = -1.0;  // the scheduler's clock
  double steps_done = 0.0;
  int rounds = 0, preemptions = 0;              // rounds it held a lease; leases lost while unfinished
  int gpu_type = -1;                            // this round's lease, -1: none
  std::string detail;                           // the backend's (where it ran, why it failed)
};

// A round as it went.
struct RoundLog {
  int index = 0;
  double start_s = 0.0;
  bool reallocated = false;
  ClusterTopology topology;
  std::vector<Lease> leases;
  std::vector<int> finished, failed;  // job ids
};

class ClusterScheduler {
 public:
  // The matrix is the starting point; measurements update the scheduler's copy. InputError for a
  // round <= 0, a measurement weight outside (0, 1] or space sharing; a policy spec allocate()
  // rejects fails at the first round.
  ClusterScheduler(ThroughputMatrix matrix, ClusterBackend& backend, SchedulerOptions options);

  // Queues a job; returns its id (0, 1, ... in submission order). InputError as
  // check_job_request; a job the backend refuses (SolveError) is failed at once, its detail
  // saying why.
  int submit(JobRequest request);

  // Picks up where a previous scheduler stopped, from what its caller saved: its clock, its jobs
  // (ids 0, 1, ... in order) and its measurement counts (the measured figures are the matrix
  // this one was given). Jobs not over are handed to the backend again, waiting, to resume from
  // their steps done; the rounds' history (each job's time received) starts afresh. Only before
  // the first submit and round; InputError for ids out of order, a saved request
  // check_job_request rejects, or counts not the matrix's shape.
  void restore(double now_s, std::vector<ScheduledJob> jobs, std::vector<std::vector<int>> measurements);

  // One round: topology, allocation when needed, leases, run, progress. A job that fits no GPU
  // type up now (a server down) waits without an allocation. InputError or SolveError from the
  // policy.
  const RoundLog& run_round();

  // No job waiting or running.
  bool idle() const { return active_.empty(); }
  double now_s() const { return now_s_; }
  const std::vector<ScheduledJob>& jobs() const { return jobs_; }
  const ThroughputMatrix& matrix() const { return matrix_; }
  // Measurements per [job type][gpu type] folded into the matrix so far.
  const std::vector<std::vector<int>>& measurements() const { return measurements_; }
  const ClusterTopology& topology() const { return topology_; }
  // The allocation in force, one row per active job in id order (empty before the first round).
  const std::vector<int>& allocated_jobs() const { return allocated_jobs_; }
  const std::vector<std::vector<double>>& allocation() const { return share_; }
  const std::vector<RoundLog>& rounds() const { return rounds_; }

 private:
  // Hands a job to the backend; active unless the backend refuses it.
  void hand_over(ScheduledJob& job);
  void reallocate();
  void measure(const ScheduledJob& job, int gpu_type, double steps, double ran_s);

  ThroughputMatrix matrix_;
  ClusterBackend& backend_;
  SchedulerOptions options_;
  ClusterTopology topology_;
  RoundScheduler rounds_scheduler_;
  std::vector<ScheduledJob> jobs_;
  std::vector<int> active_;  // ids waiting or running, ascending
  std::vector<std::vector<int>> measurements_;
  std::vector<int> allocated_jobs_;
  std::vector<std::vector<double>> share_;
  std::vector<RoundLog> rounds_;
  double now_s_ = 0.0;
  bool changed_ = true;
};

}  // namespace perseus::cluster
