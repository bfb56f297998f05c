// The live scheduler's backend on a Slurm cluster (backend.hpp; docs/cluster.md, "Running on
// Slurm"), through libslurm (Debian's libslurm-dev, the version of the cluster's daemons).
//
// Nodes are servers: a node's GPU type is the type of its `gpu` GRES ("gpu:v100:4"), matched
// to the matrix's GPU types by name (nodes of other types are left out); a node is up unless
// Slurm has it down, drained, failing or not responding. Every node of the matrix's types must
// hold the same number of GPUs (the round scheduler's servers are alike).
//
// Each perseus job is one Slurm batch job, submitted held (priority 0) and never left for Slurm
// to place: a lease sets its nodes (ReqNodeList, the lease's servers), its begin time to now and
// releases it; a renewed lease leaves it running; a job leased no more is preempted by requeue
// in hold (Slurm sends SIGTERM, the job checkpoints and exits, and it waits held for its next
// lease, which resumes it from its checkpoint). Jobs ask for `--gpus=<scale factor>` untyped:
// the nodes give the type (Slurm 22.05 cannot change a pending job's typed GRES).
//
// The job's contract (what the command runs in): the environment of the scheduler plus
//   PERSEUS_JOB_ID     the scheduler's id,       PERSEUS_STEPS  steps to do in all,
//   PERSEUS_JOB_DIR    its directory (its own: checkpoints go there; the working directory),
// it resumes from its checkpoint when it starts, checkpoints and exits 0 on SIGTERM, exits 0 once
// its steps are done, and writes the steps done so far to $PERSEUS_JOB_DIR/progress (a number;
// written to a temporary file and renamed), at least every few seconds. Exit status not 0: the
// job failed. It runs at the pace in $PERSEUS_JOB_DIR/pace (a share of its fastest speed in
// (0, 1], the energy stage's operating point: a Perseus job runs its frontier's plan for
// T_min / pace), which the backend writes before the job starts and may rewrite while it runs
// (renamed into place; read it again at least every few seconds). Optionally it counts the
// energy its GPUs drew, in joules, across restarts, in $PERSEUS_JOB_DIR/energy (written as the
// progress is): the rounds report it. A node that dies takes its jobs' progress since their
// last checkpoint with it; Slurm requeues them and the scheduler leases them elsewhere.
//
// Cost per round: one slurm_load_jobs and slurm_load_node, and one RPC per started or preempted
// job.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "perseus/cluster/backend.hpp"

namespace perseus::cluster {

struct SlurmOptions {
  std::string config;     // slurm.conf; empty: $SLURM_CONF or Slurm's default
  std::string partition;  // empty: the cluster's default
  std::string job_root;   // each job's directory is <job_root>/job-<id>; created if missing
  double poll_s = 0.25;   // how often to ask again while waiting for Slurm
};

class SlurmBackend : public ClusterBackend {
 public:
  // `gpu_types`: the matrix's, in its order. InputError for an empty job_root; SolveError when
  // slurmctld does not answer.
  SlurmBackend(std::vector<std::string> gpu_types, SlurmOptions options);
  ~SlurmBackend() override;
  SlurmBackend(const SlurmBackend&) = delete;
  SlurmBackend& operator=(const SlurmBackend&) = delete;

  // InputError naming the nodes when nodes of the matrix's types hold different GPU counts.
  ClusterTopology topology() override;
  // Submits the job held (first cancelling a job of the same id and directory that a previous
  // scheduler left behind). SolveError with Slurm's message when it refuses.
  void submit(const BackendJob& job) override;
  void begin_round(const std::vector<Lease>& leases) override;
  std::vector<JobProgress> end_round(double round_s) override;

  // The Slurm job id of a perseus job (0: not submitted), and the nodes its last lease named.
  unsigned slurm_id(int job) const;
  const std::vector<std::string>& nodes_of(int job) const;
  // Every job not finished is requeued in hold (checkpointing).
  void preempt_all() override;
  // As scancel: Slurm signals the job (it may checkpoint, which nothing reads again) and ends it
  // without requeueing; waits a while for its GPUs to be free.
  void cancel(int id) override;
  void interrupt() override { interrupted_ = true; }
  // Slurm gives a GPU to one job; the job runs at the pace its lease writes.
  static constexpr bool kSharesGpus = false, kPacesJobs = true;
  bool shares_gpus() const override { return kSharesGpus; }
  bool paces_jobs() const override { return kPacesJobs; }

 private:
  struct Tracked {
    BackendJob job;
    unsigned slurm_id = 0;
    std::string dir;
    std::vector<std::string> nodes;  // its current lease's
    bool released = false;           // Slurm may run it (leased this round)
    bool delayed = false;            // pending at the last round's end, its begin time ahead
    bool over = false;               // reported finished or failed
    double steps_done = 0.0;
    double pace = 0.0;      // in its pace file (0: none written)
    double energy_j = 0.0;  // its energy counter at the last report
    // Wall time of its last report while it ran on its lease, -1: none since it (re)started. A
    // renewed job ran on between that report and the next round's start (the policy, other jobs
    // stopping), and its steps done are counted from that report: so is its time.
    double reported_s = -1.0;
  };
  // Jobs a scheduler that stopped without preempting left in Slurm (its server killed): live
  // perseus jobs of this user in job_root's directories, listed once, when the backend starts.
  void find_leftovers();
  // The leftover in `dir` (a restored scheduler submits its job again): cancelled, and waited for
  // (its checkpoint is what the new one resumes from). SolveError when it does not stop in time.
  void stop_leftover(const std::string& dir);
  void hold(Tracked& t);
  bool requeue_held(Tracked& t);  // false: it was not running
  // The jobs of `slurm_ids` that have not stopped yet after a while.
  std::set<unsigned> wait_until_stopped(const std::vector<unsigned>& slurm_ids);
  void release_on(Tracked& t, const std::vector<std::string>& nodes);
  double read_progress(const Tracked& t) const;
  void set_pace(Tracked& t, double pace);

  std::vector<std::string> gpu_types_;
  SlurmOptions options_;
  std::vector<std::vector<std::string>> servers_;  // [type]: nodes up, sorted (the topology's servers)
  int gpus_per_server_ = 1;
  std::map<int, Tracked> jobs_;
  std::map<std::string, std::vector<unsigned>> leftovers_;  // by job directory
  double round_start_ = 0.0;  // wall clock, seconds since the epoch
  std::atomic<bool> interrupted_{false};
};

}  // namespace perseus::cluster
