// Where the round-based mechanism's leases run (docs/cluster.md, "Running a cluster"): an
// emulated cluster (emulated_backend.hpp: a clock and the jobs' true speeds, for tests) or a real
// one (slurm_backend.hpp). The live scheduler (cluster_scheduler.hpp) hands each job over once,
// then every round the leases RoundScheduler made, and reads back what the jobs did.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/cluster/rounds.hpp"

namespace perseus::cluster {

// The GPUs that are up now, per GPU type of the matrix, on servers of `gpus_per_server` each
// (RoundScheduler's indexing: GPU g of a type is on that type's server g / gpus_per_server).
struct ClusterTopology {
  std::vector<int> workers;
  int gpus_per_server = 1;
  friend bool operator==(const ClusterTopology&, const ClusterTopology&) = default;
};

// A job as a backend runs it.
struct BackendJob {
  int id = 0;             // the scheduler's
  int type = 0;           // job type (row of the matrix)
  int gpus = 1;           // its scale factor
  double steps = 0.0;     // to do in all
  std::string command;    // what runs it (Slurm: the batch script's command line)
  double steps_done = 0.0;  // a restored job's progress: it resumes from its checkpoint
};

enum class JobStatus : std::uint8_t {
  kWaiting,   // submitted, not running (never leased, preempted, or its lease has not started yet)
  kRunning,
  kFinished,  // it ended well (all its steps done)
  kFailed,    // it ended badly; the backend's detail says how
  kCancelled, // its user stopped it (the scheduler's, never a backend's report)
};
// "waiting", "running", "finished", "failed", "cancelled".
inline std::string_view to_string(JobStatus status) {
  switch (status) {
    case JobStatus::kWaiting: return "waiting";
    case JobStatus::kRunning: return "running";
    case JobStatus::kFinished: return "finished";
    case JobStatus::kFailed: return "failed";
    case JobStatus::kCancelled: return "cancelled";
  }
  return "?";
}
inline constexpr JobStatus kJobStatuses[] = {JobStatus::kWaiting, JobStatus::kRunning, JobStatus::kFinished,
                                             JobStatus::kFailed, JobStatus::kCancelled};
// Finished, failed or cancelled: it never runs again.
inline bool is_over(JobStatus status) {
  return status == JobStatus::kFinished || status == JobStatus::kFailed || status == JobStatus::kCancelled;
}

// One job after a round.
struct JobProgress {
  int id = 0;
  JobStatus status = JobStatus::kWaiting;
  double steps_done = 0.0;  // as the job last reported (it may fall back to its checkpoint)
  // How long it held its lease's GPUs during the round (start-up included); a job running on
  // under a renewed lease: since its previous report, which its steps done count from (a backend
  // whose rounds start late may report more than the round).
  double ran_s = 0.0;
  double shared_s = 0.0;    // of ran_s, the time its partner held them too (space sharing)
  double energy_j = 0.0;    // its GPUs' energy during the round, where the backend measures it (else 0)
  std::string detail;       // kFailed: why; else where it ran ("n1,n2"), or empty
};

class ClusterBackend {
 public:
  virtual ~ClusterBackend() = default;
  // The GPUs up now. Called before every round: a change (a server down or back) makes the
  // scheduler reallocate.
  virtual ClusterTopology topology() = 0;
  // A new job; it does not run until leased.
  virtual void submit(const BackendJob& job) = 0;
  // The coming round: every job not in `leases` that runs is preempted (it checkpoints and
  // stops), a renewed lease's job keeps running, every other lease's job starts or resumes (from
  // its checkpoint) on the lease's GPUs. Leases are RoundScheduler's, with the scheduler's pace.
  virtual void begin_round(const std::vector<Lease>& leases) = 0;
  // Lets the round run `round_s` seconds (a real cluster: waits; an emulated one: advances its
  // clock), then reports every job submitted and not yet reported finished or failed.
  virtual std::vector<JobProgress> end_round(double round_s) = 0;
  // Every running job is preempted (it checkpoints and stops) and none starts until leased
  // again: before the scheduler stops with jobs unfinished.
  virtual void preempt_all() = 0;
  // Stops a job for good (running: killed, no checkpoint needed; waiting: dropped) and forgets
  // it: it is never leased nor reported again. Between rounds. InputError for a job the backend
  // does not have or has reported over.
  virtual void cancel(int id) = 0;
  // Whether two jobs may share a lease's GPUs (Lease::partner), and whether a job runs at a
  // lease's pace below 1 (a slower clock plan): the scheduler refuses space sharing and the
  // energy stage on a backend that cannot.
  virtual bool shares_gpus() const { return false; }
  virtual bool paces_jobs() const { return false; }
  // Makes a round in progress end now: end_round, on another thread, returns early (a real
  // cluster's round is minutes long; a server stopping should not wait for it). Thread-safe.
  virtual void interrupt() {}
};

}  // namespace perseus::cluster
