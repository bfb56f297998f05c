// A cluster that exists only as a clock (backend.hpp): each job advances at its job type's true
// steps/s on the GPU type it is leased (which need not be the scheduler's matrix: the scheduler
// learns it by measuring) times the lease's pace, drawing the power of that pace on the truth's
// operating points (the lower convex hull of their speed and power: a mix of two clock plans);
// two jobs sharing a lease run at their shared speeds until one finishes, the other then alone.
// A lease that is not a renewal loses `restart_s` (loading the checkpoint); a server can be taken
// down (its jobs lose their progress since their last checkpoint, every `checkpoint_s`) and
// brought back. The simulator (simulator.hpp) runs on it; so do the live scheduler's tests.
//
// Cost: O(leases + jobs not over) per round, O(servers of a lease) to place it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/cluster/backend.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

struct EmulatedCluster {
  ThroughputMatrix truth;         // steps/s each job type really runs at
  std::vector<int> workers;       // GPUs per type
  int gpus_per_server = 4;
  double restart_s = 0.0;         // lost at the start of a lease that is not a renewal
  double checkpoint_s = 60.0;     // a running job checkpoints this often (and when preempted)
};

class EmulatedBackend : public ClusterBackend {
 public:
  // InputError for workers not one per type of `truth`, a negative count, gpus_per_server < 1, a
  // negative restart or a checkpoint period not > 0.
  explicit EmulatedBackend(EmulatedCluster cluster);

  ClusterTopology topology() override;
  void submit(const BackendJob& job) override;
  void begin_round(const std::vector<Lease>& leases) override;
  std::vector<JobProgress> end_round(double round_s) override;
  void preempt_all() override { begin_round({}); }
  void cancel(int id) override;
  bool shares_gpus() const override { return true; }
  bool paces_jobs() const override { return true; }

  // Server `server` of GPU type `gpu_type` goes down (its jobs fall back to their last
  // checkpoint and stop) or comes back. InputError for a server outside the cluster.
  void set_server_up(int gpu_type, int server, bool up);
  double now_s() const { return now_s_; }

 private:
  struct RunningJob {
    BackendJob job;
    // Steps left, and left at its last checkpoint (kept as the simulator counts: steps left, so
    // that a job finishes when its remaining time fits the round).
    double left = 0.0, checkpoint_left = 0.0, since_checkpoint_s = 0.0;
    bool reported_done = false;
    // This round's lease: GPU type, its servers (by the original numbering), and where that is.
    int gpu_type = -1;
    std::vector<int> servers;
    std::string where;
  };
  // How one job used its lease this round.
  struct Run {
    int id = 0;
    double start_s = 0.0, run_s = 0.0;  // loading its checkpoint, then running
    double shared_s = 0.0, energy_j = 0.0;  // as JobProgress
    double steps = 0.0;                 // done
    bool finished = false;
  };
  // Original server number of the k-th server up of a type (leases index the GPUs up).
  int server_up(int gpu_type, int k) const;
  // Advances a lease's job (or pair) through a round of `round_s`; appends how each ran.
  void run_lease(const Lease& lease, double round_s, std::vector<Run>& runs);
  // W a job of type m draws on GPU type j running at `steps_per_s` (0 without energy figures).
  double power_at(int m, int j, double steps_per_s) const;
  void stop(RunningJob& r);  // off its GPUs (its progress kept as is)

  EmulatedCluster cluster_;
  std::vector<std::vector<char>> up_;  // [type][server]
  std::vector<RunningJob> jobs_;       // by id
  std::vector<int> live_;              // ids not yet reported over, ascending
  std::vector<Lease> leases_;          // this round's
  // [job type][gpu type]: the lower convex hull of the operating points' (steps/s, W), slowest first.
  std::vector<std::vector<std::vector<std::pair<double, double>>>> power_curve_;
  double now_s_ = 0.0;
};

}  // namespace perseus::cluster
