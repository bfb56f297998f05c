// Gavel's cluster simulator (docs/cluster.md): the live scheduler (cluster_scheduler.hpp) on the
// emulated backend (emulated_backend.hpp) whose truth is the matrix. Jobs are submitted as they
// arrive from a trace, a policy allocates the cluster whenever the set of jobs changes, and the
// round-based mechanism (rounds.hpp) runs them in rounds (6 minutes by default). A job on GPU type
// j advances at the allocation's speed there (the matrix's steps/s, or the energy stage's mix of
// operating points) and draws its power; two jobs sharing GPUs (space sharing) run at their
// shared speeds, the survivor alone once one finishes; one that finishes mid-round frees its GPUs
// for the next round. Energy counts busy GPUs only. No job runs: time is simulated.
//
// Cost: one policy solve per round in which jobs arrived or finished, plus O(M J log(M J)) per
// round for M active jobs (rounds.hpp).
#pragma once

#include <functional>
#include <limits>
#include <vector>

#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

struct SimulationProgress {
  double time_s = 0.0;
  int arrived = 0, finished = 0;   // jobs so far
  int window_finished = 0, window_size = 0;
};

struct SimulationSpec {
  PolicySpec policy;
  std::vector<int> workers;        // GPUs per type, in the matrix's order
  int gpus_per_server = 4;
  double round_s = 360.0;
  // Lost at the start of every lease that is not a renewal (checkpoint load); 0 as in Gavel's
  // simulator.
  double restart_overhead_s = 0.0;
  // The jobs (by arrival index) whose completion times are measured, [begin, end); end < 0: every
  // job, which needs a trace that ends. The simulation stops once they have all finished.
  int window_begin = 0, window_end = -1;
  double max_time_s = std::numeric_limits<double>::infinity();  // stop here even if unfinished
  std::function<void(const SimulationProgress&)> progress;      // called every 100 rounds and at the end
};

struct JobOutcome {
  int id = 0, type = 0;
  double arrival_s = 0.0, steps = 0.0, weight = 1.0;
  double start_s = -1.0, completion_s = -1.0;  // -1: not yet
  std::vector<double> gpu_s;                   // GPU-seconds held on each type (scale factor x time; half while sharing)
  double energy_j = 0.0;                       // its GPUs' energy while it ran (0 without energy figures)
  double slo_s = Job::kNoSlo;                  // from its arrival
  int entity = 0;                              // the hierarchical policy's (PolicySpec::entities)
  int rounds = 0, preemptions = 0, migrations = 0;
  bool measured = false;                       // in the window
  // The time its steps would have taken on 1/n of the cluster (X_isolated, n the jobs active as
  // each ran): Themis's isolated time, counted as Gavel's finish-time-fairness policy counts it.
  double isolated_s = 0.0;
  bool missed_slo() const { return finished() && jct_s() > slo_s * (1.0 + 1e-12); }
  bool finished() const { return completion_s >= 0.0; }
  double jct_s() const { return completion_s - arrival_s; }
  // rho = JCT / isolated time (finished jobs): below 1, the job fared better than on 1/n of the
  // cluster (the dissertation's Fig. 5.11).
  double finish_time_fairness() const { return isolated_s > 0.0 ? jct_s() / isolated_s : 0.0; }
};

struct RoundRecord {
  double start_s = 0.0;
  int active_jobs = 0;
  std::vector<int> busy_gpus;  // per type, leased this round
  double power_w = 0.0;        // the jobs' GPUs, averaged over the round
};

struct SimulationResult {
  std::vector<JobOutcome> jobs;       // every job that arrived, by id
  std::vector<RoundRecord> rounds;
  double end_s = 0.0;
  int allocations = 0;                // policy solves
  double policy_s = 0.0;              // wall-clock time in them
  // The window's jobs: how many, how many finished, their mean JCT and the time the last finished.
  int window_jobs = 0, window_unfinished = 0;
  double average_jct_s = 0.0, makespan_s = 0.0;
  double average_finish_time_fairness = 0.0;  // mean rho over the window's finished jobs
  std::vector<double> utilisation;    // per type: busy GPU-time / (GPUs x end_s)
  // The mechanism's realised allocation against the computed one (rounds.hpp's gap), averaged
  // over allocations weighted by how long each was in force.
  double allocation_gap = 0.0;
  int renewals = 0, leases = 0;
  // With prices (spec.policy.prices_per_hour): the window's jobs' GPU-hours x price.
  double cost = 0.0;
  // With energy figures (ThroughputMatrix::has_energy): the window's jobs' energy so far, J.
  double energy_j = 0.0;
  int slo_jobs = 0, slo_violations = 0;  // window jobs with an SLO, and those that finished late
};

// Throws InputError for a bad spec (workers not one per GPU type, a round <= 0; a window past an
// ending trace is fine), a job type outside the matrix or one that fits no GPU type of the
// cluster (a scale factor above every type's count it runs on); SolveError from a policy.
SimulationResult simulate(JobSource source, const ThroughputMatrix& matrix, const SimulationSpec& spec);

}  // namespace perseus::cluster
