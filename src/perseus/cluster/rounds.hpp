// Gavel's round-based scheduling mechanism (docs/cluster.md): it turns an allocation X (the
// fraction of time each job, or each pair of jobs sharing GPUs, should spend on each GPU type)
// into rounds of whole-GPU leases whose time-average approaches X.
//
// What it schedules are combinations: a job alone, or two jobs sharing scale_factor GPUs (space
// sharing). Each round every (combination, GPU type) with X > 0 gets the priority X / f, f being
// the fraction of time the combination actually ran on type j. As the allocation is recomputed
// whenever a job arrives or finishes, both sides are kept per combination across allocations: the
// priority is entitled / received, entitled summing X x each round's length since the combination
// was first allocated (X / f while X stays put). Restarting the count at every new allocation
// instead would leave every job at "never ran" in a busy cluster and starve the classes with the
// smaller X. Priority is infinite while the combination has not run on the type (ties: the longest
// entitled first). Combinations are taken in decreasing priority (then larger X, then lower ids)
// and given `scale_factor` GPUs of the type when that many are still free, at most one lease per
// job per round: once a combination is picked, every other holding one of its jobs is passed over
// (the dissertation's Algorithm 2, greedy: a round that is off target is corrected by the next). A
// combination picked again on the type it held keeps its GPUs (lease renewal: no checkpoint and
// restart); the others are placed in decreasing scale factor, each on the one server with the
// fewest free GPUs that still holds it whole, else spread over the servers with the most free.
//
// next_round: O(J C log(J C)) for C combinations and J GPU types, plus O(G) placement for G GPUs.
#pragma once

#include <cstdint>
#include <vector>

namespace perseus::cluster {

// A job alone (partner -1) or two jobs sharing GPUs, and its share of each GPU type's time.
struct Combination {
  int job = 0;
  int partner = -1;           // -1: alone; else the other job's id, > job
  int scale_factor = 1;       // GPUs it uses at once (both jobs of a pair use the same)
  std::vector<double> share;  // [gpu type]
};

struct Lease {
  int job = 0;                // the id given to set_allocation
  int gpu_type = 0;
  std::vector<int> gpus;      // indices among that type's GPUs, server s holding [s g, (s+1) g)
  bool renewed = false;       // the same GPUs as the combination's previous round
  bool consolidated = true;   // all on one server
  int partner = -1;           // the job sharing these GPUs, or -1
  // The speed the job is to run at, as a fraction of its fastest on the type (the energy
  // stage's operating points: a slower clock plan); 1 for a pair. Set by the live scheduler.
  double pace = 1.0;
};

// InputError for a negative GPU count or gpus_per_server < 1 (every cluster description checks
// this), and for a round length that is not a number > 0.
void check_workers(const std::vector<int>& workers, int gpus_per_server);
void check_round_length(double round_s);

class RoundScheduler {
 public:
  // `workers[j]` GPUs of type j, `gpus_per_server` to a server (the last server of a type may be
  // smaller). InputError for a negative count or gpus_per_server < 1.
  RoundScheduler(std::vector<int> workers, int gpus_per_server);

  // A new allocation, combinations sorted by (job, partner), distinct. Combinations seen before
  // keep their entitled and received time; those left out are forgotten. The leases of the
  // previous round are kept for renewal. InputError for rows of the wrong width, unsorted or
  // repeated combinations, a partner not above its job, or a scale factor < 1.
  void set_allocation(std::vector<Combination> combinations);

  // The cluster changed (a server went down or came back): `workers` GPUs per type from now on,
  // the same number of types, servers of `gpus_per_server`. Combinations keep their history; the
  // previous round's leases are forgotten (GPU indices no longer name the same GPUs), so the next
  // round renews none. Call set_allocation after it: the allocation was for the old cluster.
  // InputError as the constructor, or for a different number of types.
  void set_workers(std::vector<int> workers, int gpus_per_server);

  // The leases of the coming round.
  std::vector<Lease> next_round();

  // After a round of `round_s` seconds: `ran_s[i]` is how long lease i ran (less than round_s for
  // a job that finished during the round). Jobs not leased are preempted.
  void finish_round(const std::vector<Lease>& leases, const std::vector<double>& ran_s, double round_s);

  // The gap between the allocation and what the rounds realised since it was set: the mean over
  // jobs of sum_j |f[m][j] - X[m][j]|, X and f a job's time on type j alone and in its pairs
  // together, f counted since set_allocation (0: exact; at most 2).
  double allocation_gap() const;
  // f per combination and type since set_allocation, in set_allocation's order.
  std::vector<std::vector<double>> received_share() const;

  const std::vector<int>& workers() const { return workers_; }
  int gpus_per_server() const { return gpus_per_server_; }

 private:
  std::vector<int> workers_;
  int gpus_per_server_;
  std::vector<Combination> combinations_;
  // The distinct jobs of the combinations (ascending), and each combination's jobs among them
  // (partner -1 when alone).
  std::vector<int> jobs_;
  std::vector<std::pair<int, int>> slots_;
  // [row * types + type]: received since set_allocation (for the gap), and entitled and received
  // since the combination was first allocated (for priorities).
  std::vector<double> received_s_, entitled_total_s_, received_total_s_;
  double elapsed_s_ = 0.0;  // since set_allocation
  std::size_t row_of(int job, int partner) const;  // combinations_.size() when absent
  std::vector<Lease> previous_;  // the last round's leases
};

}  // namespace perseus::cluster
