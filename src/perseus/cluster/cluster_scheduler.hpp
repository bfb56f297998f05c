// Gavel on a live cluster (docs/cluster.md, "Running a cluster"): jobs are submitted while it
// runs; every round the scheduler reallocates when the jobs, the cluster or the measured
// throughputs changed (a policy of policies.hpp on its matrix), turns the allocation into leases
// (rounds.hpp) and has a backend (backend.hpp) run them; then it reads each job's progress back.
// A job that ran through a whole round on the GPUs it already held (a renewed lease), had stepped
// in the round before it (its start-up over) and still runs measures its job type's steps/s on
// that GPU type, which moves the matrix's figure (an
// exponential average over measurements), so the next allocation uses what was measured.
//
// The simulator (simulator.hpp) is this scheduler on the emulated backend, its jobs submitted as
// they arrive; a real backend waits round_s, the emulated one advances its clock. Space sharing
// (pairs of jobs on one lease) needs a backend that shares GPUs, the energy stage (a lease's pace
// below 1) one that paces jobs: the emulated one does both, Slurm neither.
//
// Cost per round: one policy solve when something changed, plus RoundScheduler's, plus O(active jobs).
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

// InputError when the policy needs what a backend cannot do: space sharing on one that does not
// share GPUs, the energy stage on one that does not pace jobs (ClusterBackend's capabilities).
void check_backend_supports(const PolicySpec& policy, bool shares_gpus, bool paces_jobs);

struct ScheduledJob {
  int id = 0;
  JobRequest request;
  JobStatus status = JobStatus::kWaiting;
  // The scheduler's clock; -1: not yet. finished_s is when it ended (finished, failed or cancelled).
  double submitted_s = 0.0, started_s = -1.0, finished_s = -1.0;
  double steps_done = 0.0;
  // Rounds it held a lease; leases lost while unfinished; leases on other GPUs than the round
  // before's after it had run (a restart elsewhere).
  int rounds = 0, preemptions = 0, migrations = 0;
  int gpu_type = -1;                            // this round's lease, -1: none
  int partner = -1;                             // the job sharing it, -1: none
  // It had stepped during the last round, on the lease it held then: a renewal of that lease
  // is timed only then. A job's start (Slurm's launch, loading its checkpoint, warming up) may
  // outlast a round, and the renewed round it spills into would read slow.
  bool stepping = false;
  std::vector<double> gpu_s;                    // [gpu type] GPU-seconds held (scale factor x time, half while shared)
  double energy_j = 0.0;                        // as the backend measured it (0 where it does not)
  // The time its steps done would have taken on 1/n of the cluster (n the jobs allocated as each
  // was done): Themis's isolated time, counted as Gavel's finish-time-fairness policy counts it.
  double isolated_s = 0.0;
  std::string detail;                           // the backend's (where it ran, why it failed)
  // Its user asked to cancel it; the server applies that at the next round's start (shown and
  // kept meanwhile, so that a restart still applies it).
  bool cancel_requested = false;
  // JCT over isolated time (finished jobs; 0 before): below 1, it fared better than on 1/n of the cluster.
  double finish_time_fairness() const {
    return status == JobStatus::kFinished && isolated_s > 0.0 ? (finished_s - submitted_s) / isolated_s : 0.0;
  }
};

// A round as it went.
struct RoundLog {
  int index = 0;
  double start_s = 0.0;
  int active_jobs = 0;                // waiting or running as it began
  bool reallocated = false;
  ClusterTopology topology;
  std::vector<Lease> leases;
  std::vector<int> busy_gpus;         // [gpu type] leased
  double energy_j = 0.0;              // the jobs' GPUs', as the backend measured it
  std::vector<int> finished, failed;  // job ids
};

// What the cluster did since the scheduler started.
struct ClusterUsage {
  std::vector<double> busy_gpu_s;  // [gpu type] GPU-seconds held by jobs
  int allocations = 0;             // policy solves
  double policy_s = 0.0;           // wall-clock time in them
  int leases = 0, renewals = 0;
};

