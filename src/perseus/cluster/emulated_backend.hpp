// A cluster that exists only as a clock (backend.hpp): each job advances at its job type's true
// steps/s on the GPU type it is leased (which need not be the scheduler's matrix: the scheduler
// learns it by measuring), loses `restart_s` of every lease that is not a renewal (loading its
// checkpoint), and a server can be taken down (its jobs lose their progress since their last
// checkpoint, every `checkpoint_s`) and brought back. For the live scheduler's tests, and for
// trying a policy without a cluster.
//
// Cost: O(leases + jobs) per round.
#pragma once

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

  // Server `server` of GPU type `gpu_type` goes down (its jobs fall back to their last
  // checkpoint and stop) or comes back. InputError for a server outside the cluster.
  void set_server_up(int gpu_type, int server, bool up);
  double now_s() const { return now_s_; }

 private:
  struct RunningJob {
    BackendJob job;
    double steps_done = 0.0, checkpoint = 0.0, since_checkpoint_s = 0.0;
    bool done = false, reported_done = false;
    // This round's lease: GPU type, its servers (by the original numbering), renewed.
    int gpu_type = -1;
    std::vector<int> servers;
    bool renewed = false;
  };
  // Original server number of the k-th server up of a type (leases index the GPUs up).
  int server_up(int gpu_type, int k) const;

  EmulatedCluster cluster_;
  std::vector<std::vector<char>> up_;  // [type][server]
  std::vector<RunningJob> jobs_;       // by id
  double now_s_ = 0.0;
};

}  // namespace perseus::cluster
