// The energy stage of a cluster policy (docs/cluster.md, "Energy"), beyond Gavel: after a
// policy's allocation X*, run each job at the operating points (throughputs.hpp: points of its
// Perseus frontier, fastest to least energy per step) and on the GPU types that draw the least
// power for the throughput the policy gave it, less a stated slack. Over time fractions
// Y[m][j][p] of job m on GPU type j at operating point p, with speed S and energy per step E:
//   minimise  sum_{m,j,p} S[m][j][p] E[m][j][p] Y[m][j][p]         (the cluster's power, W)
//   subject to  sum_{j,p} S[m][j][p] Y[m][j][p] >= (1 - slack) tput(m, X*)   for every job m
//               (less a millionth, for the policy's LP tolerance),
//               sum_{j,p} Y[m][j][p] <= 1,   sum_m scale_m sum_p Y[m][j][p] <= workers[j],
//   and, heterogeneity-agnostic, sum_p Y[m][j][p] <= X*[m][j] (no type gets more of the job's
//   time than the policy gave it: the clocks move, and time may be given back).
// Every job keeps (1 - slack) of its throughput, so every objective made of throughputs stays
// within the slack of the policy's optimum: max-min fairness, FIFO and shortest-job-first
// weighted sums, max-throughput within a factor (1 - slack); makespan and finish-time ratios
// within 1 / (1 - slack). With every floor met, power is the energy per step times the
// throughput kept, so the LP minimises the cluster's energy per unit of work.
//
// One LP on CLP, (jobs x GPU types x points) variables; `copies` lets one row stand for
// identical jobs (max-min fairness's classes).
#pragma once

#include <vector>

#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

struct EnergyStage {
  std::vector<std::vector<double>> share;    // [job][gpu type]: fraction of time, sum_p Y
  std::vector<std::vector<double>> speed;    // [job][gpu type]: steps/s while there (the points' mix)
  std::vector<std::vector<double>> power_w;  // [job][gpu type]: W while there, every GPU of the job
};

// Preconditions: matrix.has_energy(); `share` valid for (jobs, workers) (a policy's X*);
// 0 <= slack < 1; copies empty (1 each) or one per job. Throws SolveError should CLP fail.
EnergyStage minimize_energy(const std::vector<Job>& jobs, const std::vector<double>& copies, const ThroughputMatrix& matrix,
                            const std::vector<int>& workers, const std::vector<std::vector<double>>& share, double slack,
                            bool heterogeneity_aware);

// The same fields for an allocation left at the fastest points: speed T[m][j], power S E of the
// first point (0 without energy figures).
EnergyStage fastest_points(const std::vector<Job>& jobs, const ThroughputMatrix& matrix,
                           const std::vector<std::vector<double>>& share);

}  // namespace perseus::cluster