class ClusterScheduler {
 public:
  // The matrix is the starting point; measurements update the scheduler's copy. InputError for a
  // round <= 0, a measurement weight outside (0, 1], space sharing on a backend that does not
  // share GPUs or the energy stage on one that does not pace jobs; a policy spec allocate()
  // rejects fails at the first round.
  ClusterScheduler(ThroughputMatrix matrix, ClusterBackend& backend, SchedulerOptions options);

  // Queues a job; returns its id (0, 1, ... in submission order). InputError as
  // check_job_request; a job the backend refuses (SolveError) is failed at once, its detail
  // saying why.
  int submit(JobRequest request) { return submit(std::move(request), now_s_); }
  // The same, for a job that arrived at `submitted_s` (since the last round began: its JCT and
  // finish-time fairness count from then). InputError for a time after now or before 0.
  int submit(JobRequest request, double submitted_s);
  // With no job active, moves the clock on to `t_s` (an emulated cluster idle until the next
  // arrival). InputError with jobs active or for a time before now.
  void idle_until(double t_s);

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

  // Cancels a job not over, between rounds: the backend stops it for good (ClusterBackend::cancel),
  // it is kCancelled, ended at the scheduler's clock, and the next round reallocates without it.
  // Returns false (and changes nothing) for a job already over; InputError for an unknown id.
  bool cancel(int id);

  // No job waiting or running.
  bool idle() const { return active_.empty(); }
  int active_jobs() const { return static_cast<int>(active_.size()); }
  double now_s() const { return now_s_; }
  const std::vector<ScheduledJob>& jobs() const { return jobs_; }
  const ThroughputMatrix& matrix() const { return matrix_; }
  // Measurements per [job type][gpu type] folded into the matrix so far.
  const std::vector<std::vector<int>>& measurements() const { return measurements_; }
  const ClusterTopology& topology() const { return topology_; }
  // The allocation in force, one row per active job in id order (empty before the first round).
  const std::vector<int>& allocated_jobs() const { return allocated_jobs_; }
  const std::vector<std::vector<double>>& allocation() const { return share_; }
  // Space sharing: the pairs of the allocation in force, by job id (first < second).
  const std::vector<SharedShare>& allocated_pairs() const { return pairs_; }
  // Rounds run since this scheduler started, and the last (index rounds_run() - 1).
  int rounds_run() const { return static_cast<int>(rounds_run_); }
  const RoundLog& last_round() const { return last_round_; }
  const ClusterUsage& usage() const { return usage_; }
  // RoundScheduler's gap between the allocations and what the rounds realised, averaged over
  // allocations weighted by how long each was in force (0 before the first round).
  double allocation_gap() const;

 private:
  // Hands a job to the backend; active unless the backend refuses it.
  void hand_over(ScheduledJob& job);
  void reallocate();
  void measure(const ScheduledJob& job, int gpu_type, double steps, double ran_s, double pace);
  // Books a job's round: its progress on lease `lease` (nullptr: it held none).
  void account(ScheduledJob& job, const JobProgress& progress, const Lease* lease, RoundLog& log);

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
  std::vector<SharedShare> pairs_;
  // By job id (empty for jobs outside the allocation): the pace of each GPU type (the
  // allocation's speed over the matrix's), and steps/s on 1/n of the cluster.
  std::vector<std::vector<double>> pace_;
  std::vector<double> isolated_speed_;
  std::vector<int> lease_of_;  // by job id: its lease this round, -1 (kept between rounds: O(leases) a round)
  RoundLog last_round_;
  std::size_t rounds_run_ = 0;
  ClusterUsage usage_;
  double gap_weighted_ = 0.0, gap_time_ = 0.0, allocation_start_s_ = 0.0;
  double now_s_ = 0.0;
  bool changed_ = true;
};

}  // namespace perseus::cluster
